// Package gitserver serves bare git repositories over git's smart HTTP,
// for the fake code hosts of tests: Debian's git http-backend behind
// net/http/cgi, pushes included, to whoever the fake's auth lets in.
package gitserver

import (
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Handler serves the repositories under root at /git/<path>.git to the
// requests auth admits (with the repository's path, owner/name or a
// GitLab project's path): their Basic credentials are the host's.
func Handler(t testing.TB, root string, auth func(user, pass, repo string) bool) http.Handler {
	t.Helper()
	backend := Backend(t)
	cgiH := &cgi.Handler{Path: backend, Root: "/git/", Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1",
		"REMOTE_USER=agent"}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, "/git/")
		i := strings.Index(rest, ".git/")
		if i < 0 {
			http.NotFound(w, r)
			return
		}
		user, pass, ok := r.BasicAuth()
		if !ok || !auth(user, pass, rest[:i]) {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		cgiH.ServeHTTP(w, r)
	})
}

// Backend is git's http-backend program, or the test skips.
func Backend(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git is not installed: %v", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("git has no http-backend (%v): the fake cannot serve repositories", err)
	}
	return p
}

// Seed makes a bare repository at dir whose main branch has one commit of
// files, and lets pushes in.
func Seed(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	work := t.TempDir()
	writeFiles(t, work, files)
	g := Git(t, work)
	g("init", "-q", "-b", "main")
	g("add", "-A")
	g("commit", "-q", "--allow-empty", "-m", "The first commit")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	Git(t, filepath.Dir(dir))("clone", "-q", "--bare", work, dir)
	Git(t, dir)("config", "http.receivepack", "true")
}

// Commit pushes a commit of files (path → content; "" removes it) onto a
// branch of the bare repository at dir (made from main when new), and
// returns it.
func Commit(t testing.TB, dir, branch string, files map[string]string) string {
	t.Helper()
	work := t.TempDir()
	g := Git(t, work)
	g("clone", "-q", dir, ".")
	if HasBranch(dir, branch) {
		g("checkout", "-q", branch)
	} else {
		g("checkout", "-q", "-b", branch)
	}
	writeFiles(t, work, files)
	g("add", "-A")
	g("commit", "-q", "--allow-empty", "-m", "A change")
	g("push", "-q", "origin", branch)
	return Head(dir, branch)
}

func writeFiles(t testing.TB, root string, files map[string]string) {
	for p, body := range files {
		full := filepath.Join(root, p)
		if body == "" {
			_ = os.Remove(full)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Git runs git in dir as a test's author, failing the test on an error.
func Git(t testing.TB, dir string) func(args ...string) {
	return func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=Test",
			"GIT_COMMITTER_EMAIL=test@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// HasBranch reports whether a bare repository has a branch.
func HasBranch(dir, branch string) bool {
	return exec.Command("git", "--git-dir", dir, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Run() == nil
}

// Head is the commit a branch of a bare repository points at; "" when it
// has no such branch.
func Head(dir, branch string) string {
	out, err := exec.Command("git", "--git-dir", dir, "rev-parse", "refs/heads/"+branch).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
