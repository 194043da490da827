package events_test

import (
	"reflect"
	"strings"
	"testing"

	"factory"
	"factory/internal/events"
)

// Payloads written from each provider's webhook documentation (GitLab's
// "Webhook events", Linear's "Webhooks", Slack's Events API, Jira Cloud's
// "Webhooks"), trimmed to what the events read.
func TestOtherProvidersEvents(t *testing.T) {
	for _, c := range []struct {
		provider, kind, payload string
		want                    []string
		fields                  map[string][]string
		link                    string
	}{
		{"gitlab", "Merge Request Hook", `{"object_kind":"merge_request","event_type":"merge_request","user":{"username":"root"},"project":{"id":1,"path_with_namespace":"acme/platform/api","web_url":"https://gitlab.com/acme/platform/api"},"object_attributes":{"iid":7,"action":"open","url":"https://gitlab.com/acme/platform/api/-/merge_requests/7","target_branch":"main"}}`,
			[]string{"merge_request"}, map[string][]string{"repos": {"acme/platform/api"}, "actions": {"open"}}, "https://gitlab.com/acme/platform/api/-/merge_requests/7"},
		{"gitlab", "Note Hook", `{"object_kind":"note","project":{"path_with_namespace":"acme/api"},"object_attributes":{"note":"@factory-bot please fix","noteable_type":"MergeRequest","url":"https://gitlab.com/acme/api/-/merge_requests/7#note_1"}}`,
			[]string{"bot_mentioned"}, map[string][]string{"repos": {"acme/api"}}, "https://gitlab.com/acme/api/-/merge_requests/7#note_1"},
		{"gitlab", "Push Hook", `{"object_kind":"push","ref":"refs/heads/main","project":{"path_with_namespace":"acme/api","web_url":"https://gitlab.com/acme/api"},"commits":[]}`,
			[]string{"push"}, map[string][]string{"repos": {"acme/api"}}, "https://gitlab.com/acme/api"},
		{"linear", "", `{"action":"create","type":"Issue","url":"https://linear.app/acme/issue/ENG-12","data":{"id":"i1","identifier":"ENG-12","title":"Crash on save","team":{"key":"ENG","name":"Engineering"},"labels":[{"name":"bug"}],"project":{"name":"Q4"},"state":{"name":"Todo"}}}`,
			[]string{"issue_created"}, map[string][]string{"teams": {"ENG", "Engineering"}, "labels": {"bug"}, "projects": {"Q4"}, "states": {"Todo"}}, "https://linear.app/acme/issue/ENG-12"},
		{"linear", "", `{"action":"update","type":"Issue","updatedFrom":{"labelIds":[],"stateId":"s0"},"data":{"team":{"key":"ENG"},"labels":[{"name":"factory"}],"state":{"name":"In Review"}}}`,
			[]string{"issue_labeled", "issue_state_changed"}, map[string][]string{"teams": {"ENG"}, "labels": {"factory"}, "states": {"In Review"}}, ""},
		{"linear", "", `{"action":"update","type":"Issue","updatedFrom":{"assigneeId":null},"data":{"team":{"key":"ENG"}}}`,
			[]string{"issue_assigned"}, map[string][]string{"teams": {"ENG"}}, ""},
		{"linear", "", `{"action":"create","type":"Comment","data":{"body":"hi","issue":{"team":{"key":"ENG"}}}}`,
			[]string{"comment_created"}, nil, ""},
		{"linear", "", `{"action":"created","type":"AgentSessionEvent","agentSession":{"id":"s1","url":"https://linear.app/acme/issue/ENG-12","team":{"key":"ENG"}}}`,
			[]string{"agent_session_created"}, nil, "https://linear.app/acme/issue/ENG-12"},
		{"slack", "", `{"type":"event_callback","team_id":"T1","event_id":"Ev01","event":{"type":"app_mention","user":"U0123456789","text":"<@U0BOT> deploy the fix","channel":"C0123456789","ts":"1.2"}}`,
			[]string{"app_mention"}, map[string][]string{"channel_ids": {"C0123456789"}, "channels": {"C0123456789"}, "users": {"U0123456789"}, "keywords": {"<@U0BOT> deploy the fix"}}, ""},
		{"slack", "", `{"type":"event_callback","event":{"type":"message","channel_type":"channel","user":"U1","text":"intake","channel":"C1"}}`,
			[]string{"message_posted"}, nil, ""},
		{"slack", "", `{"type":"event_callback","event":{"type":"message","channel_type":"im","user":"U1","text":"hi","channel":"D1"}}`,
			[]string{"message_dm", "message_im"}, nil, ""},
		{"slack", "", `{"type":"event_callback","event":{"type":"message","channel_type":"mpim","user":"U1","text":"hi","channel":"G1"}}`,
			[]string{"message_mpim"}, nil, ""},
		{"slack", "", `{"type":"event_callback","event":{"type":"reaction_added","user":"U1","reaction":"ticket","item":{"type":"message","channel":"C1","ts":"1.2"}}}`,
			[]string{"reaction_added"}, map[string][]string{"channel_ids": {"C1"}, "channels": {"C1"}, "users": {"U1"}, "emojis": {"ticket"}}, ""},
		{"slack", "", `{"type":"event_callback","event":{"type":"member_joined_channel","user":"U1","channel":"C1"}}`,
			[]string{"member_joined_channel"}, nil, ""},
		{"jira", "", `{"webhookEvent":"jira:issue_created","issue":{"id":"10001","key":"ENG-7","self":"https://acme.atlassian.net/rest/api/2/issue/10001","fields":{"summary":"Outage in EU","description":"Checkout fails","project":{"key":"ENG"}}}}`,
			[]string{"issue_created"}, map[string][]string{"project_keys": {"ENG"}, "keywords": {"Outage in EU", "Checkout fails"}}, "https://acme.atlassian.net/browse/ENG-7"},
		{"jira", "", `{"webhookEvent":"jira:issue_updated","issue":{"key":"ENG-7","fields":{"summary":"x","project":{"key":"ENG"}}},"changelog":{"items":[{"field":"labels","toString":"factory"},{"field":"status","toString":"In Progress"}]}}`,
			[]string{"issue_labeled", "status_changed"}, nil, ""},
	} {
		t.Run(c.provider+"/"+strings.Join(c.want, "+"), func(t *testing.T) {
			evs, why := events.Normalize(c.provider, c.kind, decode(t, c.payload))
			var names []string
			for _, e := range evs {
				names = append(names, e.Event)
			}
			if !reflect.DeepEqual(names, c.want) {
				t.Fatalf("events %v (%s), want %v", names, why, c.want)
			}
			if c.fields != nil && !reflect.DeepEqual(evs[0].Fields, c.fields) {
				t.Fatalf("fields %v, want %v", evs[0].Fields, c.fields)
			}
			if evs[0].Link != c.link {
				t.Fatalf("link %q, want %q", evs[0].Link, c.link)
			}
		})
	}
}

// TestFilterKeys: every filter key matching and not matching, with a
// list, in and not_in; a key the event lacks.
func TestFilterKeys(t *testing.T) {
	ev := &factory.ProviderEvent{Fields: map[string][]string{"repos": {"Acme/Widgets"}, "labels": {"bug", "factory-ready"},
		"paths": {"api/v1/users.go", "README.md"}, "keywords": {"The checkout is DOWN in EU"}, "branches": {"main"}, "authors": {"octocat"},
		"assignees": {"hubot"}, "mentioned": {"factory-bot"}, "reviewers": {"r1"}, "reviewer_teams": {"platform"}, "workflows": {"CI"},
		"conclusions": {"failure"}, "base_branches": {"main"}, "actions": {"open"}, "teams": {"ENG"}, "projects": {"Q4"}, "states": {"Todo"},
		"project_keys": {"ENG"}, "channel_ids": {"C1"}, "channels": {"C1"}, "users": {"U1"}, "emojis": {"ticket"}}}
	in := func(v ...string) factory.ValueSet { return factory.ValueSet{In: v} }
	notIn := func(v ...string) factory.ValueSet { return factory.ValueSet{NotIn: v} }
	for _, c := range []struct {
		key  string
		vs   factory.ValueSet
		want bool
	}{
		{"repos", in("acme/widgets"), true}, {"repos", in("acme/other"), false}, {"repos", notIn("ACME/WIDGETS"), false},
		{"labels", in("factory-ready"), true}, {"labels", in("Factory-Ready"), false}, {"labels", notIn("wontfix"), true}, {"labels", notIn("bug"), false},
		{"paths", in("api/**"), true}, {"paths", in("**/*.go"), true}, {"paths", in("*.md"), true}, {"paths", in("api/*.go"), false},
		{"paths", in("docs/**"), false}, {"paths", notIn("**/*.md"), false}, {"paths", in("api/v?/users.go"), true},
		{"keywords", in("down"), true}, {"keywords", in("checkout is down"), true}, {"keywords", in("outage"), false},
		{"branches", in("main"), true}, {"branches", in("release"), false}, {"branches", notIn("gh-pages"), true},
		{"authors", in("octocat"), true}, {"authors", in("dependabot"), false}, {"authors", notIn("dependabot"), true},
		{"assignees", in("hubot"), true}, {"assignees", in("x"), false}, {"mentioned", in("factory-bot"), true}, {"mentioned", in("x"), false},
		{"reviewers", in("r1"), true}, {"reviewers", in("r2"), false}, {"reviewer_teams", in("platform"), true}, {"reviewer_teams", in("web"), false},
		{"workflows", in("CI"), true}, {"workflows", in("Deploy"), false}, {"conclusions", in("failure", "timed_out"), true}, {"conclusions", in("success"), false},
		{"base_branches", in("main"), true}, {"base_branches", in("dev"), false}, {"actions", in("open", "reopen"), true}, {"actions", in("merge"), false},
		{"teams", in("ENG"), true}, {"teams", in("OPS"), false}, {"projects", in("Q4"), true}, {"projects", in("Q1"), false},
		{"states", in("Todo"), true}, {"states", in("Done"), false}, {"project_keys", in("ENG"), true}, {"project_keys", in("OPS"), false},
		{"channel_ids", in("C1"), true}, {"channel_ids", in("C2"), false}, {"channels", in("C1"), true}, {"channels", in("intake"), false},
		{"users", in("U1"), true}, {"users", in("U2"), false}, {"emojis", in("ticket"), true}, {"emojis", in("eyes"), false},
		{"missing_key", in("x"), false}, {"missing_key", notIn("x"), true},
	} {
		if got := events.MatchKeys(map[string]factory.ValueSet{c.key: c.vs}, ev); got != c.want {
			t.Errorf("%s %+v: %v, want %v", c.key, c.vs, got, c.want)
		}
	}
	x := events.ExplainKeys(map[string]factory.ValueSet{"labels": in("wanted")}, &factory.ProviderEvent{Fields: map[string][]string{"labels": {"bug"}}})
	if len(x) != 1 || x[0].Passed || x[0].Path != "labels" || !reflect.DeepEqual(x[0].Expected, []string{"wanted"}) || !reflect.DeepEqual(x[0].Actual, []string{"bug"}) {
		t.Fatalf("explanation: %+v", x)
	}
}

func TestMentions(t *testing.T) {
	for text, want := range map[string][]string{
		"@factory-bot please":                          {"factory-bot"},
		"cc @a, @acme/platform and @a":                 {"a", "acme/platform"},
		"mail me at dev@acme.example":                  nil,
		"path/@x and word@y and @@z":                   nil,
		"(@octocat)":                                   {"octocat"},
		"@-x @ x":                                      nil,
		"@abcdefghijklmnopqrstuvwxyz0123456789abcdefg": {"abcdefghijklmnopqrstuvwxyz0123456789abc"},
		"trailing @":                                   nil,
		"@team/":                                       {"team"},
	} {
		if got := events.Mentions(text); !reflect.DeepEqual(got, want) {
			t.Errorf("Mentions(%q) = %v, want %v", text, got, want)
		}
	}
}
