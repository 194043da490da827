// Package gittest makes git remotes for tests: a bare repository served
// over the file transport, and a working repository that commits and
// pushes to it, all in-process with go-git.
package gittest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Remote is a bare repository served over the file transport, and a
// working repository that commits and pushes to it.
type Remote struct {
	t    testing.TB
	URL  string
	work *git.Repository
	dir  string
	bare *git.Repository
}

func NewRemote(t testing.TB) *Remote {
	t.Helper()
	root := t.TempDir()
	bare := filepath.Join(root, "remote.git")
	remote, err := git.PlainInit(bare, true)
	if err != nil {
		t.Fatal(err)
	}
	remote.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName("main")))
	dir := filepath.Join(root, "work")
	work, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := work.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{"file://" + bare}}); err != nil {
		t.Fatal(err)
	}
	return &Remote{t: t, URL: "file://" + bare, work: work, dir: dir, bare: remote}
}

// Commit writes files (an empty content removes the file), commits, and
// pushes the branch main. It returns the commit hash.
func (r *Remote) Commit(msg string, files map[string]string) plumbing.Hash {
	r.t.Helper()
	wt, err := r.work.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	for p, c := range files {
		full := filepath.Join(r.dir, p)
		if c == "" {
			os.Remove(full)
			wt.Remove(p)
			continue
		}
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			r.t.Fatal(err)
		}
		if _, err := wt.Add(p); err != nil {
			r.t.Fatal(err)
		}
	}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}})
	if err != nil {
		r.t.Fatal(err)
	}
	head, _ := r.work.Head()
	if head.Name() != plumbing.NewBranchReferenceName("main") {
		// go-git names the first branch master; use main, as GitHub does.
		r.work.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName("main"), h))
		r.work.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName("main")))
	}
	r.Push("+refs/heads/main:refs/heads/main")
	return h
}

func (r *Remote) Push(spec string) {
	r.t.Helper()
	err := r.work.Push(&git.PushOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{config.RefSpec(spec)}, Force: true})
	if err != nil && err != git.NoErrAlreadyUpToDate {
		r.t.Fatal(err)
	}
}

// ResetMain points main at an older commit and force-pushes it.
func (r *Remote) ResetMain(h plumbing.Hash) {
	r.t.Helper()
	r.work.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName("main"), h))
	r.Push("+refs/heads/main:refs/heads/main")
}

// Hash is a commit hash.
type Hash = plumbing.Hash

// Dir is the working repository's directory.
func (r *Remote) Dir() string { return r.dir }

// Worktree is the working repository's worktree.
func (r *Remote) Worktree() *git.Worktree {
	wt, err := r.work.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	return wt
}

func (r *Remote) Tag(name string, h plumbing.Hash, annotated bool) {
	r.t.Helper()
	var opts *git.CreateTagOptions
	if annotated {
		opts = &git.CreateTagOptions{Message: name, Tagger: &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}}
	}
	if _, err := r.work.CreateTag(name, h, opts); err != nil {
		r.t.Fatal(err)
	}
	r.Push("refs/tags/" + name + ":refs/tags/" + name)
}

// SetHEAD points the remote's HEAD at a branch, which need not exist.
func (r *Remote) SetHEAD(branch string) {
	r.t.Helper()
	if err := r.bare.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName(branch))); err != nil {
		r.t.Fatal(err)
	}
}
