package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"factory"
	"factory/internal/problem"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/service"
	"factory/internal/store"
)

// newRuns is the run service over a real store and a run manager whose
// agent waits a while (so that runs stay in flight).
func newRuns(t *testing.T) *service.Runs {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "sh", Log: slog.New(slog.DiscardHandler),
		Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", "sleep 5"}, Grace: time.Second}}}})
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); m.Wait(); s.Close() })
	return &service.Runs{Store: s, Manager: m}
}

// TestRunsIdempotency: the same key and body answer the first run again,
// from 20 callers at once as from one; another body is a conflict that a
// retry cannot help (x-should-retry: false); another caller's key of the
// same name is its own.
func TestRunsIdempotency(t *testing.T) {
	t.Parallel()
	s := newRuns(t)
	ctx := context.Background()
	req := runs.CreateRequest{Prompt: "once", Source: factory.SourceAPI}
	var wg sync.WaitGroup
	ids := make([]string, 20)
	for i := range ids {
		wg.Go(func() {
			c, err := s.Create(ctx, req, &service.Idempotency{Key: "k-1", Caller: "alice", Body: []byte(`{"prompt":"once"}`)})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = c.RunID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || id == "" {
			t.Fatalf("one key, several runs: %v", ids)
		}
	}
	_, err := s.Create(ctx, req, &service.Idempotency{Key: "k-1", Caller: "alice", Body: []byte(`{"prompt":"twice"}`)})
	code(t, "another body", err, factory.ECONFLICT, http.StatusConflict)
	if p := problem.Of(err); p == nil || !p.NoRetry {
		t.Errorf("another body: %+v, want no retry", p)
	}
	other, err := s.Create(ctx, req, &service.Idempotency{Key: "k-1", Caller: "bob", Body: []byte(`{"prompt":"once"}`)})
	if err != nil || other.RunID == ids[0] {
		t.Fatalf("another caller's key: %+v %v", other, err)
	}
}

// TestRunsErrors: the run service's errors are domain errors, mapped to
// the statuses the API has always answered.
func TestRunsErrors(t *testing.T) {
	t.Parallel()
	s := newRuns(t)
	ctx := context.Background()
	_, err := s.Cancel(ctx, "run_nope")
	code(t, "cancel of an unknown run", err, factory.ENOTFOUND, http.StatusNotFound)
	code(t, "interrupt of an unknown run", s.Interrupt(ctx, "run_nope"), factory.ENOTFOUND, http.StatusNotFound)
	_, err = s.FollowUp(ctx, "run_nope", "hi", nil)
	code(t, "follow-up of an unknown run", err, factory.ENOTFOUND, http.StatusNotFound)
	_, err = s.Create(ctx, runs.CreateRequest{Prompt: "x", Environment: "nope"}, nil)
	code(t, "an unknown environment", err, factory.EINVALID, http.StatusBadRequest)
	c, err := s.Create(ctx, runs.CreateRequest{Prompt: "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.FollowUp(ctx, c.RunID, "with a file", []runs.AttachmentData{{Name: "../x", Data: []byte("x")}})
	code(t, "an attachment name", err, factory.EINVALID, http.StatusBadRequest)
	if r, err := s.Cancel(ctx, c.RunID); err != nil || r.State != factory.StateCancelled {
		t.Fatalf("cancel: %+v %v", r, err)
	}
	_, err = s.Cancel(ctx, c.RunID)
	code(t, "cancel of a cancelled run", err, factory.EINVALID, http.StatusBadRequest)
	err = s.Interrupt(ctx, c.RunID)
	code(t, "interrupt of a run not running", err, factory.ECONFLICT, http.StatusConflict)
	if p := problem.Of(err); p == nil || !p.NoRetry {
		t.Errorf("interrupt of a run not running: %+v, want no retry", p)
	}
}

// TestIdempotencyKeysLockAlone: creates with one key wait for each other,
// creates with another key do not wait for them. The attack it pins: one
// lock for every key, so that one slow create held up every other.
func TestIdempotencyKeysLockAlone(t *testing.T) {
	t.Parallel()
	s := newRuns(t)
	ctx := context.Background()
	slow := service.HoldKeyForTest(s, "alice", "slow")
	done := make(chan error, 1)
	go func() {
		_, err := s.Create(ctx, runs.CreateRequest{Prompt: "other"}, &service.Idempotency{Key: "fast", Caller: "alice", Body: []byte("x")})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a create with another key waited for a key held elsewhere")
	}
	same := make(chan error, 1)
	go func() {
		_, err := s.Create(ctx, runs.CreateRequest{Prompt: "slow"}, &service.Idempotency{Key: "slow", Caller: "alice", Body: []byte("x")})
		same <- err
	}()
	select {
	case err := <-same:
		t.Fatalf("a create with a held key did not wait: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	slow()
	if err := <-same; err != nil {
		t.Fatal(fmt.Errorf("after the key was let go: %w", err))
	}
}
