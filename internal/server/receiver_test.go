package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"factory/internal/reconciler"
	"factory/internal/secrets"
	"factory/internal/store"
)

func TestNormalizeRepoURL(t *testing.T) {
	want := "github.com/acme/factory"
	for _, u := range []string{
		"https://github.com/acme/factory.git", "https://github.com/acme/factory", "https://GitHub.com/acme/factory/",
		"git@github.com:acme/factory.git", "ssh://git@github.com/acme/factory.git", "git://github.com/acme/factory.git",
		"https://user:token@github.com/acme/factory.git",
	} {
		if got := normalizeRepoURL(u); got != want {
			t.Errorf("%s: %s, want %s", u, got, want)
		}
	}
	if normalizeRepoURL("https://github.com/acme/other") == want {
		t.Error("another repository compares equal")
	}
}

// TestPushRefusalsAreLoggedBounded: every refused push notification was
// logged, so senders from many addresses could fill the disk and bury the
// server's log. The attack: 200 forged notifications, each from an address
// of its own (no per-address budget applies); at most 30 refusals a minute
// are logged, and the rest are counted.
func TestPushRefusalsAreLoggedBounded(t *testing.T) {
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
	if _, _, err := secrets.Create(st, kr, "push-secret", []byte("s3cret-push-key"), false, time.Now()); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	s := New(Config{PushSecret: "push-secret"}, &reconciler.Applier{Store: st, Keyring: kr}, slog.New(slog.NewTextHandler(&log, nil)))
	h := s.Handler()
	for i := range 200 {
		req := httptest.NewRequest(http.MethodPost, "/hooks/push", strings.NewReader(`{"ref":"refs/heads/main"}`))
		req.RemoteAddr = fmt.Sprintf("10.0.%d.%d:1234", i/250, i%250+1)
		req.Header.Set("X-Hub-Signature-256", "sha256=00")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("a forged notification: %d %s", w.Code, w.Body)
		}
	}
	if n := strings.Count(log.String(), "push notification refused"); n > 30 {
		t.Fatalf("%d refusals logged in a minute, want at most 30", n)
	}
}

func TestPushTime(t *testing.T) {
	for raw, want := range map[string]string{
		`1700000000`:                  "2023-11-14T22:13:20Z",
		`"2026-11-24T09:00:00Z"`:      "2026-11-24T09:00:00Z",
		`"2026-11-24T10:00:00+01:00"`: "2026-11-24T09:00:00Z",
		``:                            "",
		`null`:                        "",
		`"yesterday"`:                 "",
		`"1700000000"`:                "",
		`1.5`:                         "",
		`1e9`:                         "",
		`true`:                        "",
		`{}`:                          "",
		`-1`:                          "1969-12-31T23:59:59Z",
	} {
		at, err := pushTime(json.RawMessage(raw))
		got := ""
		if err == nil {
			got = at.UTC().Format(time.RFC3339)
		}
		if got != want {
			t.Errorf("pushed_at %s: %q %v, want %q", raw, got, err, want)
		}
	}
}

// FuzzPushTime: repository.pushed_at is read as encoding/json reads an
// int64 (Unix seconds) or a string that is an RFC 3339 time; anything
// else is refused with a reason.
func FuzzPushTime(f *testing.F) {
	for _, s := range []string{`1700000000`, `"2026-11-24T09:00:00Z"`, `null`, ``, `"x"`, `1.5`, `99999999999999999999`, `"\u0032026-11-24T09:00:00Z"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		at, err := pushTime(json.RawMessage(raw))
		var n int64
		var text string
		switch {
		case json.Unmarshal([]byte(raw), &n) == nil && raw != "null":
			if err != nil || !at.Equal(time.Unix(n, 0)) {
				t.Fatalf("%q: %s %v, want Unix %d", raw, at, err, n)
			}
		case json.Unmarshal([]byte(raw), &text) == nil && raw != "null":
			want, perr := time.Parse(time.RFC3339, text)
			if (perr == nil) != (err == nil) || perr == nil && !at.Equal(want) {
				t.Fatalf("%q: %s %v, want %s %v", raw, at, err, want, perr)
			}
		case err == nil:
			t.Fatalf("%q: read %s, where encoding/json reads neither seconds nor a string", raw, at)
		}
		if err != nil && err.Error() == "" {
			t.Fatalf("%q: a refusal without a reason", raw)
		}
	})
}
