package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// TestACPFileConfinement: the agent's file requests stay in the workspace,
// whatever links it made. The attack: ReadTextFile("ws/link") with link →
// /outside/secret returned the secret, and a write through a dangling link
// created a file outside.
func TestACPFileConfinement(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	os.WriteFile(secret, []byte("the admin key"), 0o600)
	os.WriteFile(filepath.Join(ws, "notes.md"), []byte("inside"), 0o600)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(secret, filepath.Join(ws, "link")))
	must(os.Symlink(filepath.Join(outside, "created"), filepath.Join(ws, "dangling")))
	must(os.Symlink(outside, filepath.Join(ws, "dirlink")))
	must(os.Symlink("notes.md", filepath.Join(ws, "inner")))
	c := &acpClient{workspace: ws, activity: make(chan struct{}, 8)}
	ctx := context.Background()
	read := func(p string) (string, error) {
		r, err := c.ReadTextFile(ctx, acp.ReadTextFileRequest{Path: p})
		return r.Content, err
	}
	write := func(p string) error {
		_, err := c.WriteTextFile(ctx, acp.WriteTextFileRequest{Path: p, Content: "x"})
		return err
	}
	for _, p := range []string{"link", filepath.Join(ws, "link"), "dirlink/secret", "../" + filepath.Base(outside) + "/secret", secret} {
		if got, err := read(p); err == nil {
			t.Errorf("read %s: %q, want a refusal", p, got)
		}
	}
	for _, p := range []string{"dangling", "dirlink/new", filepath.Join(outside, "direct")} {
		if err := write(p); err == nil {
			t.Errorf("write %s: accepted, want a refusal", p)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("files appeared outside the workspace: %v", entries)
	}
	// Inside, everything works, links that stay inside included.
	if got, err := read("inner"); err != nil || got != "inside" {
		t.Errorf("read through an inner link: %q %v", got, err)
	}
	if got, err := read(filepath.Join(ws, "notes.md")); err != nil || got != "inside" {
		t.Errorf("read by absolute path: %q %v", got, err)
	}
	if err := write("a/b/c.txt"); err != nil {
		t.Errorf("write into new folders: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a", "b", "c.txt")); string(b) != "x" {
		t.Errorf("the written file: %q", b)
	}
}
