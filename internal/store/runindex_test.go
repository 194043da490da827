package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"factory"

	"factory/internal/store"
)

func TestSupersededEntriesAndSweep(t *testing.T) {
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Now().UTC()
	r := &factory.Run{ID: "run_a", State: "QUEUED", CreatedAt: t0, UpdatedAt: t0}
	b := s.NewBatch()
	b.PutRun(r, nil)
	b.Commit()
	asOf := t0.Add(time.Millisecond).UnixNano()
	prev := *r
	r.State, r.UpdatedAt = "SUCCEEDED", t0.Add(time.Second)
	b = s.NewBatch()
	b.PutRun(r, &prev)
	b.Commit()

	list := func(q store.RunQuery) int {
		q.Limit, q.SortBy = 10, "updated_at"
		page, err := s.ListRuns(q)
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Runs)
	}
	// As it is now: once, as SUCCEEDED; as of before the change: once, as
	// QUEUED was then; the old state's index no longer lists it now.
	if list(store.RunQuery{}) != 1 || list(store.RunQuery{AsOf: asOf}) != 1 ||
		list(store.RunQuery{States: []factory.RunState{"QUEUED"}}) != 0 || list(store.RunQuery{States: []factory.RunState{"QUEUED"}, AsOf: asOf}) != 1 {
		t.Fatal("as-of walks")
	}
	// The sweeper removes the superseded entries once their window passed.
	if n, err := s.SweepSupersededRunIndex(t0); err != nil || n != 0 {
		t.Fatalf("sweep before the change: %d %v", n, err)
	}
	if n, err := s.SweepSupersededRunIndex(t0.Add(2 * time.Second)); err != nil || n == 0 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if list(store.RunQuery{AsOf: asOf}) != 0 || list(store.RunQuery{}) != 1 {
		t.Fatal("after the sweep: the old walk has nothing left, the current one is whole")
	}
}

// TestUpdateRun: concurrent read-modify-writes of one run lose nothing,
// ErrNoChange writes nothing, and an update's error aborts its batch.
func TestUpdateRun(t *testing.T) {
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC()
	b := s.NewLogBatch()
	b.PutRun(&factory.Run{ID: "run_1", State: factory.StateQueued, CreatedAt: now, UpdatedAt: now}, nil)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.UpdateRun("run_1", i%2 == 0, func(r *factory.Run, b *store.Batch) error {
				r.Turns++
				b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "message"})
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	r, err := s.Run("run_1")
	if err != nil || r.Turns != 20 || r.Events != 20 {
		t.Fatalf("after 20 updates: turns %d, events %d, %v", r.Turns, r.Events, err)
	}
	if evs, _ := s.RunEvents("run_1"); len(evs) != 20 {
		t.Fatalf("%d events stored, want 20", len(evs))
	}
	boom := errors.New("boom")
	for _, want := range []error{store.ErrNoChange, boom} {
		_, err := s.UpdateRun("run_1", true, func(r *factory.Run, b *store.Batch) error {
			r.State = factory.StateFailed
			b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "finished"})
			return want
		})
		if want == boom && !errors.Is(err, boom) || want != boom && err != nil {
			t.Fatalf("update returning %v: %v", want, err)
		}
		if r, _ := s.Run("run_1"); r.State != factory.StateQueued || r.Events != 20 {
			t.Fatalf("update returning %v wrote: %+v", want, r)
		}
	}
	if _, err := s.UpdateRun("run_nope", true, func(*factory.Run, *store.Batch) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a missing run: %v", err)
	}
}
