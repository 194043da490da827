package githubtest

import (
	"net/http"
	"testing"

	"factory/internal/codehost/gitserver"
)

// gitHandler serves the fake's repositories over git's smart HTTP to
// whoever gives an installation token that reaches the repository as its
// password (as GitHub takes them: x-access-token:<token>); pushes
// included.
func (f *Fake) gitHandler() http.Handler {
	h := gitserver.Handler(f.t, f.gitRoot, func(user, pass, repo string) bool {
		owner, name, _ := cut(repo)
		r := &http.Request{Header: http.Header{"Authorization": {"token " + pass}}}
		ok := f.installationToken(r, owner, name) != nil
		if ok {
			f.mu.Lock()
			f.gitRequests = append(f.gitRequests, repo)
			f.mu.Unlock()
		}
		return ok
	})
	return h
}

func cut(repo string) (owner, name string, ok bool) {
	for i := 0; i < len(repo); i++ {
		if repo[i] == '/' {
			return repo[:i], repo[i+1:], true
		}
	}
	return repo, "", false
}

// seed makes a bare repository at dir whose main branch has one commit.
func seed(t testing.TB, dir string, files map[string]string) { gitserver.Seed(t, dir, files) }

// hasBranch reports whether a bare repository has a branch.
func hasBranch(dir, branch string) bool { return gitserver.HasBranch(dir, branch) }

// Head is the commit a branch of a repository of the fake points at.
func (f *Fake) Head(owner, name, branch string) string {
	return gitserver.Head(f.RepoDir(owner, name), branch)
}

// GitRequests are the repositories the fake's git server served.
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
	return gitserver.Commit(f.t, f.RepoDir(owner, name), branch, files)
}
