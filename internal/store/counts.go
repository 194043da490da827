package store

import (
	"encoding/json"
	"fmt"
	"time"

	"factory"

	"github.com/cockroachdb/pebble"
)

// Counts for the dashboard ("runs by state today", "deliveries today").
// Both walk index keys only, never a record, and stop at max: a page that
// shows "10,000+" costs the same at a million runs as at ten thousand.

// CountRunsSince counts the runs in a state created at or after since, up
// to max; more says there are more than max.
func (s *Store) CountRunsSince(state factory.RunState, since time.Time, max int) (n int, more bool, err error) {
	prefix := runIndexPrefix + "state=" + escapeIndexValue(string(state)) + "/c/"
	return s.countKeys([]byte(prefix+fmt.Sprintf("%020d", since.UnixNano())), prefixEnd(prefix), max)
}

// CountDeliveriesSince counts a webhook's logged deliveries that arrived at
// or after since (delivery IDs sort by arrival), up to max.
func (s *Store) CountDeliveriesSince(webhookUID string, since time.Time, max int) (n int, more bool, err error) {
	prefix := deliveryPrefix + webhookUID + "/"
	return s.countKeys([]byte(prefix+deliveryIDAt(since)), prefixEnd(prefix), max)
}

func (s *Store) countKeys(lower, upper []byte, max int) (n int, more bool, err error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if n == max {
			return n, true, nil
		}
		n++
	}
	return n, false, it.Error()
}

// DeliveriesSince lists a webhook's logged deliveries that arrived after
// a moment, oldest first, at most limit: a live view's next events, found
// by ID (IDs sort by arrival) without reading older records.
func (s *Store) DeliveriesSince(webhookUID string, after time.Time, limit int) ([]*factory.Delivery, error) {
	prefix := deliveryPrefix + webhookUID + "/"
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix + deliveryIDAt(after.Add(time.Nanosecond))), UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*factory.Delivery
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		d := &factory.Delivery{}
		if err := json.Unmarshal(it.Value(), d); err != nil {
			return nil, fmt.Errorf("decode %s: %w", it.Key(), err)
		}
		out = append(out, d)
	}
	return out, it.Error()
}
