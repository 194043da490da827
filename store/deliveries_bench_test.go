package store_test

import (
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"factory/store"
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
			d := &store.Delivery{ID: id, WebhookUID: "wh_0000000000000000bench1", Label: store.LabelAccepted, Size: int64(len(payload)),
				Time: time.Now().UTC(), IdentitySource: "x-service-delivery-id", Identity: id, ClientAddr: "127.0.0.1", RunIDs: []string{}}
			p := bytes.Replace(payload, []byte("2873450912"), []byte(strconv.FormatInt(i, 10)), 1) // payloads differ, as real ones do
			if err := s.RecordDelivery(d, p, []string{store.IdentityKey("x-service-delivery-id", id)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
