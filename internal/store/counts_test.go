package store

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"factory"
)

// TestCounts: the dashboard's counts see what was created since the
// moment, follow a run that changes state, and stop at their bound.
func TestCounts(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	midnight := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	var runs []*factory.Run
	for i, at := range []time.Time{midnight.Add(-time.Minute), midnight, midnight.Add(time.Hour), midnight.Add(2 * time.Hour)} {
		r := &factory.Run{ID: fmt.Sprintf("run_%d", i), State: factory.StateQueued, CreatedAt: at, UpdatedAt: at}
		b := s.NewLogBatch()
		b.PutRun(r, nil)
		if err := b.CommitNoSync(); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if _, err := s.UpdateRun(runs[3].ID, true, func(r *factory.Run, _ *Batch) error {
		r.UpdatedAt = r.UpdatedAt.Add(time.Minute)
		for _, st := range []factory.RunState{factory.StateClaimed, factory.StateInProgress, factory.StateSucceeded} {
			if err := r.MoveTo(st); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	count := func(st factory.RunState, max int) string {
		n, more, err := s.CountRunsSince(st, midnight, max)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(n, more)
	}
	for _, c := range []struct {
		state factory.RunState
		max   int
		want  string
	}{
		{factory.StateQueued, 10, "2 false"}, // the run before midnight is not counted; the one that ended moved
		{factory.StateSucceeded, 10, "1 false"},
		{factory.StateQueued, 1, "1 true"},
		{factory.StateFailed, 10, "0 false"},
	} {
		if got := count(c.state, c.max); got != c.want {
			t.Errorf("%s (max %d): %s, want %s", c.state, c.max, got, c.want)
		}
	}

	var last atomic.Int64
	for i := -2; i < 3; i++ {
		at := midnight.Add(time.Duration(i) * time.Minute)
		d := &factory.Delivery{ID: newDeliveryID(at, &last), WebhookUID: "wh_a", Label: factory.LabelAccepted, Time: at, RunIDs: []string{}}
		if err := s.RecordDelivery(d, []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		uid  string
		max  int
		want string
	}{{"wh_a", 10, "3 false"}, {"wh_a", 2, "2 true"}, {"wh_b", 10, "0 false"}} {
		n, more, err := s.CountDeliveriesSince(c.uid, midnight, c.max)
		if err != nil || fmt.Sprint(n, more) != c.want {
			t.Errorf("deliveries of %s (max %d): %d %v %v, want %s", c.uid, c.max, n, more, err, c.want)
		}
	}
}
