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

	// A burst of 100 writes settles into one signal.
	for i := 0; i < 100; i++ {
		os.WriteFile(filepath.Join(root, "webhooks", fmt.Sprintf("b%d.yaml", i%10)), []byte(fmt.Sprintf("description: %d\n", i)), 0o644)
	}
	expectSignal(t, ch, "a burst")
	expectQuiet(t, ch, "a burst")

	// A deletion.
	os.Remove(filepath.Join(root, "webhooks", "a.yaml"))
	expectSignal(t, ch, "a deletion")
}
