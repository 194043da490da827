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
			batch.PutRun(&factory.Run{ID: fmt.Sprintf("run_%024d", i), Title: "a run", Prompt: "do the thing", State: states[i%len(states)],
				CreatedAt: t, UpdatedAt: t.Add(time.Minute), Environment: "default", Source: "API",
				Config: []byte(fmt.Sprintf(`{"name":"job-%d","model_id":"m%d"}`, i%100, i%3))}, nil)
		}
		if err := batch.CommitNoSync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListRunsPage lists one filtered page of 50 (state=FAILED,
// newest first) from a store of 10,000 runs and from one of 1,000,000
// (BENCH_LARGE_RUNS changes the large size). A list walks an index, so the
// large page should cost about what the small one does.
func BenchmarkListRunsPage(b *testing.B) {
	large := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_LARGE_RUNS")); err == nil {
		large = v
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
			q := store.RunQuery{States: []factory.RunState{"FAILED"}, Limit: 50, SortBy: "updated_at"}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				page, err := s.ListRuns(q)
				if err != nil || len(page.Runs) != 50 || !page.More {
					b.Fatalf("%v %d", err, len(page.Runs))
				}
			}
		})
	}
}
