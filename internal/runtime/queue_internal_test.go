package runtime

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"factory"

	"factory/internal/store"
)

// TestQueuedTwiceRunsOnceAndStaysTracked: a run queued twice (the start-up
// recovery and its creation at the same moment) has one turn, and that
// turn stays among the active runs, so that cancelling it (or stopping
// the server) stops its agent. The attack it replays: the second dequeue
// replaced the first turn's entry, then removed it, and the agent ran on
// untracked until its idle timeout.
func TestQueuedTwiceRunsOnceAndStaysTracked(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := NewManager(Config{Store: s, DataDir: filepath.Join(dir, "data"), DefaultEnvironment: "sh", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Environments: map[string]Environment{"sh": {Executor: &ExecExecutor{Command: []string{"sh", "-c", "echo $FACTORY_RUN_ID >> turns; sleep 30"}, Grace: 200 * time.Millisecond}}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.Wait() }()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := m.Create(CreateRequest{Prompt: "once"})
	if err != nil {
		t.Fatal(err)
	}
	m.enqueue(r.ID)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, _ := s.Run(r.ID)
		if got.State == factory.StateInProgress {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %s", got.State)
		}
	}
	time.Sleep(200 * time.Millisecond) // the second dequeue, if any, has happened
	if _, running := m.Counts(); running != 1 {
		t.Fatalf("%d turns in progress, want 1", running)
	}
	if _, err := m.Cancel(r.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, running := m.Counts(); running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled turn is still running")
		}
	}
	if got, _ := s.Run(r.ID); got.Turns != 1 || got.State != factory.StateCancelled {
		t.Fatalf("turns %d state %s", got.Turns, got.State)
	}
}

// TestQueueHoldsARunOnce: queuing a run twice keeps one place, and a run
// whose turn is still in progress waits in the queue while others start.
func TestQueueHoldsARunOnce(t *testing.T) {
	m := NewManager(Config{})
	m.enqueue("run_a")
	m.enqueue("run_b")
	m.enqueue("run_a")
	if len(m.queue) != 2 {
		t.Fatalf("queue %v", m.queue)
	}
	m.active["run_a"] = &activeRun{}
	if id, ok := m.nextQueued(); !ok || id != "run_b" {
		t.Fatalf("next %q %v, want run_b", id, ok)
	}
	if _, ok := m.nextQueued(); ok {
		t.Fatal("started a run whose turn is in progress")
	}
	delete(m.active, "run_a")
	if id, ok := m.nextQueued(); !ok || id != "run_a" {
		t.Fatalf("next %q %v, want run_a", id, ok)
	}
}

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{"GH_TOKEN": "GH_TOKEN", "gh_token": "gh_token", "deploy.key": "DEPLOY_KEY",
		"api-key-2": "API_KEY_2", "2fa": "_2FA", "x": "x"} {
		if got := EnvName(in); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", in, got, want)
		}
	}
}
