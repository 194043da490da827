package worker

import (
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"factory/internal/runtime"
)

// TestOwnCommand: worker.SelfCommand becomes this worker's own binary, or,
// in a container, the factory on the image's PATH; other commands run as
// they are.
func TestOwnCommand(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got := ownCommand([]string{SelfCommand, "demo-agent"}, false); got[0] != self || got[1] != "demo-agent" {
		t.Errorf("direct: %v", got)
	}
	if got := ownCommand([]string{SelfCommand, "demo-agent"}, true); got[0] != "factory" {
		t.Errorf("in a container: %v", got)
	}
	if got := ownCommand([]string{"sh", "-c", "true"}, false); got[0] != "sh" {
		t.Errorf("another command: %v", got)
	}
}

// TestOutputsStayInTheOutputFolder is the attack of an agent that swaps
// its output folder for a link to the worker's own files (or leaves links
// in it): the worker must send back none of what they lead to.
func TestOutputsStayInTheOutputFolder(t *testing.T) {
	secrets, run := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "worker.creds"), []byte("the worker's password"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &Worker{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sent := func() map[string][]byte {
		e := Event{RunID: "run_1", Attempt: "at_1", Result: &runtime.Result{}}
		w.attachOutputs(&e, filepath.Join(run, "output"))
		return e.Outputs
	}
	// The output folder is a link to the worker's secrets.
	if err := os.Symlink(secrets, filepath.Join(run, "output")); err != nil {
		t.Fatal(err)
	}
	if got := sent(); len(got) != 0 {
		t.Errorf("the worker sent files through a linked output folder: %v", slices.Collect(maps.Keys(got)))
	}
	// A real output folder with links in it, and a named pipe.
	os.Remove(filepath.Join(run, "output"))
	out := filepath.Join(run, "output")
	os.Mkdir(out, 0o700)
	os.WriteFile(filepath.Join(out, "report.md"), []byte("the agent's"), 0o600)
	os.Symlink(filepath.Join(secrets, "worker.creds"), filepath.Join(out, "creds"))
	os.Symlink(secrets, filepath.Join(out, "dir"))
	if err := syscall.Mkfifo(filepath.Join(out, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := sent()
	if len(got) != 1 || string(got["report.md"]) != "the agent's" {
		t.Errorf("the worker sent %v, want report.md alone", slices.Collect(maps.Keys(got)))
	}
}
