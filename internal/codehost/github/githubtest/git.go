package githubtest

import (
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitHandler serves the fake's repositories over git's smart HTTP through
// Debian's git http-backend, to whoever gives an installation token that
// reaches the repository as its password (as GitHub takes them:
// x-access-token:<token>); pushes included.
func (f *Fake) gitHandler() http.Handler {
	backend := gitHTTPBackend(f.t)
	cgiH := &cgi.Handler{Path: backend, Root: "/git/", Env: []string{"GIT_PROJECT_ROOT=" + f.gitRoot, "GIT_HTTP_EXPORT_ALL=1",
		"REMOTE_USER=x-access-token"}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, "/git/")
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) < 3 {
			http.NotFound(w, r)
			return
		}
		owner, name := parts[0], strings.TrimSuffix(parts[1], ".git")
		_, pass, ok := r.BasicAuth()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		r2 := r.Clone(r.Context())
		r2.Header.Set("Authorization", "token "+pass)
		if f.installationToken(r2, owner, name) == nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "invalid credentials", http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		f.gitRequests = append(f.gitRequests, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		cgiH.ServeHTTP(w, r)
	})
}

// gitHTTPBackend is git's http-backend program, or the test skips.
func gitHTTPBackend(t testing.TB) string {
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

// seed makes a bare repository at dir whose main branch has one commit of
// files.
func seed(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	work := t.TempDir()
	for name, body := range files {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(dir string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=Test",
			"GIT_COMMITTER_EMAIL=test@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+work)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run(work, "init", "-q", "-b", "main")
	run(work, "add", "-A")
	run(work, "commit", "-q", "--allow-empty", "-m", "The first commit")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	run(filepath.Dir(dir), "clone", "-q", "--bare", work, dir)
	run(dir, "config", "http.receivepack", "true")
}

// hasBranch reports whether a bare repository has a branch.
func hasBranch(dir, branch string) bool {
	return exec.Command("git", "--git-dir", dir, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Run() == nil
}

// Head is the commit a branch of a repository of the fake points at.
func (f *Fake) Head(owner, name, branch string) string {
	f.mu.Lock()
	r := f.repos[owner+"/"+name]
	f.mu.Unlock()
	if r == nil {
		return ""
	}
	out, err := exec.Command("git", "--git-dir", r.Dir, "rev-parse", "refs/heads/"+branch).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// GitRequests are the git requests the fake served, "METHOD path".
func (f *Fake) GitRequests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.gitRequests...)
}

// RepoDir is the bare repository behind a repository of the fake.
func (f *Fake) RepoDir(owner, name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.repos[owner+"/"+name]; r != nil {
		return r.Dir
	}
	return ""
}

// Commit pushes a commit of files (path → content; "" removes the file)
// onto a branch of a repository of the fake (made from main when new),
// and returns it.
func (f *Fake) Commit(owner, name, branch string, files map[string]string) string {
	f.t.Helper()
	dir := f.RepoDir(owner, name)
	work := f.t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=Test",
			"GIT_COMMITTER_EMAIL=test@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+work)
		if out, err := cmd.CombinedOutput(); err != nil {
			f.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("clone", "-q", dir, ".")
	if hasBranch(dir, branch) {
		run("checkout", "-q", branch)
	} else {
		run("checkout", "-q", "-b", branch)
	}
	for p, body := range files {
		full := filepath.Join(work, p)
		if body == "" {
			_ = os.Remove(full)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			f.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	run("add", "-A")
	run("commit", "-q", "--allow-empty", "-m", "A change")
	run("push", "-q", "origin", branch)
	return f.Head(owner, name, branch)
}
