package runs

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"factory"
	"factory/internal/runtime"
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
		Environments: map[string]Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", "echo $FACTORY_RUN_ID >> turns; sleep 30"}, Grace: 200 * time.Millisecond}}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.Wait() }()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := m.Create(CreateRequest{Prompt: "once"})
	if err != nil {
		t.Fatal(err)
	}
	m.enqueue(r)
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
// whose turn is still in flight waits in the queue while others start.
func TestQueueHoldsARunOnce(t *testing.T) {
	m := NewManager(Config{MaxConcurrent: 2})
	a, b := &factory.Run{ID: "run_a"}, &factory.Run{ID: "run_b"}
	m.enqueue(a)
	m.enqueue(b)
	m.enqueue(a)
	if len(m.queue) != 2 {
		t.Fatalf("queue %v", m.queue)
	}
	m.active["run_a"] = &activeTurn{}
	if _, ok := m.hostFor(m.queue[0]); ok {
		t.Fatal("started a run whose turn is in flight")
	}
	if here, ok := m.hostFor(m.queue[1]); !ok || !here {
		t.Fatalf("run_b: here %v, ok %v", here, ok)
	}
	delete(m.active, "run_a")
	if _, ok := m.hostFor(m.queue[0]); !ok {
		t.Fatal("run_a waits though its turn has ended")
	}
}

// TestWhereTurnsGo: the control plane takes a turn when it has room; a run
// that names a worker, or whose workspace a worker holds, goes to it; an
// agent that runs as another user stays here; with no room here, a turn
// goes to the workers only when one is there (or the control plane runs
// none itself).
func TestWhereTurnsGo(t *testing.T) {
	ready := false
	m := NewManager(Config{MaxConcurrent: 1, Workers: &localHost{}, WorkersReady: func() bool { return ready },
		Environments: map[string]Environment{"sh": {}, "user": {RunAs: &syscall.Credential{Uid: 65534}}}})
	place := func(r *factory.Run) queued { return m.placeOf(r) }
	any := place(&factory.Run{ID: "r1", Environment: "sh"})
	named := place(&factory.Run{ID: "r2", Environment: "sh", Config: []byte(`{"worker_host":"w1"}`)})
	held := place(&factory.Run{ID: "r3", Environment: "sh", Worker: "w2", Turns: 1})
	asUser := place(&factory.Run{ID: "r4", Environment: "user", Config: []byte(`{"worker_host":"w1"}`)})
	ranHere := place(&factory.Run{ID: "r5", Environment: "sh", Turns: 1, StartedAt: &time.Time{}})
	if any.here || any.worker != "" || named.worker != "w1" || held.worker != "w2" || !asUser.here || !ranHere.here {
		t.Fatalf("places: %+v %+v %+v %+v %+v", any, named, held, asUser, ranHere)
	}
	if here, ok := m.hostFor(any); !ok || !here {
		t.Fatal("a run that names no worker waits, with room here")
	}
	if here, ok := m.hostFor(named); !ok || here {
		t.Fatal("a run that names a worker does not go to the workers")
	}
	m.here = 1 // full
	if _, ok := m.hostFor(any); ok {
		t.Fatal("with no room here and no worker there, a run went to the workers")
	}
	if _, ok := m.hostFor(asUser); ok {
		t.Fatal("a run as another user left this process")
	}
	ready = true
	if here, ok := m.hostFor(any); !ok || here {
		t.Fatal("with no room here and a worker there, a run waits")
	}
	m.here, ready, m.cfg.NoLocal = 0, false, true
	if here, ok := m.hostFor(any); !ok || here {
		t.Fatal("with --no-local-worker, a run stays here")
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
