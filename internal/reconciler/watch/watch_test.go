package watch_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"factory/internal/reconciler/watch"
)

func start(t *testing.T, root string) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := watch.Dir(ctx, root, 50*time.Millisecond, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func expectSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("no signal after %s", what)
	}
}

func expectQuiet(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("a second signal after %s", what)
	case <-time.After(300 * time.Millisecond):
	}
}

// drain takes the signals that come within d.
func drain(ch <-chan struct{}, d time.Duration) {
	for end := time.After(d); ; {
		select {
		case <-ch:
		case <-end:
			return
		}
	}
}

func TestDirSignals(t *testing.T) {
	root := t.TempDir()
	ch := start(t, root)

	// A folder created after start is watched from then on.
	if err := os.Mkdir(filepath.Join(root, "webhooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	expectSignal(t, ch, "creating webhooks/")
	os.WriteFile(filepath.Join(root, "webhooks", "a.yaml"), []byte("authMode: token\n"), 0o644)
	expectSignal(t, ch, "a write inside the new folder")

	// An editor-style save: write a temporary file, rename it over the old.
	tmp := filepath.Join(root, "webhooks", ".a.yaml.swp")
	os.WriteFile(tmp, []byte("authMode: url_token\n"), 0o644)
	os.Rename(tmp, filepath.Join(root, "webhooks", "a.yaml"))
	expectSignal(t, ch, "an atomic save")

	// A burst of 100 writes settles into one signal (when the machine
	// wrote it within the debounce: a pause as long as that, on a loaded
	// machine, rightly makes two).
	began := time.Now()
	for i := 0; i < 100; i++ {
		os.WriteFile(filepath.Join(root, "webhooks", fmt.Sprintf("b%d.yaml", i%10)), []byte(fmt.Sprintf("description: %d\n", i)), 0o644)
	}
	took := time.Since(began)
	expectSignal(t, ch, "a burst")
	if took < 25*time.Millisecond {
		expectQuiet(t, ch, "a burst")
	} else {
		drain(ch, 300*time.Millisecond)
	}

	// A deletion.
	os.Remove(filepath.Join(root, "webhooks", "a.yaml"))
	expectSignal(t, ch, "a deletion")
}

// The v1alpha1 layout nests definitions: folders made at any depth inside
// a known folder, after start or before, are watched; others are not.
func TestNestedFolders(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "agents", "lead"), 0o755); err != nil {
		t.Fatal(err)
	}
	ch := start(t, root)
	os.WriteFile(filepath.Join(root, "agents", "lead", "agent.md"), []byte("---\n---\n"), 0o644)
	expectSignal(t, ch, "a write in a folder that existed at start")
	expectQuiet(t, ch, "one write")

	deep := filepath.Join(root, "agents", "builder", "skills", "notes")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	expectSignal(t, ch, "making agents/builder/skills/notes")
	time.Sleep(100 * time.Millisecond) // the new folders are added as their creation is seen
	os.WriteFile(filepath.Join(deep, "SKILL.md"), []byte("x\n"), 0o644)
	expectSignal(t, ch, "a write three folders below one made after start")
	expectQuiet(t, ch, "one write")

	if err := os.MkdirAll(filepath.Join(root, "docs", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	expectSignal(t, ch, "making docs/ (the root is watched)")
	os.WriteFile(filepath.Join(root, "docs", "deep", "x.md"), []byte("x\n"), 0o644)
	expectQuiet(t, ch, "a write in a folder that is not the factory's")
}
