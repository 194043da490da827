package gitsource_test

import (
	"context"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"factory/internal/reconciler/gitsource"
	"factory/internal/reconciler/gitsource/gittest"
)

// TestHTTPSTokenAuth serves a remote over git's smart HTTP protocol on
// loopback (git http-backend behind Go's CGI handler) with basic auth, and
// fetches it with and without the right token.
func TestHTTPSTokenAuth(t *testing.T) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skip("no git binary for http-backend")
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	remote := gittest.NewRemote(t)
	c1 := remote.Commit("one", map[string]string{"webhooks/a.yaml": "authMode: token\n"})
	bare := strings.TrimPrefix(remote.URL, "file://")

	git := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(bare), "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != "ci-bot" || pass != "tok3n" {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		git.ServeHTTP(w, r)
	}))
	defer srv.Close()
	url := srv.URL + "/" + filepath.Base(bare)

	cred := func(v string) gitsource.Credential { return func() ([]byte, error) { return []byte(v), nil } }
	src := &gitsource.Source{URL: url, Ref: "main", Credential: cred("ci-bot:tok3n\n")}
	snap, err := src.Fetch(context.Background())
	if err != nil || snap.Revision != "main@sha1:"+c1.String() || snap.Files["webhooks/a.yaml"] == nil {
		t.Fatalf("with the token: %v %+v", err, snap)
	}
	for _, bad := range []gitsource.Credential{nil, cred("ci-bot:wrong"), cred("tok3n")} {
		if _, err := (&gitsource.Source{URL: url, Ref: "main", Credential: bad}).Fetch(context.Background()); err == nil ||
			!strings.Contains(err.Error(), "authentication required") {
			t.Fatalf("a wrong credential: %v", err)
		}
	}
}
