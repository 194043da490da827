package store_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"factory"

	"factory/internal/store"
	"factory/internal/store/storetest"
)

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
			storetest.FillRuns(b, s, n, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), "")
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
