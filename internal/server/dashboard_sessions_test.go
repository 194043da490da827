package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/secrets"
	"factory/internal/store"
)

// TestSessionsArePruned: a session was removed only when its own cookie
// came back after it expired, so the sessions of every sign-in stayed in
// memory for ever, and a key could open any number. The attack: 60
// sign-ins with one key over a session that expired long ago; the expired
// one is gone, and the key holds at most maxSessionsPerKey, the newest.
func TestSessionsArePruned(t *testing.T) {
	data := t.TempDir()
	st, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	kr, err := secrets.LoadKeyring(data)
	if err != nil {
		t.Fatal(err)
	}
	const key = "fk_test_admin_key_0000000000000000000000000"
	b := st.NewBatch()
	b.PutAPIKey(key, &factory.APIKey{Name: "admin", Scope: factory.ScopeAdmin, CreatedAt: time.Now()})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	s := New(Config{}, &reconciler.Applier{Store: st, Keyring: kr}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	s.ui.mu.Lock()
	s.ui.m = map[string]*session{"expired": {KeyHash: store.HashAPIKey(key), Expires: time.Now().Add(-time.Hour)}}
	s.ui.mu.Unlock()

	var first *http.Client
	for i := range 60 {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp, err := c.Get(srv.URL + "/ui/login")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_, rest, _ := strings.Cut(string(page), `name="csrf" value="`)
		token, _, _ := strings.Cut(rest, `"`)
		resp, err = c.PostForm(srv.URL+"/ui/login", url.Values{"key": {key}, "csrf": {token}})
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in %d: %v %v", i+1, err, resp)
		}
		resp.Body.Close()
		if i == 0 {
			first = c
		}
	}
	s.ui.mu.Lock()
	n, expired := len(s.ui.m), s.ui.m["expired"] != nil
	s.ui.mu.Unlock()
	if expired || n > maxSessionsPerKey {
		t.Fatalf("after 60 sign-ins: %d sessions held (at most %d), the expired one kept: %v", n, maxSessionsPerKey, expired)
	}
	resp, err := first.Get(srv.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/ui/login" {
		t.Fatalf("the oldest session still signs in: %s", resp.Request.URL)
	}
}
