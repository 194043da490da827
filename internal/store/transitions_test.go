package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"factory"
	"factory/internal/store"
)

// allowed is the table of docs/spec/platform-api.md ("Transitions"),
// written out here as the contract says it, not read from the code.
var allowed = map[factory.RunState][]factory.RunState{
	factory.StatePending:    {factory.StateQueued, factory.StateCancelled, factory.StateError, factory.StateFailed},
	factory.StateQueued:     {factory.StateClaimed, factory.StateCancelled, factory.StateError, factory.StateFailed},
	factory.StateClaimed:    {factory.StateInProgress, factory.StateQueued, factory.StateCancelled, factory.StateError, factory.StateFailed},
	factory.StateInProgress: {factory.StateSucceeded, factory.StateFailed, factory.StateError, factory.StateCancelled, factory.StateBlocked},
	factory.StateBlocked:    {factory.StateInProgress, factory.StateQueued, factory.StateCancelled, factory.StateError, factory.StateFailed},
	factory.StateSucceeded:  {factory.StateQueued},
	factory.StateFailed:     {factory.StateQueued},
	factory.StateError:      {factory.StateQueued},
	factory.StateCancelled:  {factory.StateQueued},
}

func isAllowed(from, to factory.RunState) bool {
	for _, s := range allowed[from] {
		if s == to {
			return true
		}
	}
	return false
}

// TestRunStateMachine: every pair of the nine states, through the store.
// A step the table has is written; any other is refused with
// factory.ErrTransition and writes nothing (neither the state nor the
// update's other changes); a state set without MoveTo is refused even
// when the table has the step; a chain of legal steps in one update is
// written, a chain with one illegal step is not.
func TestRunStateMachine(t *testing.T) {
	t.Parallel()
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	put := func(state factory.RunState) string {
		n++
		now := time.Now().UTC()
		r := &factory.Run{ID: fmt.Sprintf("run_%04d", n), State: state, CreatedAt: now, UpdatedAt: now, Title: "t"}
		b := s.NewLogBatch()
		b.PutRun(r, nil)
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	for _, from := range factory.RunStates {
		for _, to := range factory.RunStates {
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) { checkStep(t, s, put(from), from, to) })
		}
	}
	t.Run("set without MoveTo", func(t *testing.T) {
		id := put(factory.StateQueued)
		_, err := s.UpdateRun(id, false, func(r *factory.Run, b *store.Batch) error { r.State = factory.StateClaimed; return nil })
		if !errors.Is(err, factory.ErrTransition) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a chain of legal steps", func(t *testing.T) {
		id := put(factory.StateInProgress)
		got, err := s.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) error {
			if err := r.MoveTo(factory.StateSucceeded); err != nil {
				return err
			}
			return r.MoveTo(factory.StateQueued) // a follow-up waited
		})
		if err != nil || got.State != factory.StateQueued {
			t.Fatalf("%v %+v", err, got)
		}
	})
	t.Run("a chain with an illegal step", func(t *testing.T) {
		id := put(factory.StateQueued)
		_, err := s.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) error {
			_ = r.MoveTo(factory.StateClaimed)
			r.State = factory.StateSucceeded // skipped INPROGRESS
			return nil
		})
		if after, _ := s.Run(id); !errors.Is(err, factory.ErrTransition) || after.State != factory.StateQueued {
			t.Fatalf("%v %+v", err, after)
		}
	})
	t.Run("a terminal state stays", func(t *testing.T) {
		for _, end := range []factory.RunState{factory.StateSucceeded, factory.StateFailed, factory.StateError, factory.StateCancelled} {
			id := put(end)
			for _, late := range factory.RunStates {
				if late == factory.StateQueued {
					continue // a follow-up's
				}
				if _, err := s.UpdateRun(id, false, func(r *factory.Run, b *store.Batch) error { return r.MoveTo(late) }); err == nil {
					t.Errorf("%s left for %s", end, late)
				}
			}
		}
	})
}

// checkStep moves run id from one state to another through the store and
// checks the outcome against the contract's table.
func checkStep(t *testing.T, s *store.Store, id string, from, to factory.RunState) {
	got, err := s.UpdateRun(id, false, func(r *factory.Run, b *store.Batch) error {
		r.Title = "changed"
		return r.MoveTo(to)
	})
	after, rerr := s.Run(id)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if isAllowed(from, to) {
		if err != nil || got.State != to || after.State != to || after.Title != "changed" {
			t.Fatalf("allowed, but: %v, %+v", err, after)
		}
		return
	}
	if !errors.Is(err, factory.ErrTransition) {
		t.Fatalf("refused step: got %v, want ErrTransition", err)
	}
	if after.State != from || after.Title != "t" {
		t.Fatalf("a refused step wrote something: %+v", after)
	}
	// Set directly, it is refused too.
	if _, err := s.UpdateRun(id, false, func(r *factory.Run, b *store.Batch) error { r.State = to; return nil }); from != to && !errors.Is(err, factory.ErrTransition) {
		t.Fatalf("a state set without MoveTo: %v", err)
	}
}
