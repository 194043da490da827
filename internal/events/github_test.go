package events_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"factory/internal/events"
	"factory/internal/filter"
)

// The payloads below are written from GitHub's webhook documentation
// ("Webhook events and payloads"): the fields each event carries, trimmed
// of the many this server does not read, but with the nesting and names of
// the real ones.

const ghRepo = `"repository":{"id":1296269,"name":"widgets","full_name":"acme/widgets","private":false,"html_url":"https://github.com/acme/widgets","owner":{"login":"acme","type":"Organization"}},"sender":{"login":"octocat","id":1,"type":"User"}`

func ghIssue(extra string) string {
	return `{"id":1,"number":1347,"title":"Found a bug","state":"open","html_url":"https://github.com/acme/widgets/issues/1347",` +
		`"user":{"login":"octocat","id":1},"labels":[{"id":208045946,"name":"bug","color":"f29513"},{"name":"factory-ready"}],` +
		`"assignees":[{"login":"hubot"}],"body":"I'm having a problem with this."` + extra + `}`
}

func ghPR(extra string) string {
	return `{"id":279147437,"number":42,"state":"open","title":"Fix the pager","html_url":"https://github.com/acme/widgets/pull/42",` +
		`"user":{"login":"octocat"},"labels":[{"name":"needs-review"}],"assignees":[{"login":"hubot"}],"body":"Fixes #1347",` +
		`"merged":false,"head":{"ref":"fix-pager","sha":"6dcb09b5b57875f334f61aebed695e2e4193db5e"},"base":{"ref":"main"}` + extra + `}`
}

type ghCase struct {
	kind, payload string
	want          []string // event names
	fields        map[string][]string
}

func ghCases() []ghCase {
	common := map[string][]string{"repos": {"acme/widgets"}, "authors": {"octocat"}, "labels": {"bug", "factory-ready"}, "assignees": {"hubot"}}
	with := func(base map[string][]string, kv ...any) map[string][]string {
		out := map[string][]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(out, kv[i].(string))
				continue
			}
			out[kv[i].(string)] = kv[i+1].([]string)
		}
		return out
	}
	pr := map[string][]string{"repos": {"acme/widgets"}, "authors": {"octocat"}, "labels": {"needs-review"}, "assignees": {"hubot"}, "base_branches": {"main"}}
	return []ghCase{
		{"issues", `{"action":"opened","issue":` + ghIssue("") + `,` + ghRepo + `}`, []string{"issue_created"}, common},
		{"issues", `{"action":"labeled","label":{"name":"factory-ready"},"issue":` + ghIssue("") + `,` + ghRepo + `}`, []string{"issue_labeled"}, with(common, "labels", []string{"factory-ready"})},
		{"issues", `{"action":"assigned","assignee":{"login":"factory-bot"},"issue":` + ghIssue("") + `,` + ghRepo + `}`, []string{"issue_assigned"}, with(common, "assignees", []string{"hubot", "factory-bot"})},
		{"issues", `{"action":"edited","issue":` + strings.Replace(ghIssue(""), `"I'm having a problem with this."`, `"cc @factory-bot and @acme/platform"`, 1) + `,` + ghRepo + `}`,
			[]string{"issue_mentioned"}, with(common, "mentioned", []string{"factory-bot", "acme/platform"})},
		{"pull_request", `{"action":"opened","number":42,"pull_request":` + ghPR("") + `,` + ghRepo + `}`, []string{"pull_request_opened"}, pr},
		{"pull_request", `{"action":"closed","number":42,"pull_request":` + strings.Replace(ghPR(""), `"merged":false`, `"merged":true`, 1) + `,` + ghRepo + `}`, []string{"pull_request_merged"}, pr},
		{"pull_request", `{"action":"closed","number":42,"pull_request":` + ghPR("") + `,` + ghRepo + `}`, []string{"pull_request_closed"}, pr},
		{"pull_request", `{"action":"labeled","label":{"name":"factory-ready"},"pull_request":` + ghPR("") + `,` + ghRepo + `}`, []string{"pull_request_labeled"}, with(pr, "labels", []string{"factory-ready"})},
		{"pull_request", `{"action":"assigned","assignee":{"login":"factory-bot"},"pull_request":` + ghPR("") + `,` + ghRepo + `}`, []string{"pull_request_assigned"}, with(pr, "assignees", []string{"hubot", "factory-bot"})},
		{"pull_request", `{"action":"reopened","pull_request":` + ghPR("") + `,` + ghRepo + `}`, []string{"pull_request_reopened"}, pr},
		{"pull_request", `{"action":"ready_for_review","pull_request":` + ghPR("") + `,` + ghRepo + `}`, []string{"pull_request_ready"}, pr},
		{"pull_request", `{"action":"synchronize","before":"a10867b","after":"34c5c75","pull_request":` + ghPR("") + `,` + ghRepo + `}`, []string{"pull_request_synchronized"}, pr},
		{"pull_request", `{"action":"review_requested","requested_reviewer":{"login":"factory-bot"},"pull_request":` + ghPR("") + `,` + ghRepo + `}`,
			[]string{"pull_request_review_requested"}, with(pr, "reviewers", []string{"factory-bot"})},
		{"pull_request", `{"action":"review_requested","requested_team":{"name":"Platform","slug":"platform"},"pull_request":` + ghPR("") + `,` + ghRepo + `}`,
			[]string{"pull_request_review_requested"}, with(pr, "reviewer_teams", []string{"platform"})},
		{"pull_request_review", `{"action":"submitted","review":{"id":80,"user":{"login":"reviewer1"},"body":"@factory-bot please address","state":"changes_requested","html_url":"https://github.com/acme/widgets/pull/42#pullrequestreview-80"},"pull_request":` + ghPR("") + `,` + ghRepo + `}`,
			[]string{"pull_request_review_submitted"}, with(pr, "authors", []string{"reviewer1"}, "mentioned", []string{"factory-bot"})},
		{"pull_request", `{"action":"opened","pull_request":` + strings.Replace(ghPR(""), `"Fixes #1347"`, `"Fixes #1347, @factory-bot please review"`, 1) + `,` + ghRepo + `}`,
			[]string{"pull_request_opened", "pull_request_mentioned"}, nil},
		{"issue_comment", `{"action":"created","issue":` + ghIssue("") + `,"comment":{"id":1,"html_url":"https://github.com/acme/widgets/issues/1347#issuecomment-1","user":{"login":"reporter"},"body":"@factory-bot can you look?"},` + ghRepo + `}`,
			[]string{"issue_mentioned"}, with(common, "authors", []string{"reporter"}, "mentioned", []string{"factory-bot"})},
		{"issue_comment", `{"action":"created","issue":` + ghIssue(`,"pull_request":{"url":"https://api.github.com/repos/acme/widgets/pulls/1347"}`) + `,"comment":{"user":{"login":"reporter"},"body":"@factory-bot fix the nit"},` + ghRepo + `}`,
			[]string{"pull_request_mentioned"}, nil},
		{"pull_request_review_comment", `{"action":"created","comment":{"user":{"login":"reviewer1"},"body":"@factory-bot rename this","html_url":"https://github.com/acme/widgets/pull/42#discussion_r1"},"pull_request":` + ghPR("") + `,` + ghRepo + `}`,
			[]string{"pull_request_mentioned"}, with(pr, "authors", []string{"reviewer1"}, "mentioned", []string{"factory-bot"})},
		{"push", `{"ref":"refs/heads/main","before":"9049f126","after":"0d1a26e6","compare":"https://github.com/acme/widgets/compare/9049f126...0d1a26e6","pusher":{"name":"octocat","email":"o@example.com"},` +
			`"commits":[{"id":"0d1a26e6","added":["api/new.go"],"removed":[],"modified":["README.md"]},{"id":"1a2b","added":[],"removed":["api/old.go"],"modified":["api/new.go"]}],` + ghRepo + `}`,
			[]string{"push"}, map[string][]string{"repos": {"acme/widgets"}, "authors": {"octocat"}, "branches": {"main"}, "paths": {"api/new.go", "README.md", "api/old.go"}}},
		{"check_suite", `{"action":"completed","check_suite":{"id":118578147,"head_branch":"main","head_sha":"ec26c3e5","status":"completed","conclusion":"failure","url":"https://api.github.com/repos/acme/widgets/check-suites/118578147"},` + ghRepo + `}`,
			[]string{"check_suite_completed"}, map[string][]string{"repos": {"acme/widgets"}, "authors": {"octocat"}, "branches": {"main"}, "conclusions": {"failure"}}},
		{"check_suite", `{"action":"rerequested","check_suite":{"head_branch":"main","status":"queued","conclusion":null},` + ghRepo + `}`,
			[]string{"check_suite_rerequested"}, map[string][]string{"repos": {"acme/widgets"}, "authors": {"octocat"}, "branches": {"main"}}},
		{"check_run", `{"action":"rerequested","check_run":{"id":128620228,"name":"Octocoders-linter","html_url":"https://github.com/acme/widgets/runs/128620228","check_suite":{"head_branch":"fix-pager"}},` + ghRepo + `}`,
			[]string{"check_run_rerequested"}, map[string][]string{"repos": {"acme/widgets"}, "authors": {"octocat"}, "branches": {"fix-pager"}}},
		{"workflow_run", `{"action":"completed","workflow_run":{"id":30433642,"name":"CI","head_branch":"main","status":"completed","conclusion":"failure","html_url":"https://github.com/acme/widgets/actions/runs/30433642","actor":{"login":"octocat"}},"workflow":{"name":"CI"},` + ghRepo + `}`,
			[]string{"workflow_run_completed"}, map[string][]string{"repos": {"acme/widgets"}, "authors": {"octocat"}, "branches": {"main"}, "workflows": {"CI"}, "conclusions": {"failure"}}},
	}
}

func decode(t *testing.T, s string) any {
	t.Helper()
	p, err := filter.DecodePayload([]byte(s))
	if err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return p
}

// TestGitHubEvents: every event of the contract's GitHub table, from a
// realistic payload, with the value of every filter key it takes.
func TestGitHubEvents(t *testing.T) {
	for i, c := range ghCases() {
		t.Run(fmt.Sprintf("%d-%s-%s", i, c.kind, strings.Join(c.want, "+")), func(t *testing.T) {
			if !json.Valid([]byte(c.payload)) {
				t.Fatalf("the test payload is not JSON: %s", c.payload)
			}
			evs, why := events.Normalize("github", c.kind, decode(t, c.payload))
			var names []string
			for _, e := range evs {
				names = append(names, e.Event)
				if e.Provider != "github" || e.Repository != "acme/widgets" {
					t.Fatalf("event %s", events.Encode(e))
				}
			}
			if !reflect.DeepEqual(names, c.want) {
				t.Fatalf("events %v (%s), want %v", names, why, c.want)
			}
			if c.fields != nil && !reflect.DeepEqual(evs[0].Fields, c.fields) {
				t.Fatalf("fields\n%v\nwant\n%v", evs[0].Fields, c.fields)
			}
		})
	}
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
