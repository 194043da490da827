package trigger_test

import (
	"errors"
	"slices"
	"testing"

	"factory"
	"factory/internal/trigger"
)

const (
	githubPR = `{"action":"opened","number":3,"pull_request":{"number":3,"html_url":"https://github.com/acme/widgets/pull/3",` +
		`"base":{"ref":"main"},"head":{"sha":"abc"},"user":{"login":"octocat"},"labels":[],"body":"Fixes it, @hubot"},` +
		`"repository":{"full_name":"acme/widgets"}}`
	gitlabMR = `{"object_kind":"merge_request","project":{"path_with_namespace":"acme/widgets"},` +
		`"object_attributes":{"iid":3,"action":"open","url":"https://gitlab.com/acme/widgets/-/merge_requests/3"}}`
)

func paths(in, notIn []string) map[string]factory.ValueSet {
	return map[string]factory.ValueSet{"paths": {In: in, NotIn: notIn}}
}

// TestDecidePullRequestPaths: a pull (merge) request's paths are the files
// its code host listed: a filter on them fires or not as on a push's; a
// pull request whose files could not be read (or were never read) fires
// no trigger that filters on paths, not_in included, and the reason says
// why where paths was all that stopped it.
func TestDecidePullRequestPaths(t *testing.T) {
	listed := &factory.Settings{Repositories: []factory.Repository{{Owner: "acme", Name: "widgets"}}}
	src := []string{"src/**"}
	read := func(p ...string) *trigger.Files { return &trigger.Files{Paths: p} }
	unread := trigger.UnreadFiles(errors.New("github: 503 Service unavailable"))
	const why = "paths: could not read the pull request's files: github: 503 Service unavailable"
	onBase := providerTrigger(factory.ProviderGitHub, "pull_request_opened", map[string]factory.ValueSet{"paths": {In: src}, "base_branches": {In: []string{"release"}}})
	for _, c := range []struct {
		name      string
		trigger   factory.Trigger
		provider  string
		eventType string
		payload   string
		files     *trigger.Files
		stage     trigger.Stage
		reason    string
	}{
		{"a changed file matches", providerTrigger(factory.ProviderGitHub, "pull_request_opened", paths(src, nil)), factory.ProviderGitHub, "pull_request", githubPR,
			read("README.md", "src/a/b.go"), trigger.Fired, ""},
		{"no changed file matches", providerTrigger(factory.ProviderGitHub, "pull_request_opened", paths([]string{"docs/**"}, nil)), factory.ProviderGitHub, "pull_request", githubPR,
			read("src/a.go"), trigger.Unmatched, trigger.NoMatch},
		{"not_in, and no file is there", providerTrigger(factory.ProviderGitHub, "pull_request_opened", paths(nil, []string{"docs/**"})), factory.ProviderGitHub, "pull_request", githubPR,
			read("src/a.go"), trigger.Fired, ""},
		{"not_in, and a file is there", providerTrigger(factory.ProviderGitHub, "pull_request_opened", paths(nil, []string{"docs/**"})), factory.ProviderGitHub, "pull_request", githubPR,
			read("src/a.go", "docs/x.md"), trigger.Unmatched, trigger.NoMatch},
		{"a pull request that changes no file", providerTrigger(factory.ProviderGitHub, "pull_request_opened", paths(nil, []string{"docs/**"})), factory.ProviderGitHub, "pull_request", githubPR,
			read(), trigger.Fired, ""},
		{"the files could not be read", providerTrigger(factory.ProviderGitHub, "pull_request_opened", paths(src, nil)), factory.ProviderGitHub, "pull_request", githubPR,
			&unread, trigger.Unmatched, why},
		{"could not be read: not_in does not match either", providerTrigger(factory.ProviderGitHub, "pull_request_opened", paths(nil, []string{"docs/**"})), factory.ProviderGitHub, "pull_request", githubPR,
			&unread, trigger.Unmatched, why},
		{"never read", providerTrigger(factory.ProviderGitHub, "pull_request_mentioned", paths(nil, []string{"docs/**"})), factory.ProviderGitHub, "pull_request", githubPR,
			nil, trigger.Unmatched, trigger.NotRead},
		{"could not be read, and another key stops it anyway", onBase, factory.ProviderGitHub, "pull_request", githubPR,
			&unread, trigger.Unmatched, trigger.NoMatch},
		{"a trigger without paths does not need them", providerTrigger(factory.ProviderGitHub, "pull_request_opened", nil), factory.ProviderGitHub, "pull_request", githubPR,
			&unread, trigger.Fired, ""},
		{"a GitLab merge request", providerTrigger(factory.ProviderGitLab, "merge_request", paths(src, nil)), factory.ProviderGitLab, "Merge Request Hook", gitlabMR,
			read("src/main.go"), trigger.Fired, ""},
		{"a GitLab merge request, unread", providerTrigger(factory.ProviderGitLab, "merge_request", paths(src, nil)), factory.ProviderGitLab, "Merge Request Hook", gitlabMR,
			&unread, trigger.Unmatched, why},
		{"a push's files are its own", providerTrigger(factory.ProviderGitHub, "push", paths([]string{"*.md"}, nil)), factory.ProviderGitHub, "push",
			`{"ref":"refs/heads/main","commits":[{"added":["README.md"]}],"repository":{"full_name":"acme/widgets"}}`, &unread, trigger.Fired, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			set, err := trigger.Compile([]factory.Trigger{c.trigger})
			if err != nil {
				t.Fatal(err)
			}
			d := trigger.Read(hookA, c.provider, c.eventType, payload(t, c.payload))
			if c.files != nil {
				d.SetFiles(*c.files)
			}
			v := trigger.Decide(listed, d, set)
			if v.Stage != c.stage || v.Reason != c.reason {
				t.Errorf("Decide = stage %d, reason %q; want %d, %q", v.Stage, v.Reason, c.stage, c.reason)
			}
			x := v.Explain()
			if x.Fires() != v.Fires() {
				t.Errorf("Explain fires %v, the verdict %v: %+v", x.Fires(), v.Fires(), x)
			}
			for _, k := range x.Keys {
				if k.Path == "paths" && k.Passed && !v.Fires() && c.reason != trigger.NoMatch {
					t.Errorf("the paths check passed, though the files are not known: %+v", k)
				}
			}
		})
	}
}

// TestSetFiles: the files become every pull request event's paths (what
// the delivery log keeps), read and empty kept as read; unread files leave
// them out.
func TestSetFiles(t *testing.T) {
	d := trigger.Read(hookA, factory.ProviderGitHub, "pull_request", payload(t, githubPR))
	if len(d.Events) != 2 || d.PullRequest() != d.Events[0] {
		t.Fatalf("events %+v", d.Events)
	}
	d.SetFiles(trigger.Files{Paths: []string{"a.go"}, Capped: true})
	for _, ev := range d.Events {
		if !slices.Equal(ev.Fields["paths"], []string{"a.go"}) {
			t.Errorf("%s: paths %q", ev.Event, ev.Fields["paths"])
		}
	}
	if n := d.Files().Note(); n != "paths: matched against the first 1 files the pull request changes: its code host lists no more" {
		t.Errorf("note %q", n)
	}
	d = trigger.Read(hookA, factory.ProviderGitHub, "pull_request", payload(t, githubPR))
	d.SetFiles(trigger.Files{})
	if p, ok := d.Events[0].Fields["paths"]; !ok || p == nil || len(p) != 0 {
		t.Errorf("no files: %#v %v", p, ok)
	}
	d = trigger.Read(hookA, factory.ProviderGitHub, "pull_request", payload(t, githubPR))
	d.SetFiles(trigger.UnreadFiles(errors.New("boom")))
	if _, ok := d.Events[0].Fields["paths"]; ok || d.Files().Note() != "paths: could not read the pull request's files: boom" {
		t.Errorf("unread: %v %q", d.Events[0].Fields, d.Files().Note())
	}
}

// TestNeedsFiles: a delivery's files are read only when a trigger filters
// on paths for one of its pull request events, of a listed repository, and
// only once.
func TestNeedsFiles(t *testing.T) {
	listed := &factory.Settings{Repositories: []factory.Repository{{Owner: "acme", Name: "widgets"}}}
	elsewhere := &factory.Settings{Repositories: []factory.Repository{{Owner: "acme", Name: "gadgets"}}}
	onOpened := providerTrigger(factory.ProviderGitHub, "pull_request_opened", paths([]string{"src/**"}, nil))
	for _, c := range []struct {
		name      string
		settings  *factory.Settings
		trigger   factory.Trigger
		eventType string
		payload   string
		read      bool
		want      bool
	}{
		{"paths on the event", listed, onOpened, "pull_request", githubPR, false, true},
		{"paths on the delivery's second event", listed, providerTrigger(factory.ProviderGitHub, "pull_request_mentioned", paths(nil, []string{"x"})), "pull_request", githubPR, false, true},
		{"already read", listed, onOpened, "pull_request", githubPR, true, false},
		{"an unlisted repository", elsewhere, onOpened, "pull_request", githubPR, false, false},
		{"paths on another event", listed, providerTrigger(factory.ProviderGitHub, "pull_request_closed", paths([]string{"x"}, nil)), "pull_request", githubPR, false, false},
		{"no paths", listed, providerTrigger(factory.ProviderGitHub, "pull_request_opened", nil), "pull_request", githubPR, false, false},
		{"a push", listed, providerTrigger(factory.ProviderGitHub, "push", paths([]string{"x"}, nil)), "push", githubPush("acme/widgets", "main"), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			set, err := trigger.Compile([]factory.Trigger{c.trigger})
			if err != nil {
				t.Fatal(err)
			}
			d := trigger.Read(hookA, factory.ProviderGitHub, c.eventType, payload(t, c.payload))
			if c.read {
				d.SetFiles(trigger.Files{})
			}
			if got := set.NeedsFiles(c.settings, d); got != c.want {
				t.Errorf("NeedsFiles = %v", got)
			}
		})
	}
	if host := trigger.PullRequestPaths(onOpened); host != factory.ProviderGitHub {
		t.Errorf("PullRequestPaths(onOpened) = %q", host)
	}
	if host := trigger.PullRequestPaths(providerTrigger(factory.ProviderGitHub, "push", paths([]string{"x"}, nil))); host != "" {
		t.Errorf("PullRequestPaths(push) = %q", host)
	}
}
