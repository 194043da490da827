package workers

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"factory"
	"factory/internal/runtime"
)

// TestFinishedOutputs: a worker's output files land in the run's output
// folder and nowhere else, whatever names it sends.
func TestFinishedOutputs(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "runs", "r", "output")
	outputs := map[string][]byte{"report.md": []byte("ok"), "sub/notes.txt": []byte("n"), "../escaped.txt": []byte("x"),
		"/etc/owned": []byte("x"), "sub/../../up.txt": []byte("x"), "": []byte("x")}
	res := (&Dispatcher{}).finished(Event{Kind: "done", Result: &runtime.Result{State: factory.StateSucceeded}, Outputs: outputs}, out)
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
	if res := (&Dispatcher{}).finished(Event{Kind: "done"}, out); res.State != factory.StateError {
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
		(&Dispatcher{}).finished(Event{Kind: "done", Result: &runtime.Result{State: factory.StateSucceeded}, Outputs: map[string][]byte{name: []byte("x")}}, out)
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
		"a b": false, ControlUser: false, "é": false, "x/y": false, string(make([]byte, 65)): false, "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl": true} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}

// TestRemoteExecutors: exec and ACP environments go to workers, this
// binary's command as SelfCommand; one that runs its agent as another
// user stays on the control plane.
func TestRemoteExecutors(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cp := &ControlPlane{disp: &Dispatcher{}}
	envs := map[string]runtime.Environment{
		"exec":   {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", "true"}}},
		"demo":   {Executor: &runtime.ACPExecutor{Command: []string{self, "demo-agent", "--acp"}, Permissions: "deny"}},
		"as-bob": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}, RunAs: &syscall.Credential{Uid: 1001, Gid: 1001}},
	}
	cp.RemoteExecutors(envs)
	if x, ok := envs["exec"].Executor.(*remote); !ok || x.executor != "" || x.command[0] != "sh" {
		t.Errorf("exec: %#v", envs["exec"].Executor)
	}
	if x, ok := envs["demo"].Executor.(*remote); !ok || x.executor != ExecutorACP || x.permissions != "deny" || x.command[0] != SelfCommand {
		t.Errorf("demo: %#v", envs["demo"].Executor)
	}
	if _, ok := envs["as-bob"].Executor.(*runtime.ExecExecutor); !ok {
		t.Errorf("an environment with a user went to workers: %#v", envs["as-bob"].Executor)
	}
	if got := ownCommand([]string{SelfCommand, "demo-agent"}, false); got[0] != self {
		t.Errorf("ownCommand: %v", got)
	}
	if got := ownCommand([]string{SelfCommand, "demo-agent"}, true); got[0] != "factory" {
		t.Errorf("ownCommand: %v", got)
	}
}
