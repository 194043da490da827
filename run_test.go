package factory

import (
	"slices"
	"testing"
	"time"
)

func TestISODuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "PT0S",
		1500 * time.Millisecond: "PT1.5S",
		90 * time.Second:        "PT1M30S",
		time.Hour + 2*time.Minute + 3*time.Second: "PT1H2M3S",
		2 * time.Hour: "PT2H",
		-time.Second:  "PT0S",
	} {
		if got := isoDuration(d); got != want {
			t.Errorf("%v: %s, want %s", d, got, want)
		}
	}
}

func TestRunItemFinishedAt(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(90 * time.Second)
	r := &Run{ID: "run_1", State: StateSucceeded, StartedAt: &start, FinishedAt: &end}
	it := r.Item()
	if it.FinishedAt == nil || !it.FinishedAt.Equal(end) || it.RunTime != "PT1M30S" || it.RootRunID != "run_1" {
		t.Fatalf("%+v", it)
	}
	r.State = StateQueued // continued by a follow-up: not finished any more
	if it := r.Item(); it.FinishedAt != nil {
		t.Fatalf("a queued run shows finished_at %v", it.FinishedAt)
	}
}

func TestTimelineEventTypes(t *testing.T) {
	events := []*RunEvent{{Kind: "created"}, {Kind: "started"}, {Kind: "message", Message: "hello"},
		{Kind: "message", Message: "[tool] grep (completed)"}, {Kind: "message", Message: "[plan] a (pending)"},
		{Kind: "message", Message: "[permission] Write x: Allow (allow_once)"}, {Kind: "message", Message: "artifacts: x: too large"},
		{Kind: "followup", Message: "more"}, {Kind: "finished", State: StateBlocked}, {Kind: "finished", State: StateSucceeded}}
	want := []string{"oz_run_created", "agent_started", "status_message", "tool_call", "plan", "permission_decision",
		"artifact_problem", "followup", "oz_run_blocked", "oz_run_done"}
	for i, e := range Timeline("run_x", events) {
		if e.EventType != want[i] {
			t.Errorf("event %d (%+v): %s, want %s", i, events[i], e.EventType, want[i])
		}
	}
	// The event stream's names, which the dashboard listens for, are all
	// of them.
	events = append(events, &RunEvent{Kind: "finished", State: StateFailed}, &RunEvent{Kind: "finished", State: StateCancelled},
		&RunEvent{Kind: "finished", State: StateError})
	for _, e := range Timeline("run_x", events) {
		if !slices.Contains(TimelineEventTypes, e.EventType) {
			t.Errorf("%s is not in TimelineEventTypes", e.EventType)
		}
	}
}
