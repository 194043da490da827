package store_test

import (
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"factory"

	"factory/internal/store"
)

// BenchmarkRecordDelivery writes accepted 1 KB deliveries (a GitHub
// "issues" payload, its issue ID made unique) as ingress does
// (record, payload, identity mark and queue entry in one synced batch)
// from 64 concurrent writers, whose syncs pebble groups. It isolates the
// store's share of an ingress request from HTTP and the load generator.
func BenchmarkRecordDelivery(b *testing.B) {
	s, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload, err := os.ReadFile("../bench/testdata/issue-opened.json")
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(32) // 64 writers on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			id := "dlv_" + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatInt(i, 36)
			d := &factory.Delivery{ID: id, WebhookUID: "wh_0000000000000000bench1", Label: factory.LabelAccepted, Size: int64(len(payload)),
				Time: time.Now().UTC(), IdentitySource: "x-service-delivery-id", Identity: id, ClientAddr: "127.0.0.1", RunIDs: []string{}}
			p := bytes.Replace(payload, []byte("2873450912"), []byte(strconv.FormatInt(i, 10)), 1) // payloads differ, as real ones do
			if err := s.RecordDelivery(d, p, []string{store.IdentityKey("x-service-delivery-id", id)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSweepDeliveries is one retention pass over a webhook log of 1,000
// and of 100,000 records from the last day (so none may go): the pass reads
// only what may go, so the two cost about the same.
func BenchmarkSweepDeliveries(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s, err := store.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			start := time.Now().Add(-24 * time.Hour)
			for i := 0; i < n; {
				batch := s.NewLogBatch()
				for j := 0; j < 5000 && i < n; j, i = j+1, i+1 {
					at := start.Add(time.Duration(i) * time.Millisecond)
					batch.PutDelivery(&factory.Delivery{ID: store.NewDeliveryID(at), WebhookUID: "wh_0000000000000000bench1",
						Label: factory.LabelAccepted, Time: at, ClientAddr: "127.0.0.1", RunIDs: []string{}})
				}
				if err := batch.CommitNoSync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if n, err := s.SweepDeliveries(time.Now(), 50, 7*24*time.Hour); err != nil || n != 0 {
					b.Fatal(n, err)
				}
			}
		})
	}
}
