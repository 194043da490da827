package store

import (
	"encoding/binary"
	"strings"
	"sync/atomic"
	"time"

	"factory"
)

var lastID atomic.Int64

// NewDeliveryID returns "dlv_" + the time (Unix nanoseconds, big-endian,
// made unique in this process) + 80 random bits, in an alphabet that sorts
// like the bytes: IDs sort in the order deliveries arrived, so a webhook's
// log lists by ID, and retention finds old records by ID without reading
// them.
func NewDeliveryID(now time.Time) string { return newDeliveryID(now, &lastID) }

// newDeliveryID makes an ID greater than the last one made with last.
func newDeliveryID(now time.Time, last *atomic.Int64) string {
	n := now.UnixNano()
	for {
		prev := last.Load()
		if n <= prev {
			n = prev + 1
		}
		if last.CompareAndSwap(prev, n) {
			break
		}
	}
	var head [8]byte
	binary.BigEndian.PutUint64(head[:], uint64(n))
	return factory.MintID(factory.PrefixDelivery, head[:], 10)
}

// deliveryIDAt is the smallest ID NewDeliveryID can give at t: every
// delivery that arrived earlier has a smaller ID.
func deliveryIDAt(t time.Time) string {
	var b [18]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixNano()))
	return "dlv_" + factory.IDEncoding.EncodeToString(b[:])
}

// deliveryIDTime reads the time out of an ID made by NewDeliveryID.
func deliveryIDTime(id string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(id, "dlv_")
	if !ok || len(rest) != 29 {
		return time.Time{}, false
	}
	b, err := factory.IDEncoding.DecodeString(rest)
	if err != nil || len(b) != 18 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b[:8]))), true
}

// DeliveryIDSequence makes delivery IDs as NewDeliveryID does, in a
// sequence of its own: for writing a log of past deliveries (benchmarks),
// whose IDs must carry their own times, not follow the process's newest.
type DeliveryIDSequence struct{ last atomic.Int64 }

// At is the next ID of the sequence for a delivery at t.
func (q *DeliveryIDSequence) At(t time.Time) string { return newDeliveryID(t, &q.last) }
