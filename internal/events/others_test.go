package events_test

import (
	"reflect"
	"testing"

	"factory"
	"factory/internal/events"
)

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
