package schedules

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"factory"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
)

// BenchmarkThousandSchedules fires 1,000 schedules of the Agents API that
// share an instant (@every 2s: the minimum interval is lowered to a second
// for it), with the real loop, store and run manager
// (not started: the runs stay QUEUED, this measures the firing). Each op is
// one instant; late-p50-ms and late-max-ms are how long after the instant
// its runs were durable (a batch's runs are durable together, so the
// batch's time is every one of its runs'). Target: p99 within 1 s.
func BenchmarkThousandSchedules(b *testing.B) {
	data := b.TempDir()
	s, err := store.Open(data)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := s.NewBatch()
	now := time.Now().UTC()
	for i := 0; i < 1000; i++ {
		batch.PutAgentSchedule(&factory.ScheduledAgent{ID: fmt.Sprintf("sch_bench%04d", i), Name: fmt.Sprintf("s%04d", i), CronSchedule: "@every 2s",
			Enabled: true, Prompt: "Check the queue.", CreatedAt: now, UpdatedAt: now})
	}
	if err := batch.Commit(); err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "sh", Log: log,
		Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	var mu sync.Mutex
	var lates []time.Duration
	fired := 0
	done := make(chan struct{})
	sch := &Scheduler{Store: s, Runs: m, Log: log, MinInterval: time.Second, Fired: func(n int, late time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		fired += n
		for i := 0; i < n; i++ {
			lates = append(lates, late)
		}
		if fired >= 1000*b.N {
			select {
			case <-done:
			default:
				close(done)
			}
		}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	go sch.Run(ctx)
	select {
	case <-done:
	case <-time.After(time.Duration(b.N)*2*time.Second + 30*time.Second):
		b.Fatalf("fired %d runs of %d", fired, 1000*b.N)
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lates)
	b.ReportMetric(float64(lates[len(lates)/2].Microseconds())/1000, "late-p50-ms")
	b.ReportMetric(float64(lates[len(lates)*99/100].Microseconds())/1000, "late-p99-ms")
	b.ReportMetric(float64(lates[len(lates)-1].Microseconds())/1000, "late-max-ms")
}
