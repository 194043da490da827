package runs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"factory"
	"factory/internal/runs"
	"factory/internal/runtime"
)

// TestHarnessSetup: a turn gets the setup of its agent's harness, whatever
// its environment, else of its environment's harness; the setup's
// variables reach the agent and its files the run's HOME; a setup that
// fails (no key for the provider) ends the run before any agent starts.
func TestHarnessSetup(t *testing.T) {
	dir := t.TempDir()
	s := newStoreOnly(t, dir)
	var mu sync.Mutex
	asked := map[string]string{} // run → harness
	setup := func(r *factory.Run, h string) ([]string, map[string][]byte, *runtime.Result) {
		mu.Lock()
		asked[r.ID] = h
		mu.Unlock()
		if h == "codex" {
			return nil, nil, &runtime.Result{State: factory.StateFailed, Code: "integration_not_configured", Message: "no key for openai"}
		}
		return []string{"HARNESS_SEEN=" + h}, map[string][]byte{".h/settings": []byte(h)}, nil
	}
	script := `printf '%s' "$HARNESS_SEEN" > "$HOME/seen"`
	exec := &runtime.ExecExecutor{Command: []string{"sh", "-c", script}}
	m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "default", Log: quietLog(), HarnessSetup: setup,
		Environments: map[string]runs.Environment{"default": {Executor: exec}, "gemini": {Executor: exec, Harness: "gemini"}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.Wait() }()
	m.Start(ctx)
	create := func(env, harness string) *factory.Run {
		req := runs.CreateRequest{Prompt: "go", Environment: env}
		if harness != "" {
			req.Setup = &factory.RunSetup{Harness: &factory.Harness{Type: harness}}
		}
		r, err := m.Create(req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	claude, byEnv, codex, plain := create("default", "claude"), create("gemini", ""), create("default", "codex"), create("default", "")
	for _, c := range []struct {
		r       *factory.Run
		harness string
	}{{claude, "claude"}, {byEnv, "gemini"}, {plain, ""}} {
		got := waitRun(t, s, c.r.ID, 20*time.Second, "its end", func(r *factory.Run) bool { return r.State.Terminal() })
		if got.State != factory.StateSucceeded {
			t.Fatalf("%s: %s %+v", c.harness, got.State, got.StatusMessage)
		}
		home := filepath.Join(m.RunDir(c.r.ID), "home")
		seen, _ := os.ReadFile(filepath.Join(home, "seen"))
		settings, _ := os.ReadFile(filepath.Join(home, ".h", "settings"))
		if string(seen) != c.harness || string(settings) != c.harness {
			t.Errorf("run of %q: the agent saw %q, its HOME holds %q", c.harness, seen, settings)
		}
	}
	got := waitRun(t, s, codex.ID, 20*time.Second, "its end", func(r *factory.Run) bool { return r.State.Terminal() })
	if got.State != factory.StateFailed || got.StatusMessage == nil || got.StatusMessage.ErrorCode != "integration_not_configured" ||
		!strings.Contains(got.StatusMessage.Message, "no key for openai") {
		t.Fatalf("no key: %s %+v", got.State, got.StatusMessage)
	}
	mu.Lock()
	defer mu.Unlock()
	if _, ok := asked[plain.ID]; ok {
		t.Errorf("a run of no harness was set up as %q", asked[plain.ID])
	}
}
