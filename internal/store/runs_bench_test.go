package store_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"factory"

	"factory/internal/store"
)

// fillRuns writes n finished runs straight into a store (the manager's
// workspaces are not what is measured), in batches.
func fillRuns(b *testing.B, s *store.Store, n int) {
	b.Helper()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	states := []factory.RunState{"SUCCEEDED", "FAILED", "CANCELLED", "SUCCEEDED", "SUCCEEDED"}
	for i := 0; i < n; {
		batch := s.NewLogBatch()
		for j := 0; j < 5000 && i < n; j, i = j+1, i+1 {
			t := base.Add(time.Duration(i) * time.Second)
			batch.PutRun(&factory.Run{ID: fmt.Sprintf("run_%024d", i), Title: fmt.Sprintf("Fix the topic%02d bug", i%20),
				Prompt: "do the thing", State: states[i%len(states)], CreatedAt: t, UpdatedAt: t.Add(time.Minute), Environment: "default",
				Source: "API", Config: []byte(fmt.Sprintf(`{"name":"job-%d","model_id":"m%d"}`, i%100, i%3)),
				Metadata: map[string]string{"ticket": fmt.Sprintf("T-%d", i%50), "team": []string{"a", "b"}[i%2]}}, nil)
		}
		if err := batch.CommitNoSync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListRunsPage lists one filtered page of 50, newest first, from
// a store of 10,000 runs and from one of 1,000,000 (BENCH_LARGE_RUNS
// changes the large size), filtered three ways: state=FAILED (one run in
// five, through the state index), metadata[ticket]=T-7 (one in fifty,
// through the metadata index) and q=TOPIC07 (one in twenty, a search of
// titles and prompts checked run by run along the updated_at index). A
// list walks an index, so the large page should cost about what the small
// one does.
func BenchmarkListRunsPage(b *testing.B) {
	large := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_LARGE_RUNS")); err == nil {
		large = v
	}
	queries := []struct {
		name string
		q    store.RunQuery
	}{
		{"state", store.RunQuery{States: []factory.RunState{"FAILED"}}},
		{"metadata", store.RunQuery{Equal: map[string]string{store.MetadataField("ticket"): "T-7"}}},
		{"q", store.RunQuery{Search: "TOPIC07"}},
	}
	for _, n := range []int{10_000, large} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			s, err := store.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			start := time.Now()
			fillRuns(b, s, n)
			b.Logf("filled %d runs in %v", n, time.Since(start))
			if err := s.Compact(); err != nil {
				b.Fatal(err)
			}
			for _, qc := range queries {
				b.Run("filter="+qc.name, func(b *testing.B) {
					q := qc.q
					q.Limit, q.SortBy = 50, "updated_at"
					for i := 0; i < b.N; i++ {
						page, err := s.ListRuns(q)
						if err != nil || len(page.Runs) != 50 || !page.More {
							b.Fatalf("%v %d", err, len(page.Runs))
						}
					}
				})
			}
		})
	}
}
