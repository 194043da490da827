package trigger_test

import (
	"testing"

	"factory"
	"factory/internal/trigger"
)

func providerTrigger(provider, event string, keys map[string]factory.ValueSet) factory.Trigger {
	return factory.Trigger{Provider: provider, Event: event, Filter: factory.TriggerFilter{Keys: keys}}
}

func githubPush(repo, branch string) string {
	return `{"ref":"refs/heads/` + branch + `","pusher":{"name":"octocat"},"sender":{"login":"octocat"},"commits":[],"repository":{"full_name":"` + repo + `"}}`
}

func gitlabPush(project string) string {
	return `{"object_kind":"push","project":{"path_with_namespace":"` + project + `"}}`
}

func TestDecide(t *testing.T) {
	listed := &factory.Settings{Repositories: []factory.Repository{{Owner: "acme", Name: "widgets"}}}
	flat := &factory.Settings{}
	onMain := providerTrigger(factory.ProviderGitHub, "push", map[string]factory.ValueSet{"branches": {In: []string{"main"}}})
	gitlab := providerTrigger(factory.ProviderGitLab, "push", nil)
	slack := providerTrigger(factory.ProviderSlack, "app_mention", map[string]factory.ValueSet{"keywords": {In: []string{"deploy"}}})
	opened := webhookTrigger(`{"action":["opened"]}`, hookA)
	const mention = `{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention","user":"U1","text":"<@U0BOT> deploy it","channel":"C1"}}`
	const notRouted = "not routed: repository evil/widgets is not in factory.yaml repositories"
	cases := []struct {
		name      string
		settings  *factory.Settings
		triggers  []factory.Trigger
		provider  string // of the webhook (hookA)
		eventType string
		payload   string
		stage     trigger.Stage
		reason    string
		event     string // the provider event that fired
		outcome   string // the delivery's own
	}{
		{"a custom webhook's payload matches", listed, []factory.Trigger{opened}, "", "", `{"action":"opened"}`, trigger.Fired, "", "", ""},
		{"a custom webhook's payload does not", listed, []factory.Trigger{opened}, "", "", `{"action":"closed"}`, trigger.Unmatched, trigger.NoMatch, "", ""},
		{"a push to a listed repository", listed, []factory.Trigger{onMain}, factory.ProviderGitHub, "push", githubPush("acme/widgets", "main"), trigger.Fired, "", "push", ""},
		{"listing ignores case", listed, []factory.Trigger{onMain}, factory.ProviderGitHub, "push", githubPush("ACME/Widgets", "main"), trigger.Fired, "", "push", ""},
		{"a listed repository, another branch", listed, []factory.Trigger{onMain}, factory.ProviderGitHub, "push", githubPush("acme/widgets", "dev"), trigger.Unmatched, trigger.NoMatch, "", ""},
		{"a push from a fork", listed, []factory.Trigger{onMain}, factory.ProviderGitHub, "push", githubPush("evil/widgets", "main"), trigger.Unrouted, notRouted, "", notRouted},
		{"a push from a fork, no trigger of it either", listed, []factory.Trigger{opened}, factory.ProviderGitHub, "push", githubPush("evil/widgets", "main"), trigger.Unrouted, notRouted, "", notRouted},
		{"a push from anywhere, without a repositories list", flat, []factory.Trigger{onMain}, factory.ProviderGitHub, "push", githubPush("evil/widgets", "main"), trigger.Fired, "", "push", ""},
		{"a GitHub ping", listed, []factory.Trigger{onMain}, factory.ProviderGitHub, "ping", `{"zen":"x","repository":{"full_name":"acme/widgets"}}`, trigger.Unread, "a GitHub ping: the webhook is connected; nothing to do", "", "a GitHub ping: the webhook is connected; nothing to do"},
		{"a GitLab project in a subgroup", listed, []factory.Trigger{gitlab}, factory.ProviderGitLab, "Push Hook", gitlabPush("acme/platform/widgets"), trigger.Fired, "", "push", ""},
		{"a GitLab project in nested subgroups", listed, []factory.Trigger{gitlab}, factory.ProviderGitLab, "Push Hook", gitlabPush("Acme/a/b/Widgets"), trigger.Fired, "", "push", ""},
		{"a GitLab project of another owner", listed, []factory.Trigger{gitlab}, factory.ProviderGitLab, "Push Hook", gitlabPush("other/acme/widgets"), trigger.Unrouted,
			"not routed: repository other/acme/widgets is not in factory.yaml repositories", "", "not routed: repository other/acme/widgets is not in factory.yaml repositories"},
		{"a GitLab project whose name only ends like the listed one", listed, []factory.Trigger{gitlab}, factory.ProviderGitLab, "Push Hook", gitlabPush("acme/platform/old-widgets"), trigger.Unrouted,
			"not routed: repository acme/platform/old-widgets is not in factory.yaml repositories", "", "not routed: repository acme/platform/old-widgets is not in factory.yaml repositories"},
		{"an owner that only starts like the listed one", listed, []factory.Trigger{gitlab}, factory.ProviderGitLab, "Push Hook", gitlabPush("acmex/widgets"), trigger.Unrouted,
			"not routed: repository acmex/widgets is not in factory.yaml repositories", "", "not routed: repository acmex/widgets is not in factory.yaml repositories"},
		{"a Slack event, of no repository", listed, []factory.Trigger{slack}, factory.ProviderSlack, "", mention, trigger.Fired, "", "app_mention", ""},
		{"a Slack event, filter keys do not match", listed, []factory.Trigger{slack}, factory.ProviderSlack, "", `{"type":"event_callback","event":{"type":"app_mention","text":"hi","channel":"C1"}}`,
			trigger.Unmatched, trigger.NoMatch, "", ""},
		{"a provider event no trigger listens to", listed, []factory.Trigger{opened}, factory.ProviderGitHub, "push", githubPush("acme/widgets", "main"), trigger.Unmatched, trigger.NoMatch, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set, err := trigger.Compile(c.triggers)
			if err != nil {
				t.Fatal(err)
			}
			d := trigger.Read(hookA, c.provider, c.eventType, payload(t, c.payload))
			v := trigger.Decide(c.settings, d, set)
			event := ""
			if v.Event != nil {
				event = v.Event.Event
			}
			if v.Stage != c.stage || v.Fires() != (c.stage == trigger.Fired) || v.Reason != c.reason || event != c.event {
				t.Errorf("Decide = stage %d, reason %q, event %q; want %d, %q, %q", v.Stage, v.Reason, event, c.stage, c.reason, c.event)
			}
			if got := d.Outcome(c.settings); got != c.outcome {
				t.Errorf("Outcome = %q, want %q", got, c.outcome)
			}
			// Test filter's checks agree with the verdict wherever the
			// delivery reached the triggers.
			if x := v.Explain(); c.stage != trigger.Unread && c.stage != trigger.Unrouted && x.Fires() != v.Fires() {
				t.Errorf("Explain fires %v, the verdict %v: %+v", x.Fires(), v.Fires(), x)
			}
		})
	}
}

// An event explained though not routed shows its keys as they would have
// been checked, so that the repository alone is seen to stop it.
func TestDecideExplainsAnUnroutedEvent(t *testing.T) {
	set, err := trigger.Compile([]factory.Trigger{providerTrigger(factory.ProviderGitHub, "push", map[string]factory.ValueSet{"branches": {In: []string{"main"}}})})
	if err != nil {
		t.Fatal(err)
	}
	listed := &factory.Settings{Repositories: []factory.Repository{{Owner: "acme", Name: "widgets"}}}
	v := trigger.Decide(listed, trigger.Read(hookA, factory.ProviderGitHub, "push", payload(t, githubPush("evil/widgets", "main"))), set)
	x := v.Explain()
	if v.Fires() || len(x.Selecting) != 1 || !x.PayloadMatched || len(x.Keys) != 2 || x.Keys[1].Path != "branches" || !x.Keys[1].Passed {
		t.Fatalf("verdict %+v, explanation %+v", v, x)
	}
}

// A delivery read once is decided for many automations alike; events may
// also come already normalized (kept with a stored delivery).
func TestDecideTakesNormalizedEvents(t *testing.T) {
	set, err := trigger.Compile([]factory.Trigger{providerTrigger(factory.ProviderGitHub, "issue_labeled", nil)})
	if err != nil {
		t.Fatal(err)
	}
	ev := &factory.ProviderEvent{Provider: factory.ProviderGitHub, Event: "issue_labeled", Repository: "acme/widgets"}
	d := &trigger.Delivery{WebhookUID: hookA, Provider: factory.ProviderGitHub, Payload: map[string]any{}, Events: []*factory.ProviderEvent{
		{Provider: factory.ProviderGitHub, Event: "issue_created", Repository: "acme/widgets"}, ev}}
	listed := &factory.Settings{Repositories: []factory.Repository{{Owner: "acme", Name: "widgets"}}}
	if v := trigger.Decide(listed, d, set); !v.Fires() || v.Event != ev {
		t.Fatalf("the second event fires: %+v", v)
	}
	other := &factory.Settings{Repositories: []factory.Repository{{Owner: "acme", Name: "gadgets"}}}
	if v := trigger.Decide(other, d, set); v.Stage != trigger.Unrouted || v.Reason != "not routed: repository acme/widgets is not in factory.yaml repositories" {
		t.Fatalf("another factory's repositories: %+v", v)
	}
}
