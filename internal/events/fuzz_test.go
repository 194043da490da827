package events_test

import (
	"strings"
	"testing"

	"factory"
	"factory/internal/events"
	"factory/internal/filter"
)

// FuzzMentions: every mention found is in the text after an "@".
func FuzzMentions(f *testing.F) {
	for _, s := range []string{"@a", "cc @acme/platform", "x@y", "@@", "@-", "@a/", "é@ü @日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, m := range events.Mentions(text) {
			if m == "" || !strings.Contains(text, "@"+m) {
				t.Fatalf("mention %q is not in %q", m, text)
			}
		}
	})
}

// FuzzNormalize: any JSON body of any provider gives events or a reason,
// never a panic; every event names its provider and event.
func FuzzNormalize(f *testing.F) {
	f.Add("github", "pull_request", `{"action":"opened","pull_request":{"labels":[1,{"name":2}]},"repository":{"full_name":"a/b"}}`)
	f.Add("gitlab", "Note Hook", `{"project":{"path_with_namespace":"a"},"object_attributes":{"note":"@x"}}`)
	f.Add("linear", "", `{"type":"Issue","action":"update","updatedFrom":{"labelIds":null},"data":[]}`)
	f.Add("slack", "", `{"type":"event_callback","event":{"type":"message","channel_type":"im"}}`)
	f.Add("jira", "", `{"webhookEvent":"jira:issue_updated","changelog":{"items":[{"field":"labels"}]},"issue":{"self":"/rest/","key":"K"}}`)
	f.Add("teams", "", `{"type":"message","id":"1","conversation":{"id":"19:a;messageid=0"},"entities":[{"type":"mention","mentioned":{"id":1}}]}`)
	f.Add("linear", "", `{"type":"AgentSessionEvent","action":"prompted","agentSession":{"id":"s","comment":{"bodyData":"{\"type\":\"mention\"}"}}}`)
	f.Add("slack", "", `{"type":"event_callback","event":{"type":"message","ts":"1","thread_ts":"0","channel":"C","bot_id":""}}`)
	f.Fuzz(func(t *testing.T, provider, kind, body string) {
		p, err := filter.DecodePayload([]byte(body))
		if err != nil {
			return
		}
		evs, why := events.Normalize(provider, kind, p)
		if len(evs) == 0 && why == "" {
			t.Fatal("no event and no reason")
		}
		for _, e := range evs {
			if e.Provider != provider || e.Event == "" {
				t.Fatalf("event %s", events.Encode(e))
			}
			if s := e.Subject; s != nil && (len(s.Text) > factory.MaxChatText || s.Continues && s.Key == "") {
				t.Fatalf("subject %s", events.Encode(e))
			}
		}
	})
}
