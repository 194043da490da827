package store_test

import (
	"testing"
	"time"

	"factory"

	"factory/store"
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
