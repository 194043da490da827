package runs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"factory"

	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
)

// BenchmarkCreateRun creates runs durably (workspace with PROMPT.md and an
// attachment, the record synced to disk) from parallel callers, as the API
// does; the manager is not started, so nothing executes. Target: at least
// 2,000 creates per second.
func BenchmarkCreateRun(b *testing.B) {
	dir := b.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "x", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Environments: map[string]runs.Environment{"x": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	req := runs.CreateRequest{Prompt: "Fix the flaky test in ci/ and explain the cause.", Source: "API",
		Config:      []byte(`{"name":"bench","environment_id":"x","idle_timeout_minutes":10}`),
		Attachments: []runs.AttachmentData{{Name: "context.json", Data: []byte(`{"build":1234}`)}}}
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := m.Create(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

// BenchmarkDemoAgentRuns runs b.N runs through the real ACP executor and
// the demo agent (no delay between its messages) at maxConcurrentRuns 1
// and 8, and reports runs per second.
func BenchmarkDemoAgentRuns(b *testing.B) {
	bin := demoAgentB(b)
	for _, max := range []int{1, 8} {
		b.Run(fmt.Sprintf("maxConcurrentRuns=%d", max), func(b *testing.B) {
			dir := b.TempDir()
			s, err := store.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "acp", MaxConcurrent: max, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Environments: map[string]runs.Environment{"acp": {Executor: &runtime.ACPExecutor{Command: []string{bin, "demo-agent", "--acp", "--delay", "0s"}}}}})
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); m.Wait() }()
			m.Start(ctx)
			b.ResetTimer()
			var ids []string
			for i := 0; i < b.N; i++ {
				r, err := m.Create(runs.CreateRequest{Prompt: "Summarise."})
				if err != nil {
					b.Fatal(err)
				}
				ids = append(ids, r.ID)
			}
			for _, id := range ids {
				for {
					r, _ := s.Run(id)
					if r.State == factory.StateSucceeded {
						break
					}
					if r.State != factory.StateQueued && r.State != factory.StateInProgress {
						b.Fatalf("run %s: %s %+v", id, r.State, r.StatusMessage)
					}
					time.Sleep(time.Millisecond)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
		})
	}
}

// BenchmarkRuntimeOverhead measures, per run, the time from its creation
// to the agent's first message through the manager, and the same from the
// executor's start when driven directly (the agent's own start-up). The
// difference is what the runtime adds.
func BenchmarkRuntimeOverhead(b *testing.B) {
	bin := demoAgentB(b)
	exe := &runtime.ACPExecutor{Command: []string{bin, "demo-agent", "--acp", "--delay", "0s"}}
	dir := b.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "acp", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Environments: map[string]runs.Environment{"acp": {Executor: exe}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.Wait() }()
	m.Start(ctx)
	var viaManager, direct time.Duration
	for i := 0; i < b.N; i++ {
		r, err := m.Create(runs.CreateRequest{Prompt: "Summarise."})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if got, _ := s.Run(r.ID); got.State == factory.StateSucceeded {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		events, _ := s.RunEvents(r.ID)
		for _, e := range events {
			if e.Kind == "message" {
				viaManager += e.Time.Sub(r.CreatedAt)
				break
			}
		}
		turn := runtime.Turn{RunID: factory.NewUID("run_"), Prompt: "Summarise.", Dir: b.TempDir()}
		if err := runtime.LayOut(&turn); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var first time.Duration
		exe.Run(context.Background(), turn, func(e runtime.Event) {
			if first == 0 {
				first = time.Since(start)
			}
		})
		direct += first
	}
	b.ReportMetric(float64(viaManager.Microseconds())/float64(b.N)/1000, "queued-to-first-message-ms")
	b.ReportMetric(float64(direct.Microseconds())/float64(b.N)/1000, "agent-startup-ms")
	b.ReportMetric(float64((viaManager-direct).Microseconds())/float64(b.N)/1000, "runtime-overhead-ms")
}

func demoAgentB(b *testing.B) string {
	dir := b.TempDir()
	bin := filepath.Join(dir, "factory")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/factory").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}
