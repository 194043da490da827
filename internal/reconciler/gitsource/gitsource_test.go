package gitsource_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"factory/internal/reconciler"
	"factory/internal/reconciler/gitsource"
	"factory/internal/reconciler/gitsource/gittest"
	"factory/internal/store"
)

func TestFetchBranchTagCommit(t *testing.T) {
	ctx := context.Background()
	r := gittest.NewRemote(t)
	c1 := r.Commit("one", map[string]string{"webhooks/a.yaml": "authMode: token\n", "README.md": "ignored\n", "factory.yaml": "description: x\n"})

	src := &gitsource.Source{URL: r.URL, Ref: "main"}
	snap, err := src.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != "main@sha1:"+c1.String() {
		t.Fatalf("revision %s", snap.Revision)
	}
	if string(snap.Files["webhooks/a.yaml"]) != "authMode: token\n" || snap.Files["README.md"] != nil || snap.Files["factory.yaml"] == nil {
		t.Fatalf("files %v", snap.Files)
	}

	// An unchanged head costs an ls-remote, not a clone.
	if _, err := src.Fetch(ctx); err != nil || src.Clones() != 1 {
		t.Fatalf("second fetch: %v, %d clones", err, src.Clones())
	}

	c2 := r.Commit("two", map[string]string{"webhooks/b.yaml": "authMode: url_token\n", "webhooks/a.yaml": ""})
	snap, err = src.Fetch(ctx)
	if err != nil || snap.Revision != "main@sha1:"+c2.String() || snap.Files["webhooks/a.yaml"] != nil || snap.Files["webhooks/b.yaml"] == nil {
		t.Fatalf("after a push: %v %s %v", err, snap.Revision, snap.Files)
	}

	// A force-push to an older commit is followed.
	r.ResetMain(c1)
	snap, err = src.Fetch(ctx)
	if err != nil || snap.Revision != "main@sha1:"+c1.String() {
		t.Fatalf("after a force-push: %v %s", err, snap.Revision)
	}

	// Tags, lightweight and annotated, and a pinned commit.
	r.Tag("v1", c1, false)
	r.Tag("v2", c2, true)
	for ref, want := range map[string]string{"v1": "v1@sha1:" + c1.String(), "v2": "v2@sha1:" + c2.String(), c2.String(): "sha1:" + c2.String(), "": "main@sha1:" + c1.String()} {
		snap, err := (&gitsource.Source{URL: r.URL, Ref: ref}).Fetch(ctx)
		if err != nil || snap.Revision != want {
			t.Fatalf("ref %q: %v, revision %v, want %s", ref, err, snap, want)
		}
	}

	if _, err := (&gitsource.Source{URL: r.URL, Ref: "nope"}).Fetch(ctx); err == nil || !strings.Contains(err.Error(), `has no branch or tag "nope"`) {
		t.Fatalf("missing ref: %v", err)
	}
	if _, err := (&gitsource.Source{URL: "file:///nonexistent/repo.git", Ref: "main"}).Fetch(ctx); err == nil {
		t.Fatal("a missing remote fetched")
	}
}

func TestHostileTree(t *testing.T) {
	r := gittest.NewRemote(t)
	wt := r.Worktree()
	os.MkdirAll(filepath.Join(r.Dir(), "webhooks"), 0o755)
	os.Symlink("../../../etc/passwd", filepath.Join(r.Dir(), "webhooks", "escape.yaml"))
	os.Symlink("../shared/hook.yaml", filepath.Join(r.Dir(), "webhooks", "inside.yaml"))
	wt.Add("webhooks/escape.yaml")
	wt.Add("webhooks/inside.yaml")
	r.Commit("links", map[string]string{"shared/hook.yaml": "authMode: token\n", "webhooks/big.yaml": strings.Repeat("#", 1<<20+1)})
	snap, err := (&gitsource.Source{URL: r.URL, Ref: "main"}).Fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, d := range snap.Diagnostics {
		msgs = append(msgs, d.String())
	}
	got := strings.Join(msgs, "\n")
	for _, want := range []string{"webhooks/escape.yaml: symlink leads outside the repository", "webhooks/big.yaml: file is 1048577 bytes; the limit is 1 MiB"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if string(snap.Files["webhooks/inside.yaml"]) != "authMode: token\n" {
		t.Errorf("a symlink inside the repository was not followed: %q", snap.Files["webhooks/inside.yaml"])
	}
}

func TestIsGitURL(t *testing.T) {
	for s, want := range map[string]bool{"https://github.com/acme/f.git": true, "git@github.com:acme/f.git": true, "ssh://git@h/x": true,
		"file:///tmp/x": true, "examples/factory": false, "/srv/factory": false, "./f.git": true} {
		if gitsource.IsGitURL(s) != want {
			t.Errorf("IsGitURL(%q) = %v", s, !want)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:tok3n@github.com/acme/factory.git": "https://user:xxxxx@github.com/acme/factory.git",
		"https://ghp_tok3n@github.com/acme/factory.git":  "https://xxxxx@github.com/acme/factory.git",
		"https://github.com/acme/factory.git":            "https://github.com/acme/factory.git",
		"ssh://git@github.com/acme/factory.git":          "ssh://git@github.com/acme/factory.git",
		"ssh://git:tok3n@github.com/acme/factory.git":    "ssh://git:xxxxx@github.com/acme/factory.git",
		"git@github.com:acme/factory.git":                "git@github.com:acme/factory.git",
		"file:///srv/factory.git":                        "file:///srv/factory.git",
	} {
		if got := gitsource.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCredentialsNeverShown: a token in a git URL shows neither in the
// source's name nor in its errors, and so neither in the factory's status
// nor in the server's log. The attack: https://user:token@host/repo was
// logged in source= and err=, and returned as source to runs-scoped keys.
func TestCredentialsNeverShown(t *testing.T) {
	const token = "s3cret-t0ken"
	src := &gitsource.Source{URL: "http://user:" + token + "@127.0.0.1:1/acme/factory.git", Ref: "main"}
	if strings.Contains(src.String(), token) {
		t.Fatalf("String() = %q", src.String())
	}
	_, err := src.Fetch(context.Background())
	if err == nil || strings.Contains(err.Error(), token) {
		t.Fatalf("Fetch error: %v", err)
	}
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ap := &reconciler.Applier{Store: s}
	if _, _, err := ap.Sync(context.Background(), "acme", src); err == nil {
		t.Fatal("a sync from a closed port succeeded")
	}
	f, err := s.Factory("acme")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(f.Source, token) || strings.Contains(f.Error, token) || !strings.Contains(f.Source, "xxxxx") {
		t.Fatalf("the factory's record shows the credential: source %q, error %q", f.Source, f.Error)
	}
}

// TestDanglingHEAD: a bare remote whose HEAD points at master, with only
// main pushed (git init --bare of an older git), is followed at main
// without --ref.
func TestDanglingHEAD(t *testing.T) {
	r := gittest.NewRemote(t)
	c := r.Commit("one", map[string]string{"webhooks/a.yaml": "authMode: token\n"})
	r.SetHEAD("master")
	snap, err := (&gitsource.Source{URL: r.URL}).Fetch(context.Background())
	if err != nil || snap.Revision != "main@sha1:"+c.String() {
		t.Fatalf("followed %v: %v", snap, err)
	}
}
