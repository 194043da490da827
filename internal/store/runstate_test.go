package store_test

import (
	"fmt"
	"testing"
	"time"

	"factory"

	"factory/internal/store"
)

// TestRunsInState: the runs in the asked states, oldest first, as their
// states are now (a run that changed state is found in its new one only).
func TestRunsInState(t *testing.T) {
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := s.NewBatch()
	for i, st := range []factory.RunState{factory.StateSucceeded, factory.StateQueued, factory.StateInProgress, factory.StateQueued, factory.StateFailed} {
		// Created in the reverse order of their IDs, to see the order is
		// by creation.
		at := t0.Add(time.Duration(10-i) * time.Second)
		b.PutRun(&factory.Run{ID: fmt.Sprintf("run_%d", i), State: st, CreatedAt: at, UpdatedAt: at}, nil)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateRun("run_3", true, func(r *factory.Run, _ *store.Batch) error {
		r.UpdatedAt = r.UpdatedAt.Add(time.Minute)
		if err := r.MoveTo(factory.StateClaimed); err != nil {
			return err
		}
		return r.MoveTo(factory.StateInProgress)
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		states []factory.RunState
		want   string
	}{
		{[]factory.RunState{factory.StateQueued}, "[run_1]"},
		{[]factory.RunState{factory.StateInProgress, factory.StateQueued}, "[run_3 run_2 run_1]"},
		{[]factory.RunState{factory.StateQueued, factory.StateQueued}, "[run_1]"},
		{[]factory.RunState{factory.StateCancelled}, "[]"},
	} {
		runs, err := s.RunsInState(tc.states...)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if got := fmt.Sprint(ids); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.states, got, tc.want)
		}
	}
}

// TestDetachRuns: live runs lose their handles on a process and a
// workers' queue, and keep their state; ended runs are not touched.
func TestDetachRuns(t *testing.T) {
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	b := s.NewBatch()
	b.PutRun(&factory.Run{ID: "run_live", State: factory.StateInProgress, CreatedAt: now, UpdatedAt: now,
		Process: &factory.ProcessRef{PID: 1234, Start: 99}, Worker: "w1"}, nil)
	b.PutRun(&factory.Run{ID: "run_claimed", State: factory.StateClaimed, CreatedAt: now, UpdatedAt: now, Worker: "w2",
		Current: &factory.TurnRecord{Attempt: "at_a", Remote: true}}, nil)
	b.PutRun(&factory.Run{ID: "run_legacy", State: factory.StateInProgress, CreatedAt: now, UpdatedAt: now, RemoteTurn: "a", ClaimedTurn: "a"}, nil)
	b.PutRun(&factory.Run{ID: "run_queued", State: factory.StateQueued, CreatedAt: now, UpdatedAt: now,
		Current: &factory.TurnRecord{Attempt: "at_b", Remote: true}}, nil)
	b.PutRun(&factory.Run{ID: "run_done", State: factory.StateSucceeded, CreatedAt: now, UpdatedAt: now, Worker: "w1"}, nil)
	b.Commit()
	inProgress, queued, err := s.DetachRuns()
	if err != nil || inProgress != 3 || queued != 1 {
		t.Fatalf("DetachRuns: %d in progress, %d queued, %v", inProgress, queued, err)
	}
	for id, state := range map[string]factory.RunState{"run_live": factory.StateInProgress, "run_claimed": factory.StateClaimed,
		"run_legacy": factory.StateInProgress, "run_queued": factory.StateQueued, "run_done": factory.StateSucceeded} {
		r, _ := s.Run(id)
		if r.State != state || r.Process != nil || r.RemoteTurn != "" || r.ClaimedTurn != "" {
			t.Errorf("%s: %+v", id, r)
		}
	}
	// The claimed run's turn is no longer followed on its worker; the
	// queued run's offer is left for the start-up to make again.
	if r, _ := s.Run("run_claimed"); r.Current == nil || r.Current.Attempt != "at_a" || r.Current.Remote || r.Worker != "w2" {
		t.Errorf("run_claimed: %+v", r.Current)
	}
	if r, _ := s.Run("run_queued"); r.Current == nil || !r.Current.Remote {
		t.Errorf("run_queued: %+v", r.Current)
	}
}
