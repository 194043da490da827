package events_test

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"factory/internal/events"
	"factory/internal/filter"
)

// testdata/deliveries.json holds a delivery of every event of the
// contract's GitHub table and of the other providers' events, written from
// each provider's webhook documentation (GitHub's "Webhook events and
// payloads", GitLab's "Webhook events", Linear's "Webhooks", Slack's Events
// API, Jira Cloud's "Webhooks"): the fields each event carries, trimmed of
// the many this server does not read, with the nesting and names of the
// real ones; with the events each must give and every filter key's value.
// The server's tests post the same deliveries, signed.

// DeliveryCase is one delivery of testdata/deliveries.json.
type DeliveryCase struct {
	Provider string              `json:"provider"`
	Kind     string              `json:"kind,omitempty"`
	Payload  json.RawMessage     `json:"payload"`
	Events   []string            `json:"events"`
	Fields   map[string][]string `json:"fields,omitempty"`
	Link     *string             `json:"link,omitempty"`
}

func deliveryCases(t *testing.T) []DeliveryCase {
	t.Helper()
	b, err := os.ReadFile("testdata/deliveries.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []DeliveryCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestDeliveries: every delivery gives its events, with the value of every
// filter key it takes, and its link.
func TestDeliveries(t *testing.T) {
	cases := deliveryCases(t)
	if len(cases) < 40 {
		t.Fatalf("%d deliveries: the corpus is missing", len(cases))
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%02d-%s-%s", i, c.Provider, strings.Join(c.Events, "+")), func(t *testing.T) {
			evs, why := events.Normalize(c.Provider, c.Kind, decode(t, string(c.Payload)))
			var names []string
			for _, e := range evs {
				names = append(names, e.Event)
				if e.Provider != c.Provider {
					t.Fatalf("event %s", events.Encode(e))
				}
			}
			if !reflect.DeepEqual(names, c.Events) {
				t.Fatalf("events %v (%s), want %v", names, why, c.Events)
			}
			if c.Fields != nil && !reflect.DeepEqual(evs[0].Fields, c.Fields) {
				t.Fatalf("fields\n%v\nwant\n%v", evs[0].Fields, c.Fields)
			}
			if c.Link != nil && evs[0].Link != *c.Link {
				t.Fatalf("link %q, want %q", evs[0].Link, *c.Link)
			}
		})
	}
}

const ghRepo = `"repository":{"id":1296269,"name":"widgets","full_name":"acme/widgets","private":false,"html_url":"https://github.com/acme/widgets","owner":{"login":"acme","type":"Organization"}},"sender":{"login":"octocat","id":1,"type":"User"}`

func ghIssue(extra string) string {
	return `{"id":1,"number":1347,"title":"Found a bug","state":"open","html_url":"https://github.com/acme/widgets/issues/1347",` +
		`"user":{"login":"octocat","id":1},"labels":[{"id":208045946,"name":"bug","color":"f29513"},{"name":"factory-ready"}],` +
		`"assignees":[{"login":"hubot"}],"body":"I'm having a problem with this."` + extra + `}`
}

func decode(t *testing.T, s string) any {
	t.Helper()
	p, err := filter.DecodePayload([]byte(s))
	if err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return p
}

func TestGitHubNoEvent(t *testing.T) {
	for _, c := range []struct{ kind, payload, why string }{
		{"ping", `{"zen":"Keep it logically awesome.","hook_id":1,` + ghRepo + `}`, "a GitHub ping"},
		{"issues", `{"action":"opened","issue":{"title":"x"}}`, "the issues payload has no repository.full_name"},
		{"issues", `{"action":"deleted","issue":` + ghIssue("") + `,` + ghRepo + `}`, "GitHub issues with action deleted starts nothing"},
		{"star", `{"action":"created",` + ghRepo + `}`, "GitHub event star starts nothing"},
		{"push", `[1,2]`, "the payload is not a JSON object"},
	} {
		evs, why := events.Normalize("github", c.kind, decode(t, c.payload))
		if len(evs) != 0 || !strings.HasPrefix(why, c.why) {
			t.Errorf("%s: %d events, why %q, want %q", c.kind, len(evs), why, c.why)
		}
	}
}
