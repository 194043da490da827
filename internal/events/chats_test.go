package events_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"factory"
	"factory/internal/events"
)

// chatCase is one delivery of testdata/talkback.json: a provider's payload
// (Slack's, Linear's, Jira's, Teams' documented shapes) and what it must
// read as, its subject (where a run reports and the work item it
// continues) among it.
type chatCase struct {
	Name     string              `json:"name"`
	Provider string              `json:"provider"`
	Payload  json.RawMessage     `json:"payload"`
	Events   []string            `json:"events"`
	Why      string              `json:"why"`
	Fields   map[string][]string `json:"fields"`
	Link     string              `json:"link"`
	Subject  *factory.Chat       `json:"subject"`
}

// TestChatDeliveries: every chat and tracker delivery gives its events,
// filter keys, link and subject: the thread, session or issue, its work
// item key, the message that asked and whether it continues a run.
func TestChatDeliveries(t *testing.T) {
	b, err := os.ReadFile("testdata/talkback.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []chatCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			evs, why := events.Normalize(c.Provider, "", decode(t, string(c.Payload)))
			var names []string
			for _, e := range evs {
				names = append(names, e.Event)
			}
			if !reflect.DeepEqual(names, c.Events) || c.Why != "" && why != c.Why {
				t.Fatalf("events %v (%q), want %v (%q)", names, why, c.Events, c.Why)
			}
			if len(evs) == 0 {
				return
			}
			if c.Fields != nil && !reflect.DeepEqual(evs[0].Fields, c.Fields) {
				t.Errorf("fields\n%v\nwant\n%v", evs[0].Fields, c.Fields)
			}
			if evs[0].Link != c.Link {
				t.Errorf("link %q, want %q", evs[0].Link, c.Link)
			}
			var got *factory.Chat
			if evs[0].Subject != nil {
				got = &evs[0].Subject.Chat
			}
			if !reflect.DeepEqual(got, c.Subject) {
				t.Errorf("subject\n%+v\nwant\n%+v", got, c.Subject)
			}
			if c.Subject != nil && evs[0].WorkItem() != c.Subject.Key {
				t.Errorf("work item %q, want %q", evs[0].WorkItem(), c.Subject.Key)
			}
		})
	}
}

// TestChatText: a message's words are kept up to factory.MaxChatText
// bytes, cut at a character's start.
func TestChatText(t *testing.T) {
	long := strings.Repeat("é", factory.MaxChatText)
	body, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T1",
		"event": map[string]any{"type": "app_mention", "user": "U1", "text": long, "ts": "1.1", "channel": "C1"}})
	evs, _ := events.Normalize("slack", "", decode(t, string(body)))
	text := evs[0].Subject.Text
	if len(text) > factory.MaxChatText || !strings.HasPrefix(long, text) || len(text) < factory.MaxChatText-1 {
		t.Fatalf("kept %d bytes", len(text))
	}
}
