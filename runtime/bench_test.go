package runtime_test

import (
	"io"
	"log/slog"
	"testing"

	"factory/runtime"
	"factory/store"
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
	m := runtime.NewManager(runtime.Config{Store: s, DataDir: dir, DefaultEnvironment: "x", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Environments: map[string]runtime.Environment{"x": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	req := runtime.CreateRequest{Prompt: "Fix the flaky test in ci/ and explain the cause.", Source: "API",
		Config:      []byte(`{"name":"bench","environment_id":"x","idle_timeout_minutes":10}`),
		Attachments: []runtime.AttachmentData{{Name: "context.json", Data: []byte(`{"build":1234}`)}}}
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
