package runtime_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"factory/internal/runtime"
)

// TestLimitOutput: a worker passes a turn's messages on within the turn's
// bounds, each cut, the rest counted; the turn's steps always pass.
func TestLimitOutput(t *testing.T) {
	var got []string
	lim := runtime.OutputLimits{Message: 8, TurnMessages: 3, TurnBytes: 20}
	events, dropped := runtime.LimitOutput(func(e runtime.Event) { got = append(got, e.Message+e.Phase) }, lim)
	for _, m := range []string{"one", "twotwotwotwo", "three", "four", "five"} {
		events(runtime.Event{Message: m})
	}
	events(runtime.Event{Phase: runtime.PhaseStarted})
	if strings.Join(got, "|") != "one|twotw…|three|started" {
		t.Errorf("passed %q", got)
	}
	if d := dropped(); d.Messages != 2 || d.Bytes != 8 {
		t.Errorf("dropped %+v, want 2 messages of 8 bytes", d)
	}
}

// TestCutMessage: a message is cut on a character's boundary, within its
// bound, the cut marked.
func TestCutMessage(t *testing.T) {
	for _, s := range []string{"", "short", strings.Repeat("é", 40), strings.Repeat("x", 100), "ab€€€€€€€€"} {
		for _, limit := range []int{4, 5, 9, 16, 1000} {
			c := runtime.CutMessage(s, limit)
			if len(c) > max(limit, 0) && len(s) > limit || !utf8.ValidString(c) || len(s) <= limit && c != s {
				t.Errorf("CutMessage(%q, %d) = %q", s, limit, c)
			}
		}
	}
}
