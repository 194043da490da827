package store

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"factory"
)

func TestDeliveryIDs(t *testing.T) {
	var last atomic.Int64
	at := time.Date(2026, 11, 22, 3, 4, 5, 6, time.UTC)
	a, b := newDeliveryID(at, &last), newDeliveryID(at, &last)
	if a >= b || len(a) != 33 {
		t.Fatalf("IDs at the same time must differ and grow: %s %s", a, b)
	}
	if got, ok := deliveryIDTime(a); !ok || !got.Equal(at) {
		t.Fatalf("time of %s: %v %v", a, got, ok)
	}
	if low := deliveryIDAt(at); low > a || deliveryIDAt(at.Add(-time.Nanosecond)) >= a {
		t.Fatalf("deliveryIDAt does not bound %s", a)
	}
	for _, bad := range []string{"", "dlv_", "dlv_0001", "run_" + a[4:], a + "0", "dlv_" + a[5:] + "!"} {
		if _, ok := deliveryIDTime(bad); ok {
			t.Errorf("%q parsed as a delivery ID", bad)
		}
	}
}

// TestSweepDeliveries: a record goes when it is older than the window and
// not among the most recent of its webhook; its payload goes with it, and
// identity marks older than the window go too. The sweep commits every two
// records here, as it does every 10,000 in a server.
func TestSweepDeliveries(t *testing.T) {
	defer func(n uint32) { sweepBatchOps = n }(sweepBatchOps)
	sweepBatchOps = 4
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	const keep, age = 5, 7 * 24 * time.Hour
	ids := map[string][]string{}
	var last atomic.Int64 // IDs are made in time order, as a server makes them
	add := func(uid string, n int, at time.Time, label string) {
		for i := 0; i < n; i++ {
			when := at.Add(time.Duration(i) * time.Minute)
			d := &factory.Delivery{ID: newDeliveryID(when, &last), WebhookUID: uid, Label: label, Time: when, RunIDs: []string{}}
			if err := s.RecordDelivery(d, []byte(`{}`), []string{IdentityKey("header", d.ID)}); err != nil {
				t.Fatal(err)
			}
			ids[uid] = append(ids[uid], d.ID)
		}
	}
	old, recent := now.Add(-8*24*time.Hour), now.Add(-time.Hour)
	add("wh_d", 6, old.Add(-time.Hour), factory.LabelAccepted) // 6 old: the oldest goes
	add("wh_a", 8, old, factory.LabelAccepted)                 // 8 old, then 2 recent: the 5 oldest go
	add("wh_b", 4, old, factory.LabelDuplicate)                // fewer than keep: all stay
	add("wh_a", 2, recent, factory.LabelAccepted)
	add("wh_c", 10, recent, factory.LabelRejectedAuth) // all recent: all stay
	// A record whose ID is not a delivery ID is judged by its stored time.
	odd := &factory.Delivery{ID: "dlv_0", WebhookUID: "wh_d", Label: factory.LabelAccepted, Time: old, RunIDs: []string{}}
	if err := s.RecordDelivery(odd, []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}

	n, err := s.SweepDeliveries(now, keep, age)
	if err != nil {
		t.Fatal(err)
	}
	if n != 5+2 {
		t.Fatalf("removed %d records, want 7", n)
	}
	want := map[string][]string{"wh_a": ids["wh_a"][5:], "wh_b": ids["wh_b"], "wh_c": ids["wh_c"], "wh_d": ids["wh_d"][1:]}
	for uid, w := range want {
		got, _, err := s.Deliveries(uid, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(w) || got[0].ID != w[len(w)-1] || got[len(got)-1].ID != w[0] {
			t.Errorf("%s keeps %d records, want %d (%s...%s)", uid, len(got), len(w), w[0], w[len(w)-1])
		}
	}
	if _, err := s.DeliveryPayload("wh_a", ids["wh_a"][0]); err != ErrNotFound {
		t.Errorf("a swept record's payload stays: %v", err)
	}
	if _, err := s.DeliveryPayload("wh_a", ids["wh_a"][5]); err != nil {
		t.Errorf("a kept record's payload went: %v", err)
	}
	// Identity marks (of accepted deliveries): only the 2 recent ones stay.
	marks := 0
	s.IdentityKeys(func(string) { marks++ })
	if marks != 2 {
		t.Errorf("%d identity marks stay, want 2", marks)
	}
	// A second pass finds nothing more.
	if n, err := s.SweepDeliveries(now, keep, age); n != 0 || err != nil {
		t.Fatalf("second pass: %d %v", n, err)
	}
}

// TestIdentityMarks: marks are found within their window, across a day
// boundary; the sweep removes whole days before the cutoff's. (Marks in
// the layout before day buckets are moved by the format migration:
// TestFormatMigration.)
func TestIdentityMarks(t *testing.T) {
	m := newMarksFixture(t)
	marksWindow(t, m)
	marksSweep(t, m)
}

// marksFixture is a store and the helpers of TestIdentityMarks.
type marksFixture struct {
	dir      string
	s        *Store
	midnight time.Time
	accept   func(at time.Time, key string) string
	seen     func(key string, since, until time.Time) string
}

const week = 7 * 24 * time.Hour

func newMarksFixture(t *testing.T) *marksFixture {
	m := &marksFixture{dir: t.TempDir(), midnight: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
	s, err := Open(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	m.s = s
	t.Cleanup(func() { m.s.Close() })
	var last atomic.Int64
	m.accept = func(at time.Time, key string) string {
		t.Helper()
		d := &factory.Delivery{ID: newDeliveryID(at, &last), WebhookUID: "wh_a", Label: factory.LabelAccepted, Time: at, RunIDs: []string{}}
		if err := m.s.RecordDelivery(d, []byte(`{}`), []string{key}); err != nil {
			t.Fatal(err)
		}
		return d.ID
	}
	m.seen = func(key string, since, until time.Time) string {
		t.Helper()
		id, ok, err := m.s.SeenIdentity("wh_a", key, since, until)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ""
		}
		return id
	}
	return m
}

// marksWindow: a mark is found within its window, across a day boundary.
func marksWindow(t *testing.T, m *marksFixture) {
	midnight, seen := m.midnight, m.seen
	// A mark made just after midnight by a request that started just before.
	late := m.accept(midnight.Add(time.Millisecond), "header:late")
	if got := seen("header:late", midnight.Add(-week), midnight.Add(-time.Millisecond)); got != late {
		t.Errorf("a mark of the next day is not found: %q", got)
	}
	// Found six days later; not once it is older than the window.
	if got := seen("header:late", midnight.Add(6*24*time.Hour-week), midnight.Add(6*24*time.Hour)); got != late {
		t.Errorf("a mark six days old is not found: %q", got)
	}
	if got := seen("header:late", midnight.Add(time.Hour), midnight.Add(time.Hour+week)); got != "" {
		t.Errorf("a mark older than the window is found: %q", got)
	}
	if got := seen("header:other", midnight.Add(-week), midnight.Add(time.Hour)); got != "" {
		t.Errorf("an identity never accepted is found: %q", got)
	}
}

// marksSweep: eight days on, the sweep removes whole days before the
// cutoff's.
func marksSweep(t *testing.T, m *marksFixture) {
	midnight, seen, s := m.midnight, m.seen, m.s
	// Eight days on: the day of "late" goes; a mark of the cutoff's own day
	// that is older than the cutoff stays, and is not found.
	now := midnight.Add(8*24*time.Hour + 12*time.Hour)
	cutoffDay := m.accept(now.Add(-week-time.Hour), "header:cutoff-day")
	if _, err := s.SweepDeliveries(now, 50, week); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	s.IdentityKeys(func(k string) { keys[k] = true })
	if keys["wh_a/header:late"] || !keys["wh_a/header:cutoff-day"] || len(keys) != 1 {
		t.Errorf("after the sweep: %v", keys)
	}
	if got := seen("header:cutoff-day", now.Add(-week), now); got != "" {
		t.Errorf("a mark older than the window (%s) is found", cutoffDay)
	}
}

// BenchmarkSweepMarks is the identity-mark part of one retention pass over
// 1,000 and 100,000 marks from the last day (none may go): with day
// buckets it reads nothing but the start of the marks.
func BenchmarkSweepMarks(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run("days/"+strconv.Itoa(n), func(b *testing.B) {
			s, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			now := time.Now()
			for i := 0; i < n; {
				batch := s.NewLogBatch()
				for j := 0; j < 5000 && i < n; j, i = j+1, i+1 {
					at := now.Add(-time.Duration(i) * time.Millisecond)
					key := IdentityKey("header", strconv.Itoa(i))
					batch.putRaw(markKey(markDay(at), "wh_a", key), identityMark("dlv_x", at))
				}
				if err := batch.CommitNoSync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if n, err := s.SweepDeliveries(now, 50, 7*24*time.Hour); err != nil || n != 0 {
					b.Fatal(n, err)
				}
			}
		})
	}
}
