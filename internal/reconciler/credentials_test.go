package reconciler_test

import (
	"context"
	"strings"
	"testing"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/schema"
)

// TestCredentialWarnings: an automation fired by a chat or tracker whose
// write-back has no credential, in factory.yaml or in the server config,
// is a plan warning naming what is missing; the revision still applies.
// Credentials from either place silence it.
func TestCredentialWarnings(t *testing.T) {
	files := map[string]string{
		"factory.yaml": "schemaVersion: v1alpha1\nname: Talks\nrepositories: []\nagentDefaults:\n  model: auto\nintegrations:\n" +
			"  - type: slack\n    slack: {botTokenSecret: slack-bot}\n  - type: jira\n    jira: {baseURL: \"https://acme.atlassian.net\"}\n",
		"agents/lead/agent.md": "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"automations/chat/automation.md": "---\ntriggers:\n  - provider: slack\n    event: app_mention\n  - provider: jira\n    event: issue_created\n" +
			"  - provider: jira\n    event: issue_labeled\n  - provider: linear\n    event: issue_created\n---\nHelp.\n",
	}
	for _, tc := range []struct {
		name       string
		configured map[string]factory.Credentials
		want       []string
	}{
		{"file only", nil, []string{
			"automations/chat/automation.md:5:5: /triggers/1: runs from jira will not report back: factory talks's jira integration names no emailSecret, apiTokenSecret",
			"automations/chat/automation.md:9:5: /triggers/3: runs from linear will not report back: factory talks's linear integration names no apiKeySecret"}},
		{"the server config's too", map[string]factory.Credentials{"jira": {EmailSecret: "e", APITokenSecret: "t"}, "linear": {APIKeySecret: "l"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := openApplier(t, t.TempDir())
			a.Credentials = func(name string) map[string]factory.Credentials {
				if name != "talks" {
					t.Errorf("credentials of %q", name)
				}
				return tc.configured
			}
			c, outcome, err := a.Sync(context.Background(), "talks", reconciler.DirSource{Root: repo(t, files)})
			if err != nil || outcome != reconciler.Applied {
				t.Fatalf("%v %v %v", outcome, err, c.Plan.Diagnostics)
			}
			var got []string
			for _, d := range c.Plan.Diagnostics {
				if d.Severity == schema.Warning {
					got = append(got, d.String())
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("warnings:\n%s", strings.Join(got, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("got  %s\nwant %s", got[i], tc.want[i])
				}
			}
		})
	}
}
