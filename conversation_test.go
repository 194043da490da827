package factory

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBuildConversationTurns: a turn opens as it starts here, or as it is
// handed to a worker (dispatched) and starts when its agent does; a turn
// that ended before its agent started still ends there, and the next
// follow-up opens its own.
func TestBuildConversationTurns(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := func(kind, msg string, state RunState) *RunEvent {
		at = at.Add(time.Second)
		return &RunEvent{Time: at, Kind: kind, Message: msg, State: state}
	}
	cases := []struct {
		name   string
		events []*RunEvent
		want   string // per turn: index, prompt, started?, state
	}{
		{"here", []*RunEvent{ev("created", "", StateQueued), ev("started", "", StateInProgress), ev("message", "hi", ""), ev("finished", "ok", StateSucceeded),
			ev("followup", "more", ""), ev("started", "more", StateInProgress), ev("finished", "ok", StateSucceeded)},
			"1 p started SUCCEEDED | 2 more started SUCCEEDED"},
		{"on a worker", []*RunEvent{ev("created", "", StateQueued), ev("dispatched", "", StateQueued), ev("claimed", "", StateClaimed), ev("started", "", StateInProgress),
			ev("finished", "ok", StateSucceeded), ev("followup", "more", ""), ev("dispatched", "more", StateQueued), ev("claimed", "", StateClaimed),
			ev("started", "", StateInProgress), ev("finished", "ok", StateSucceeded)},
			"1 p started SUCCEEDED | 2 more started SUCCEEDED"},
		{"ended before its agent started", []*RunEvent{ev("created", "", StateQueued), ev("dispatched", "", StateQueued), ev("claimed", "", StateClaimed),
			ev("finished", "setup failed", StateFailed), ev("followup", "again", ""), ev("dispatched", "again", StateQueued), ev("started", "", StateInProgress),
			ev("finished", "ok", StateSucceeded)},
			"1 p - FAILED | 2 again started SUCCEEDED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := BuildConversation(&Run{ID: "run_1", Prompt: "p"}, tc.events)
			var got []string
			for _, turn := range c.Turns {
				started := "-"
				if turn.StartedAt != nil {
					started = "started"
				}
				got = append(got, fmt.Sprintf("%d %s %s %s", turn.Index, turn.Prompt, started, turn.State))
			}
			if g := strings.Join(got, " | "); g != tc.want {
				t.Errorf("got  %s\nwant %s", g, tc.want)
			}
		})
	}
}
