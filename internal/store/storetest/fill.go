// Package storetest fills a store with many records, for benchmarks that
// measure how a read scales with what is stored.
package storetest

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"factory"
	"factory/internal/store"
)

// RunSpacing is the time between two filled runs' creation.
const RunSpacing = time.Second

// FillRuns writes n finished runs straight into a store (the manager's
// workspaces are not what is measured), in batches not synced to disk,
// created one RunSpacing apart from first on, with varied titles, states,
// configurations and metadata; each belongs to factoryUID when it is set.
// Batches are made and committed on every core: encoding a run and its
// index entries costs about what committing them does.
func FillRuns(tb testing.TB, s *store.Store, n int, first time.Time, factoryUID string) {
	tb.Helper()
	FillRunsEvery(tb, s, n, first, RunSpacing, factoryUID)
}

// FillRunsEvery is FillRuns with the runs created spacing apart.
func FillRunsEvery(tb testing.TB, s *store.Store, n int, first time.Time, spacing time.Duration, factoryUID string) {
	tb.Helper()
	const perBatch = 5000
	states := []factory.RunState{"SUCCEEDED", "FAILED", "CANCELLED", "SUCCEEDED", "SUCCEEDED"}
	batches := make(chan int)
	errs := make(chan error, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for w := 0; w < cap(errs); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := range batches {
				batch := s.NewLogBatch()
				for i := start; i < start+perBatch && i < n; i++ {
					t := first.Add(time.Duration(i) * spacing)
					batch.PutRun(&factory.Run{ID: fmt.Sprintf("run_%024d", i), Title: fmt.Sprintf("Fix the topic%02d bug", i%20),
						Prompt: "do the thing", State: states[i%len(states)], CreatedAt: t, UpdatedAt: t.Add(time.Minute), Environment: "default",
						Source: "API", Config: []byte(fmt.Sprintf(`{"name":"job-%d","model_id":"m%d"}`, i%100, i%3)), FactoryUID: factoryUID,
						Metadata: map[string]string{"ticket": fmt.Sprintf("T-%d", i%50), "team": []string{"a", "b"}[i%2]}}, nil)
				}
				if err := batch.CommitNoSync(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for start := 0; start < n; start += perBatch {
		select {
		case batches <- start:
		case err := <-errs:
			close(batches)
			wg.Wait()
			tb.Fatal(err)
		}
	}
	close(batches)
	wg.Wait()
	select {
	case err := <-errs:
		tb.Fatal(err)
	default:
	}
}

// FillDeliveries writes n accepted deliveries of a webhook to its log,
// spread evenly over the span before end (without payloads: the log's
// pages list records).
func FillDeliveries(tb testing.TB, s *store.Store, webhookUID string, n int, end time.Time, span time.Duration) {
	tb.Helper()
	step := span / time.Duration(n)
	var ids store.DeliveryIDSequence
	for i := 0; i < n; {
		batch := s.NewLogBatch()
		for j := 0; j < 5000 && i < n; j, i = j+1, i+1 {
			at := end.Add(-span + time.Duration(i)*step)
			batch.PutDelivery(&factory.Delivery{ID: ids.At(at), WebhookUID: webhookUID, Label: factory.LabelAccepted, Time: at,
				Size: 120, IdentitySource: "header", RunIDs: []string{}})
		}
		if err := batch.CommitNoSync(); err != nil {
			tb.Fatal(err)
		}
	}
}
