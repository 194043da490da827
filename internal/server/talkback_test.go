package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/store"
	"factory/internal/talkback"
	"factory/internal/talkback/jira/jiratest"
	"factory/internal/talkback/linear/lineartest"
	"factory/internal/talkback/slack/slacktest"
	"factory/internal/talkback/teams/teamstest"
	"factory/internal/writeback"
)

// chats are the fakes of the providers a talk-back test reaches.
type chats struct {
	slack  *slacktest.Fake
	linear *lineartest.Fake
	jira   *jiratest.Fake
	teams  *teamstest.Fake
}

// talkbackSecrets are the managed secrets of talkbackServer's factory.
var talkbackSecrets = map[string]string{"sl": "8f742231b10e8888abcd99yyyzzz85a5", "ln": "lin_wh_secret_0123456789",
	"jr": "jira-token-0123456789abcdefghijklmn", "slack-bot": slacktest.Token, "linear-key": lineartest.Token,
	"jira-email": jiratest.Email, "jira-token": jiratest.Token, "teams-password": teamstest.Password}

// talkbackTree is a factory whose runs come from Slack, Linear, Jira and
// Teams, with the credentials of each in factory.yaml; "quiet" is a
// factory with a Slack webhook and no credential.
func talkbackTree(t *testing.T) (string, string) {
	root, quiet := t.TempDir(), t.TempDir()
	writeTree(t, root, map[string]string{
		"factory.yaml": "schemaVersion: v1alpha1\nname: Chat\ncodeForges: [NONE]\nrepositories: []\nagentDefaults:\n  model: auto\nintegrations:\n" +
			"  - type: slack\n    slack: {botTokenSecret: slack-bot}\n  - type: linear\n    linear: {apiKeySecret: linear-key}\n" +
			"  - type: microsoft-teams\n    microsoft-teams: {appId: " + teamstest.AppID + ", appPasswordSecret: teams-password}\n",
		"agents/lead/agent.md":              "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"webhooks/slack.yaml":               "authMode: signature\nsignatureScheme: slack\nsecretName: sl\n",
		"webhooks/linear.yaml":              "authMode: signature\nsignatureScheme: linear\nsecretName: ln\n",
		"webhooks/jira.yaml":                "authMode: token\nsecretName: jr\neventSource: jira\n",
		"automations/slack/automation.md":   "---\ntriggers:\n  - provider: slack\n    event: app_mention\n---\nAnswer in the thread.\n",
		"automations/session/automation.md": "---\ntriggers:\n  - provider: linear\n    event: agent_session_created\n---\nWork on the issue.\n",
		"automations/jira/automation.md":    "---\ntriggers:\n  - provider: jira\n    event: issue_created\n    filter:\n      project_keys: [ENG]\n---\nLook at it.\n",
		"automations/teams/automation.md": "---\ntriggers:\n  - provider: teams\n    event: app_mention\n    filter:\n      team_ids: [5a4c2d1e-0000-4000-8000-000000000001]\n" +
			"      channel_ids: [\"19:orders@thread.tacv2\"]\n---\nTake the request from the thread.\n",
	})
	writeTree(t, quiet, map[string]string{
		"factory.yaml":                    "schemaVersion: v1alpha1\nname: Quiet\ncodeForges: [NONE]\nrepositories: []\nagentDefaults:\n  model: auto\n",
		"agents/lead/agent.md":            "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"webhooks/slack.yaml":             "authMode: signature\nsignatureScheme: slack\nsecretName: sl\n",
		"automations/slack/automation.md": "---\ntriggers:\n  - provider: slack\n    event: app_mention\n---\nAnswer.\n",
	})
	return root, quiet
}

// talkbackServer serves talkbackTree's factories ("chat" and "quiet")
// with agents that say one line, reporting to fakes of the providers.
func talkbackServer(t *testing.T) (*harness, *chats) {
	t.Helper()
	fk := &chats{slack: slacktest.New(t), linear: lineartest.New(t), jira: jiratest.New(t), teams: teamstest.New(t)}
	root, quiet := talkbackTree(t)
	jiraSite := map[string]map[string]factory.Credentials{"chat": {"jira": {BaseURL: "https://acme.atlassian.net", EmailSecret: "jira-email",
		APITokenSecret: "jira-token"}}}
	reg := &talkback.Registry{Configured: jiraSite, APIs: talkback.APIs{SlackURL: fk.slack.URL, LinearURL: fk.linear.URL, JiraURL: fk.jira.URL,
		TeamsOpenIDURL: fk.teams.URL + "/openid", TeamsTokenURL: fk.teams.URL + "/token"}}
	rp := &writeback.Reporter{Chats: reg, Log: slog.New(slog.DiscardHandler), Backoff: []time.Duration{50 * time.Millisecond}}
	h := startConfigured(t, func(c *server.Config) { c.Talkback = reg }, func(s *store.Store, dir string) *runs.Manager {
		kr, err := secrets.LoadKeyring(dir)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range talkbackSecrets {
			if _, _, err := secrets.Create(s, kr, name, []byte(v), false, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		reg.Store, reg.Secret = s, func(name string) ([]byte, error) { return secrets.Current(s, kr, name) }
		rp.Store = s
		cfg := runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "sh", Log: slog.New(slog.DiscardHandler),
			Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", "echo Looked into it and fixed it."}}}}}
		writeback.Configure(&cfg, nil, s, rp, nil)
		return runs.NewManager(cfg)
	}, server.FactorySource{Name: "chat", Source: reconciler.DirSource{Root: root}, Interval: time.Hour},
		server.FactorySource{Name: "quiet", Source: reconciler.DirSource{Root: quiet}, Interval: time.Hour})
	rp.PublicURL = h.url
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go rp.Run(ctx)
	return h, fk
}

// chatCase is a payload of the events package's talkback corpus, by name.
func chatPayload(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../events/testdata/talkback.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name    string         `json:"name"`
		Payload map[string]any `json:"payload"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if strings.HasPrefix(c.Name, name) {
			return c.Payload
		}
	}
	t.Fatalf("no payload %q in the corpus", name)
	return nil
}

// hookOf is a factory's webhook by name.
func hookOf(t *testing.T, h *harness, fac, name string) factory.WebhookStatus {
	t.Helper()
	for _, w := range h.status(fac).Webhooks {
		if w.Name == name {
			return w
		}
	}
	st := h.status(fac)
	t.Fatalf("factory %s has no webhook %s: %v", fac, name, *cmpOrNil(st.Error))
	return factory.WebhookStatus{}
}

// postChat posts a provider's payload to a factory's webhook, signed as
// the provider signs it, and returns the delivery's ID.
func postChat(t *testing.T, h *harness, fac, provider string, payload map[string]any) (string, string) {
	t.Helper()
	if provider == "linear" {
		payload["webhookTimestamp"] = time.Now().UnixMilli()
	}
	b, _ := json.Marshal(payload)
	body := string(b)
	mac := func(key, msg string) string {
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte(msg))
		return hex.EncodeToString(m.Sum(nil))
	}
	hook := hookOf(t, h, fac, provider)
	var a answer
	switch provider {
	case "slack":
		ts := fmt.Sprint(time.Now().Unix())
		a = post(t, hook.IngressURL, "", body, "X-Slack-Request-Timestamp", ts, "X-Slack-Signature", "v0="+mac(talkbackSecrets["sl"], "v0:"+ts+":"+body))
	case "linear":
		a = post(t, hook.IngressURL, "", body, "Linear-Signature", mac(talkbackSecrets["ln"], body), "Linear-Delivery", fmt.Sprint(time.Now().UnixNano()))
	default:
		a = post(t, hook.IngressURL, "", body, "Authorization", "Bearer "+talkbackSecrets["jr"])
	}
	return hook.UID, deliveryID(t, a)
}

// awaitReported waits for a delivery's run to end its turns-th turn and
// its end to be reported where it came from.
func awaitReported(t *testing.T, h *harness, hookUID, did string, turns int) *factory.Run {
	t.Helper()
	var run *factory.Run
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := h.store.Delivery(hookUID, did)
		if err == nil && len(d.RunIDs) == 1 {
			run, err = h.store.Run(d.RunIDs[0])
			if err == nil && run.Turns == turns && run.State.Terminal() && run.Talkback != nil && run.Talkback.Ended == turns+1 {
				return run
			}
		}
		if time.Now().After(deadline) {
			var evs []*factory.RunEvent
			if run != nil {
				evs, _ = h.store.RunEvents(run.ID)
			}
			b, _ := json.Marshal(evs)
			t.Fatalf("delivery %s: %+v, %v\nrun %+v\n%s", did, d, err, run, b)
		}
	}
}

func cmpOrNil(s *string) *string {
	if s == nil {
		return new(string)
	}
	return s
}
