package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"factory"

	"github.com/cockroachdb/pebble"
)

// Key layout of deliveries.
const (
	deliveryPrefix        = "dlv/"  // dlv/<webhook uid>/<delivery id> → Delivery
	deliveryPayloadPrefix = "dlvp/" // dlvp/<webhook uid>/<delivery id> → the body, byte for byte
	// dlvmark/<day>/<webhook uid>/<source>:<sha256> → identityMark, where
	// day is the mark's UTC day since 1970 (six digits): marks are found
	// by identity, and removed a whole day at a time.
	markPrefix      = "dlvmark/"
	evalQueuePrefix = "evalq/" // evalq/<delivery id> → QueueItem
)

// markWindow is how long identity marks are kept: as long as the log
// (seed-spec §6.5).
const markWindow = factory.DeliveryLogAge

// QueueItem is an accepted delivery waiting for its automations to be
// evaluated. It is written in the same batch as the delivery, so after a
// crash every accepted delivery is queued exactly once.
type QueueItem struct {
	DeliveryID string `json:"delivery_id"`
	WebhookUID string `json:"webhook_uid"`
}

// identity marks are "<unix nanoseconds> <delivery id>": written for every
// accepted delivery, so kept small and cheap to encode.
func identityMark(id string, t time.Time) []byte {
	return []byte(strconv.FormatInt(t.UnixNano(), 10) + " " + id)
}

func parseMark(v []byte) (string, time.Time, bool) {
	ns, id, ok := strings.Cut(string(v), " ")
	n, err := strconv.ParseInt(ns, 10, 64)
	return id, time.Unix(0, n), ok && err == nil
}

// IdentityKey is the index key of a delivery identity. Values are hashed
// so that a sender's long header cannot make a long key.
func IdentityKey(source, value string) string {
	h := sha256.Sum256([]byte(value))
	return source + ":" + hex.EncodeToString(h[:16])
}

// unixDay is the UTC day of t, counted from 1970.
func unixDay(t time.Time) int64 { return t.Unix() / 86400 }

// markDay is the bucket of a mark made at t.
func markDay(t time.Time) string { return dayName(unixDay(t)) }

// dayName is a day since 1970 in six digits, so that days sort by name.
func dayName(day int64) string {
	d := strconv.FormatInt(day, 10)
	if len(d) < 6 {
		d = "000000"[len(d):] + d
	}
	return d
}

func markKey(day, webhookUID, key string) string {
	return markPrefix + day + "/" + webhookUID + "/" + key
}

// SeenIdentity reports the accepted delivery that carried an identity
// between since and until. It reads the identity's key in each day from
// since's to the day after until's: a mark made by a request that started
// a little after until may be in the next day.
func (s *Store) SeenIdentity(webhookUID, key string, since, until time.Time) (string, bool, error) {
	for day := unixDay(since); day <= unixDay(until)+1; day++ {
		if id, ok, err := s.markSince(markKey(dayName(day), webhookUID, key), since); ok || err != nil {
			return id, ok, err
		}
	}
	return "", false, nil
}

// markSince reads the mark at a key, if it was made at or after since.
func (s *Store) markSince(k string, since time.Time) (string, bool, error) {
	v, err := s.get(k)
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	id, t, ok := parseMark(v)
	if !ok || t.Before(since) {
		return "", false, nil
	}
	return id, true, nil
}

// RecordDelivery writes a delivery to its webhook's log. An accepted one
// carries its payload, the identity keys that make later copies duplicates,
// and its place in the evaluation queue, all in one batch that is synced
// before this returns. Other outcomes are written without waiting for the
// disk: losing one in a crash loses no work.
func (s *Store) RecordDelivery(d *factory.Delivery, payload []byte, identityKeys []string) error {
	b := s.NewLogBatch()
	b.putRaw(deliveryPrefix+d.WebhookUID+"/"+d.ID, appendDelivery(make([]byte, 0, 256), d))
	if d.Label != factory.LabelAccepted {
		return b.CommitNoSync()
	}
	b.putRaw(deliveryPayloadPrefix+d.WebhookUID+"/"+d.ID, payload)
	day := markDay(d.Time)
	for _, k := range identityKeys {
		b.putRaw(markKey(day, d.WebhookUID, k), identityMark(d.ID, d.Time))
	}
	b.putRaw(evalQueuePrefix+d.ID, []byte(d.WebhookUID))
	return b.Commit()
}

func (b *Batch) putRaw(key string, v []byte) {
	if b.err == nil {
		b.err = b.b.Set([]byte(key), v, nil)
	}
}

// Delivery reads one delivery of a webhook.
func (s *Store) Delivery(webhookUID, id string) (*factory.Delivery, error) {
	d := &factory.Delivery{}
	return d, s.getJSON(deliveryPrefix+webhookUID+"/"+id, d)
}

// DeliveryPayload reads the stored body of an accepted delivery.
func (s *Store) DeliveryPayload(webhookUID, id string) ([]byte, error) {
	return s.get(deliveryPayloadPrefix + webhookUID + "/" + id)
}

// Deliveries lists a webhook's log newest first: at most limit records
// older than the delivery before (all when before is ""). more says whether
// older records remain.
func (s *Store) Deliveries(webhookUID, before string, limit int) (out []*factory.Delivery, more bool, err error) {
	prefix := deliveryPrefix + webhookUID + "/"
	upper := prefixEnd(prefix)
	if before != "" {
		upper = []byte(prefix + before)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: upper})
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	for ok := it.Last(); ok; ok = it.Prev() {
		if len(out) == limit {
			return out, true, nil
		}
		d := &factory.Delivery{}
		if err := json.Unmarshal(it.Value(), d); err != nil {
			return nil, false, fmt.Errorf("decode %s: %w", it.Key(), err)
		}
		out = append(out, d)
	}
	return out, false, it.Error()
}

// EvalQueue lists queued deliveries, oldest first (delivery IDs sort by
// time).
func (s *Store) EvalQueue(limit int) ([]QueueItem, error) {
	var out []QueueItem
	err := s.scan(evalQueuePrefix, func(key string, v []byte) error {
		if len(out) == limit {
			return errStop
		}
		out = append(out, QueueItem{DeliveryID: key[len(evalQueuePrefix):], WebhookUID: string(v)})
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return out, err
}

// Dequeue removes a delivery from the evaluation queue in a batch.
func (b *Batch) Dequeue(deliveryID string) { b.delete(evalQueuePrefix + deliveryID) }

// PutDelivery rewrites a delivery record (to add the runs it started).
func (b *Batch) PutDelivery(d *factory.Delivery) {
	b.putRaw(deliveryPrefix+d.WebhookUID+"/"+d.ID, appendDelivery(nil, d))
}

// sweepBatchOps is how many deletions the sweep gathers before it commits.
var sweepBatchOps uint32 = 20_000

// errStop ends a scan early.
var errStop = errors.New("stop")

// SweepDeliveries applies the retention of the delivery log (docs/spec/ingress.md):
// a record goes only when it is older than maxAge and not among the keep
// most recent of its webhook. Identity marks older than maxAge go too.
// It returns how many records it removed.
//
// Delivery IDs sort by time, so for each webhook it seeks to the newest
// record that may go (older than maxAge, and past the keep most recent)
// and reads only the records from there back: the recent log, however
// long, is not read, and no record is decoded. (A record whose ID is not
// NewDeliveryID's is judged by its stored time instead.)
func (s *Store) SweepDeliveries(now time.Time, keep int, maxAge time.Duration) (int, error) {
	cutoff := now.Add(-maxAge)
	w := &sweeper{s: s, b: s.NewLogBatch()}
	if err := w.logs(cutoff, keep); err != nil {
		w.b.Abort()
		return 0, err
	}
	// Identity marks: every day before the cutoff's goes whole (marks of the
	// cutoff's own day that are older than the cutoff stay until the next
	// day; lookups ignore them).
	if err := s.sweepMarkDays(w.b, cutoff); err != nil {
		w.b.Abort()
		return 0, err
	}
	if w.b.Empty() {
		w.b.Abort()
		return 0, nil
	}
	return w.removed, w.b.CommitNoSync()
}

// sweeper is one retention sweep: its batch, committed as it grows.
type sweeper struct {
	s       *Store
	b       *Batch
	removed int
}

// drop deletes a delivery record and its payload.
func (w *sweeper) drop(key string) error {
	w.b.delete(key)
	w.b.delete(deliveryPayloadPrefix + key[len(deliveryPrefix):])
	w.removed++
	if w.b.b.Count() >= sweepBatchOps {
		// After a long downtime much may have expired at once: commit as
		// it goes rather than build one huge batch.
		if err := w.b.CommitNoSync(); err != nil {
			return err
		}
		w.b = w.s.NewLogBatch()
	}
	return nil
}

// logs walks every webhook's log, reading only what may go: past the keep
// most recent records, from the cutoff's ID down.
func (w *sweeper) logs(cutoff time.Time, keep int) error {
	it, err := w.s.db.NewIter(&pebble.IterOptions{LowerBound: []byte(deliveryPrefix), UpperBound: prefixEnd(deliveryPrefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; {
		// The webhook of this record, and the bounds of its log.
		rest := string(it.Key()[len(deliveryPrefix):])
		slash := strings.IndexByte(rest, '/')
		if slash < 0 {
			ok = it.Next()
			continue
		}
		prefix := deliveryPrefix + rest[:slash+1]
		end := prefixEnd(prefix)
		// Past the keep most recent...
		bound := append([]byte(nil), end...)
		ok = it.SeekLT(end)
		for i := 0; ok && i < keep && strings.HasPrefix(string(it.Key()), prefix); i++ {
			bound = append(bound[:0], it.Key()...)
			ok = it.Prev()
		}
		// ...and older than the cutoff.
		if cut := []byte(prefix + deliveryIDAt(cutoff)); bytes.Compare(cut, bound) < 0 {
			bound = cut
		}
		for ok = it.SeekLT(bound); ok && strings.HasPrefix(string(it.Key()), prefix); ok = it.Prev() {
			if key := string(it.Key()); recordTime(key[len(prefix):], it.Value()).Before(cutoff) {
				if err := w.drop(key); err != nil {
					return err
				}
			}
		}
		ok = it.SeekGE(end) // the next webhook's log
	}
	return it.Error()
}

// recordTime is a delivery's time: from its ID, or for an ID made before
// IDs carried their time, from the record (now when unreadable: kept).
func recordTime(id string, record []byte) time.Time {
	if t, ok := deliveryIDTime(id); ok {
		return t
	}
	var d factory.Delivery
	if json.Unmarshal(record, &d) != nil {
		return time.Now()
	}
	return d.Time
}

// sweepMarkDays deletes, as one range, the days of marks before the
// cutoff's day, if there are any.
func (s *Store) sweepMarkDays(b *Batch, cutoff time.Time) error {
	end := []byte(markPrefix + markDay(cutoff))
	found, err := s.hasKeyIn([]byte(markPrefix), end)
	if err != nil {
		return err
	}
	if found && b.err == nil {
		b.err = b.b.DeleteRange([]byte(markPrefix), end, nil)
	}
	return nil
}

// IdentityKeys calls fn with every identity mark in the store, as
// "<webhook uid>/<key>" (a key may come twice, from two days).
func (s *Store) IdentityKeys(fn func(string)) error {
	return s.scan(markPrefix, func(key string, _ []byte) error {
		if _, rest, ok := strings.Cut(key[len(markPrefix):], "/"); ok {
			fn(rest)
		}
		return nil
	})
}

// RecentDeliveries returns a webhook's most recent accepted deliveries
// (body and event type), newest first, at most n.
func (s *Store) RecentDeliveries(webhookUID string, n int) ([]factory.RecentDelivery, error) {
	var out []factory.RecentDelivery
	before := ""
	for len(out) < n {
		ds, more, err := s.Deliveries(webhookUID, before, 100)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if d.Label != factory.LabelAccepted || len(out) == n {
				continue
			}
			p, err := s.DeliveryPayload(webhookUID, d.ID)
			if err == nil {
				out = append(out, factory.RecentDelivery{EventType: d.EventType, Body: p})
			}
		}
		if !more {
			break
		}
		before = ds[len(ds)-1].ID
	}
	return out, nil
}

// IsQueued reports whether a delivery is still in the evaluation queue.
func (s *Store) IsQueued(deliveryID string) (bool, error) {
	_, err := s.get(evalQueuePrefix + deliveryID)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
