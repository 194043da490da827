package measure

import (
	"strings"
	"testing"
)

func TestParseVerdict(t *testing.T) {
	labels := []string{"good", "Needs Work", "bad"}
	for _, tc := range []struct {
		name, text, want, reason, err string
	}{
		{name: "alone", text: `{"classification": "good", "reason": "tests ran"}`, want: "good", reason: "tests ran"},
		{name: "after text", text: "I looked at the run.\nVerdict:\n{\"classification\":\"bad\",\"reason\":\"no tests\"}", want: "bad", reason: "no tests"},
		{name: "in a fence", text: "```json\n{\"classification\": \"good\"}\n```", want: "good"},
		{name: "the last wins", text: `{"classification":"bad"} then {"classification":"good"}`, want: "good"},
		{name: "label case and space", text: `{"classification":" needs work "}`, want: "Needs Work"},
		{name: "nested braces in reason", text: `{"classification":"bad","reason":"saw {x} and }"}`, want: "bad", reason: "saw {x} and }"},
		{name: "an object without it after", text: `{"classification":"good"} {"other": 1}`, want: "good"},
		{name: "unknown label", text: `{"classification":"excellent"}`, err: `"excellent" is none of the scorer's labels`},
		{name: "none", text: "looks fine to me", err: "no verdict"},
		{name: "not a string", text: `{"classification": 3}`, err: "no verdict"},
		{name: "empty", text: `{"classification": ""}`, err: "no verdict"},
		{name: "broken json", text: `{"classification": "good"`, err: "no verdict"},
		{name: "reason not a string", text: `{"classification":"good","reason":{"a":1}}`, want: "good"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParseVerdict(tc.text, labels)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || v.Classification != tc.want || v.Reason != tc.reason {
				t.Fatalf("%+v %v, want %q %q", v, err, tc.want, tc.reason)
			}
		})
	}
}

// TestParseVerdictBounded: a flood of braces is read in bounded time and
// finds nothing.
func TestParseVerdictBounded(t *testing.T) {
	text := strings.Repeat(`{"classification": `, 100000)
	if _, err := ParseVerdict(text, []string{"good"}); err == nil {
		t.Fatal("a verdict in a flood of broken objects")
	}
}

func FuzzParseVerdict(f *testing.F) {
	for _, s := range []string{`{"classification":"good","reason":"r"}`, "x {\"classification\": \"bad\"} y", `{{{"classification"`, "```\n{}\n```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v, err := ParseVerdict(text, []string{"good", "bad"})
		if err == nil && v.Classification != "good" && v.Classification != "bad" {
			t.Fatalf("a label the scorer does not have: %q", v.Classification)
		}
	})
}
