package workers

import (
	"os"
	"path/filepath"
	"testing"

	"factory"
	"factory/internal/runtime"
	"factory/internal/worker"
)

// TestFinishedOutputs: a worker's output files land in the run's output
// folder and nowhere else, whatever names it sends.
func TestFinishedOutputs(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "runs", "r", "output")
	outputs := map[string][]byte{"report.md": []byte("ok"), "sub/notes.txt": []byte("n"), "../escaped.txt": []byte("x"),
		"/etc/owned": []byte("x"), "sub/../../up.txt": []byte("x"), "": []byte("x")}
	res := (&Dispatcher{}).finished(worker.Event{Kind: "done", Result: &runtime.Result{State: factory.StateSucceeded}, Outputs: outputs}, out)
	if res.State != factory.StateSucceeded {
		t.Fatal(res)
	}
	for name, want := range map[string]bool{"report.md": true, "sub/notes.txt": true} {
		if _, err := os.Stat(filepath.Join(out, name)); (err == nil) != want {
			t.Errorf("%s: %v", name, err)
		}
	}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if rel, _ := filepath.Rel(out, p); !filepath.IsLocal(rel) {
				t.Errorf("a file outside the output folder: %s", p)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res := (&Dispatcher{}).finished(worker.Event{Kind: "done"}, out); res.State != factory.StateError {
		t.Errorf("a done event without a result: %+v", res)
	}
}

// FuzzFinishedOutputs: no name a worker sends puts a file outside the
// run's output folder.
func FuzzFinishedOutputs(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", "/abs", "a/../../b", "a/./b", "..", "c:\\x", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		dir := t.TempDir()
		out := filepath.Join(dir, "output")
		(&Dispatcher{}).finished(worker.Event{Kind: "done", Result: &runtime.Result{State: factory.StateSucceeded}, Outputs: map[string][]byte{name: []byte("x")}}, out)
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if rel, _ := filepath.Rel(out, p); !filepath.IsLocal(rel) {
					t.Fatalf("%q wrote %s", name, p)
				}
			}
			return nil
		})
	})
}

// TestValidID: a worker's name becomes part of NATS subjects and consumer
// names, so only plain names pass.
func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{"w1": true, "builder-1": true, "a_b": true, "": false, "a.b": false, "a*": false, "a>": false,
		"a b": false, ControlUser: false, "local": false, "LOCAL": false, "Local": false, "local-1": true, "é": false, "x/y": false, string(make([]byte, 65)): false, "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl": true} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}

// TestSelfCommand: this binary at the head of a turn's command (the demo
// agent) travels as worker.SelfCommand: each worker runs its own; any
// other command travels as it is.
func TestSelfCommand(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got := selfAsMarker([]string{self, "demo-agent", "--acp"}); got[0] != worker.SelfCommand || got[1] != "demo-agent" {
		t.Errorf("this binary: %v", got)
	}
	if got := selfAsMarker([]string{"sh", "-c", "true"}); got[0] != "sh" {
		t.Errorf("another command: %v", got)
	}
}
