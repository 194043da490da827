package measure_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"factory/internal/measure"
	"factory/internal/store"
	"factory/internal/store/storetest"
)

// BenchmarkMetrics: the figures of the metrics API's productivity and run
// breakdown calls (a 30-day range bucketed by day: every day's record
// read, runs summed by status) over a store of 10,000 and of 1,000,000
// runs (BENCH_LARGE_RUNS changes the large size) created over the same
// 30 days and folded into the rollups first. A query reads one record per
// day, whatever the number of runs: the large store's answer should cost
// about what the small one's does (BENCHMARKS.md).
func BenchmarkMetrics(b *testing.B) {
	large := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_LARGE_RUNS")); err == nil {
		large = v
	}
	end := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	start := end.AddDate(0, 0, -30)
	for _, n := range []int{10_000, large} {
		s := metricsStore(b, n, start, end)
		rg := measure.Range{Start: start, End: end, Period: "day"}
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				ro, err := measure.ReadRollups(s, "fa_bench", rg)
				if err != nil {
					b.Fatal(err)
				}
				total, _ := ro.Series(func(d *store.DayRollup) float64 { return float64(d.Runs) })
				if groups := ro.Groups("status"); int(total) != n || len(groups) != 3 {
					b.Fatalf("%v runs, %d states", total, len(groups))
				}
			}
		})
	}
}

// metricsStore is a store of n runs of one factory created evenly from
// start to end, folded and compacted (made once: a sub-benchmark's
// function runs more than once).
func metricsStore(b *testing.B, n int, start, end time.Time) *store.Store {
	s, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	t0 := time.Now()
	storetest.FillRunsEvery(b, s, n, start, end.Sub(start)/time.Duration(n), "fa_bench")
	t1 := time.Now()
	if err := s.FoldMetrics(); err != nil {
		b.Fatal(err)
	}
	b.Logf("filled %d runs in %v, folded them in %v", n, t1.Sub(t0), time.Since(t1))
	if err := s.Compact(); err != nil {
		b.Fatal(err)
	}
	return s
}
