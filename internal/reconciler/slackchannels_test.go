package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/schema"
)

// slackTree is a factory whose automation takes Slack mentions in the
// channels named.
func slackTree(t *testing.T, in, notIn string) string {
	return repo(t, map[string]string{
		"factory.yaml": "schemaVersion: v1alpha1\nname: Chat\nrepositories: []\nagentDefaults:\n  model: auto\nintegrations:\n" +
			"  - type: slack\n    slack: {botTokenSecret: slack-bot}\n",
		"agents/lead/agent.md": "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"automations/intake/automation.md": fmt.Sprintf("---\ntriggers:\n  - provider: slack\n    event: app_mention\n"+
			"    filter:\n      channels: {in: %s}\n  - provider: slack\n    event: message_posted\n    filter:\n      channels: {not_in: %s}\n---\nHelp.\n", in, notIn),
	})
}

// TestSlackChannelNames: channel names in a Slack trigger's channels filter
// are resolved to IDs through the factory's bot (conversations.list) when
// a factory syncs, and the automation matches those IDs; a name the
// workspace lacks refuses the revision, saying which; without a token, or
// when Slack cannot be read, the names stay and a warning says so.
func TestSlackChannelNames(t *testing.T) {
	workspace := map[string]string{"deploys": "C0DEPLOYS01", "random": "C0RANDOM001"}
	var asked []string
	lister := func(ctx context.Context, name string, cred factory.Credentials) (map[string]string, error) {
		asked = append(asked, name+"/"+cred.BotTokenSecret)
		return workspace, nil
	}
	a := openApplier(t, t.TempDir())
	a.SlackChannels = lister
	dir := slackTree(t, `["#deploys", C0123ABCDE9]`, "[random]")
	c, outcome, err := a.Sync(context.Background(), "chat", reconciler.DirSource{Root: dir})
	if err != nil || outcome != reconciler.Applied {
		t.Fatalf("%v %v %v", outcome, err, c.Plan.Diagnostics)
	}
	if ws := warnings(c); len(ws) != 0 {
		t.Errorf("warnings: %q", ws)
	}
	if strings.Join(asked, ",") != "chat/slack-bot" {
		t.Errorf("asked for %q", asked)
	}
	autos, err := a.Store.Automations("chat")
	if err != nil || len(autos) != 1 {
		t.Fatalf("%v %v", autos, err)
	}
	tr := autos[0].Spec.Triggers
	if got := fmt.Sprint(tr[0].Filter.Keys["channels"].In, tr[1].Filter.Keys["channels"].NotIn); got != "[C0DEPLOYS01 C0123ABCDE9] [C0RANDOM001]" {
		t.Errorf("stored channels %s", got)
	}
	if again, err := reconciler.Check(context.Background(), reconciler.DirSource{Root: dir}, "chat", a.Store); err != nil || len(again.Plan.Diagnostics.Errors()) != 0 {
		t.Fatalf("a dry-run: %v %v", err, again.Plan.Diagnostics)
	}

	b := openApplier(t, t.TempDir())
	b.SlackChannels = lister
	c, outcome, _ = b.Sync(context.Background(), "chat", reconciler.DirSource{Root: slackTree(t, `["#deploys", "#nowhere"]`, "[elsewhere]")})
	var errs []string
	for _, d := range c.Plan.Diagnostics.Errors() {
		errs = append(errs, d.String())
	}
	if outcome != reconciler.Invalid || strings.Join(errs, "\n") != "automations/intake/automation.md:6:17: /triggers/0/filter/channels: no Slack channel the factory's bot sees is named #nowhere (invite the bot, or list the channel's ID)\n"+
		"automations/intake/automation.md:10:17: /triggers/1/filter/channels: no Slack channel the factory's bot sees is named #elsewhere (invite the bot, or list the channel's ID)" {
		t.Errorf("%s:\n%s", outcome, strings.Join(errs, "\n"))
	}

	for _, tc := range []struct {
		name string
		list reconciler.ChannelLister
		want string
	}{
		{"no token", func(context.Context, string, factory.Credentials) (map[string]string, error) { return nil, nil }, "channels are matched against channel IDs"},
		{"Slack down", func(context.Context, string, factory.Credentials) (map[string]string, error) {
			return nil, errors.New("slack conversations.list: 503")
		}, "Slack channel names are not resolved: slack conversations.list: 503"},
	} {
		a := openApplier(t, t.TempDir())
		a.SlackChannels = tc.list
		c, outcome, err := a.Sync(context.Background(), "chat", reconciler.DirSource{Root: slackTree(t, "[deploys]", "[C0RANDOM001]")})
		if err != nil || outcome != reconciler.Applied || !strings.Contains(strings.Join(warnings(c), "\n"), tc.want) {
			t.Errorf("%s: %v %v %q", tc.name, outcome, err, warnings(c))
		}
		autos, _ := a.Store.Automations("chat")
		if len(autos) != 1 || fmt.Sprint(autos[0].Spec.Triggers[0].Filter.Keys["channels"].In) != "[deploys]" {
			t.Errorf("%s: stored %+v", tc.name, autos)
		}
	}
}

func warnings(c *reconciler.Checked) []string {
	var out []string
	for _, d := range c.Plan.Diagnostics {
		if d.Severity == schema.Warning {
			out = append(out, d.String())
		}
	}
	return out
}
