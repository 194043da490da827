package store

import (
	"sync/atomic"
	"testing"
	"time"
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
// identity marks older than the window go too.
func TestSweepDeliveries(t *testing.T) {
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
			d := &Delivery{ID: newDeliveryID(when, &last), WebhookUID: uid, Label: label, Time: when, RunIDs: []string{}}
			if err := s.RecordDelivery(d, []byte(`{}`), []string{IdentityKey("header", d.ID)}); err != nil {
				t.Fatal(err)
			}
			ids[uid] = append(ids[uid], d.ID)
		}
	}
	old, recent := now.Add(-8*24*time.Hour), now.Add(-time.Hour)
	add("wh_d", 6, old.Add(-time.Hour), LabelAccepted) // 6 old: the oldest goes
	add("wh_a", 8, old, LabelAccepted)                 // 8 old, then 2 recent: the 5 oldest go
	add("wh_b", 4, old, LabelDuplicate)                // fewer than keep: all stay
	add("wh_a", 2, recent, LabelAccepted)
	add("wh_c", 10, recent, LabelRejectedAuth) // all recent: all stay
	// A record whose ID is not a delivery ID is judged by its stored time.
	odd := &Delivery{ID: "dlv_0", WebhookUID: "wh_d", Label: LabelAccepted, Time: old, RunIDs: []string{}}
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
