package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/server"
)

const (
	glSecret    = "gitlab-webhook-token"
	slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
)

// firingCase is one event, sent through a webhook of its own (so that the
// dry-run's replay of that webhook holds it alone), and what the
// automation it is meant for must do with it.
type firingCase struct {
	name       string
	factory    string // "acme" (repositories: acme/widgets) or "flat" (no factory.yaml)
	webhook    string
	automation string
	eventType  string // X-GitHub-Event, X-Gitlab-Event; "" where the payload names it
	body       string
	fires      bool
	// notRouted is the repository factory.yaml's repositories does not
	// list: every answer must say so.
	notRouted string
}

// TestFiringDecisionAgrees feeds the same events through evaluation (the
// runs a delivery starts, the outcome in its log), Test filter (on the
// stored delivery and on the payload pasted) and the dry-run's replay of
// recent deliveries, and requires the same verdict from all of them.
func TestFiringDecisionAgrees(t *testing.T) {
	cases := []firingCase{
		{"a GitHub push from a fork", "acme", "gh-fork", "gh-push", "push", ghPush("evil/widgets", "main"), false, "evil/widgets"},
		{"a GitHub push to a listed repository", "acme", "gh-listed", "gh-push", "push", ghPush("acme/widgets", "main"), true, ""},
		{"a GitHub push to a listed repository, another branch", "acme", "gh-dev", "gh-push", "push", ghPush("Acme/Widgets", "dev"), false, ""},
		{"a GitLab push of a project in a subgroup", "acme", "gl-sub", "gl-push", "Push Hook", glPush("acme/platform/widgets"), true, ""},
		{"a GitLab push of an unlisted project", "acme", "gl-other", "gl-push", "Push Hook", glPush("other/platform/widgets"), false, "other/platform/widgets"},
		{"a custom webhook's payload that matches", "acme", "custom-match", "custom", "", `{"action":"opened"}`, true, ""},
		{"a custom webhook's payload that does not", "acme", "custom-miss", "custom", "", `{"action":"closed"}`, false, ""},
		{"a Slack mention (no repository)", "acme", "slack", "slack-mention", "", slackMention("Ev01", "deploy the fix"), true, ""},
		{"a GitHub push from anywhere, without a repositories list", "flat", "gh", "gh-push", "push", ghPush("evil/widgets", "main"), true, ""},
	}
	h, roots := firingFactories(t)
	ctx := context.Background()
	hooks, autos := map[string]factory.WebhookStatus{}, map[string]string{}
	for _, name := range []string{"acme", "flat"} {
		st := h.status(name)
		for _, w := range st.Webhooks {
			hooks[name+"/"+w.Name] = w
		}
		for _, a := range st.Automations {
			autos[name+"/"+a.Name] = a.ID
		}
	}
	delivered := map[string]string{}
	for _, c := range cases {
		delivered[c.name] = sendFiring(t, h, hooks[c.factory+"/"+c.webhook], c)
	}
	replayed := replayFiring(t, h, roots)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hook, auto := hooks[c.factory+"/"+c.webhook], autos[c.factory+"/"+c.automation]
			if hook.UID == "" || auto == "" {
				t.Fatalf("setup: no webhook %s or automation %s in %s", c.webhook, c.automation, c.factory)
			}
			checkEvaluated(t, h, hook.UID, delivered[c.name], auto, c)
			var stored factory.TestResult
			if err := h.c.TestFilter(ctx, auto, delivered[c.name], &stored); err != nil {
				t.Fatal(err)
			}
			checkTested(t, "Test filter on the stored delivery", &stored, c)
			checkTested(t, "Test filter on the pasted payload", testPasted(t, h, auto, hook.UID, c), c)
			checkReplayed(t, replayed[c.factory], c.automation, hook.UID, c)
		})
	}
}

// firingFactories serves two factories: acme lists one repository and
// has a webhook for each case; flat has no factory.yaml, so no
// repositories list.
func firingFactories(t *testing.T) (*harness, map[string]string) {
	acme, flat := t.TempDir(), t.TempDir()
	push := func(provider, filter string) string {
		return "---\ntriggers:\n  - provider: " + provider + "\n    event: push\n" + filter + "---\nLook at the push.\n"
	}
	writeTree(t, acme, map[string]string{
		"factory.yaml":                            "schemaVersion: v1alpha1\nname: Acme\nrepositories:\n  - owner: acme\n    name: widgets\nagentDefaults:\n  model: auto\n",
		"agents/lead/agent.md":                    "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"webhooks/gh-fork.yaml":                   "authMode: signature\nsignatureScheme: github\nsecretName: gh\n",
		"webhooks/gh-listed.yaml":                 "authMode: signature\nsignatureScheme: github\nsecretName: gh\n",
		"webhooks/gh-dev.yaml":                    "authMode: signature\nsignatureScheme: github\nsecretName: gh\n",
		"webhooks/gl-sub.yaml":                    "authMode: signature\nsignatureScheme: gitlab\nsecretName: gl\n",
		"webhooks/gl-other.yaml":                  "authMode: signature\nsignatureScheme: gitlab\nsecretName: gl\n",
		"webhooks/slack.yaml":                     "authMode: signature\nsignatureScheme: slack\nsecretName: slack\n",
		"webhooks/custom-match.yaml":              "authMode: token\n",
		"webhooks/custom-miss.yaml":               "authMode: token\n",
		"automations/gh-push/automation.md":       push("github", "    filter:\n      branches: [main]\n"),
		"automations/gl-push/automation.md":       push("gitlab", ""),
		"automations/slack-mention/automation.md": "---\ntriggers:\n  - provider: slack\n    event: app_mention\n    filter:\n      keywords: [deploy]\n---\nAnswer the mention.\n",
	})
	writeTree(t, flat, map[string]string{
		"webhooks/gh.yaml":       "authMode: signature\nsignatureScheme: github\nsecretName: gh\n",
		"automations/gh-push.md": push("github", "    filter:\n      branches: [main]\n"),
	})
	h := serveFactories(t, map[string]string{"gh": ghSecret, "gl": glSecret, "slack": slackSecret},
		server.FactorySource{Name: "acme", Source: reconciler.DirSource{Root: acme}, Interval: time.Hour},
		server.FactorySource{Name: "flat", Source: reconciler.DirSource{Root: flat}, Interval: time.Hour})
	// The custom automation names its webhooks by UID, known once applied.
	var uids []string
	for _, w := range h.status("acme").Webhooks {
		if strings.HasPrefix(w.Name, "custom-") {
			uids = append(uids, w.UID)
		}
	}
	writeTree(t, acme, map[string]string{"automations/custom/automation.md": "---\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [" +
		strings.Join(uids, ", ") + "]\n      payload:\n        action: [opened]\n---\nTriage it.\n"})
	if st, err := h.c.SyncFactory(context.Background(), h.status("acme").UID); err != nil || !st.Ready || len(st.Automations) != 4 {
		t.Fatalf("sync: %v %+v", err, st)
	}
	return h, map[string]string{"acme": acme, "flat": flat}
}

func ghPush(repo, branch string) string {
	return `{"ref":"refs/heads/` + branch + `","compare":"https://github.com/` + repo + `/compare/a...b","pusher":{"name":"octocat"},"sender":{"login":"octocat"},` +
		`"commits":[{"id":"b","added":[],"removed":[],"modified":["api/users.go"]}],"repository":{"full_name":"` + repo + `","name":"widgets","owner":{"login":"acme"}}}`
}

func glPush(project string) string {
	return `{"object_kind":"push","ref":"refs/heads/main","user_username":"octocat","project":{"path_with_namespace":"` + project +
		`","web_url":"https://gitlab.example.com/` + project + `"},"commits":[]}`
}

func slackMention(id, text string) string {
	return `{"token":"x","team_id":"T1","api_app_id":"A1","type":"event_callback","event_id":"` + id + `","event_time":1764000000,` +
		`"event":{"type":"app_mention","user":"U0123456789","text":"<@U0BOT> ` + text + `","ts":"1764000000.000100","channel":"C0123456789","event_ts":"1764000000.000100"}}`
}

// sendFiring posts a case's event, signed as its sender signs it, and
// waits until it is evaluated.
func sendFiring(t *testing.T, h *harness, hook factory.WebhookStatus, c firingCase) string {
	t.Helper()
	var a answer
	switch {
	case strings.HasPrefix(c.webhook, "gh"):
		a = ghPost(t, hook.IngressURL, c.eventType, "gh-"+c.factory+c.webhook, c.body)
	case strings.HasPrefix(c.webhook, "gl"):
		a = post(t, hook.IngressURL, "", c.body, "X-Gitlab-Token", glSecret, "X-Gitlab-Event", c.eventType, "X-Gitlab-Event-UUID", "gl-"+c.webhook)
	case c.webhook == "slack":
		ts := fmt.Sprint(time.Now().Unix())
		m := hmac.New(sha256.New, []byte(slackSecret))
		m.Write([]byte("v0:" + ts + ":" + c.body))
		a = post(t, hook.IngressURL, "", c.body, "X-Slack-Request-Timestamp", ts, "X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	default:
		secret, err := h.c.RevealSecret(context.Background(), hook.UID)
		if err != nil {
			t.Fatal(err)
		}
		a = post(t, hook.IngressURL, "", c.body, "Authorization", "Bearer "+secret)
	}
	id := deliveryID(t, a)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if queued, err := h.store.IsQueued(id); err == nil && !queued {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: delivery %s was not evaluated", c.name, id)
		}
	}
}

// checkEvaluated: the delivery started a run of the automation or none,
// and its log says why an unlisted repository's event started nothing.
func checkEvaluated(t *testing.T, h *harness, hookUID, deliveryID, automationUID string, c firingCase) {
	t.Helper()
	d, err := h.c.Delivery(context.Background(), hookUID, deliveryID)
	if err != nil {
		t.Fatal(err)
	}
	fired := false
	for _, id := range d.RunIDs {
		if r, err := h.store.Run(id); err == nil && r.AutomationID == automationUID {
			fired = true
		}
	}
	if fired != c.fires {
		t.Errorf("evaluation: fired %v, want %v (runs %v, outcome %q)", fired, c.fires, d.RunIDs, d.Outcome)
	}
	want := ""
	if c.notRouted != "" {
		want = "not routed: repository " + c.notRouted + " is not in factory.yaml repositories"
	}
	if d.Outcome != want {
		t.Errorf("evaluation: the delivery's outcome is %q, want %q", d.Outcome, want)
	}
}

// testPasted is Test filter on the case's payload, pasted as if it had
// arrived through the case's webhook.
func testPasted(t *testing.T, h *harness, automationUID, hookUID string, c firingCase) *factory.TestResult {
	t.Helper()
	req := map[string]any{"payload": json.RawMessage(c.body), "webhook_uid": hookUID, "event_type": c.eventType}
	status, body := call(t, h, "POST", "/v1/automations/"+automationUID+"/test-filter", req, "Authorization", "Bearer "+adminKey)
	var res factory.TestResult
	if err := json.Unmarshal(body, &res); status != 200 || err != nil {
		t.Fatalf("Test filter on the pasted payload: %d %s", status, body)
	}
	return &res
}

// checkTested: Test filter's verdict is the case's, and it says when
// the repositories rule dropped the event.
func checkTested(t *testing.T, what string, res *factory.TestResult, c firingCase) {
	t.Helper()
	if res.WouldTrigger != c.fires {
		t.Errorf("%s: would_trigger %v, want %v: %+v", what, res.WouldTrigger, c.fires, res)
	}
	said := strings.Contains(res.Note, "not routed")
	if c.notRouted != "" && (!said || !strings.Contains(res.Note, "repository "+c.notRouted+" is not in factory.yaml repositories")) ||
		c.notRouted == "" && said {
		t.Errorf("%s: note %q, want it to say that %q is not routed", what, res.Note, c.notRouted)
	}
}

// replayedImpact is an impact as reconcile --dry-run --output json shows it.
type replayedImpact struct {
	Automation string `json:"automation"`
	WebhookUID string `json:"webhook_uid"`
	Deliveries int    `json:"deliveries"`
	After      int    `json:"after"`
	NotRouted  int    `json:"not_routed"`
}

// replayFiring replays each factory's recent deliveries in a dry-run
// through the server, against a copy of each automation under a new name
// (so that each is a change the replay covers).
func replayFiring(t *testing.T, h *harness, roots map[string]string) map[string][]replayedImpact {
	t.Helper()
	out := map[string][]replayedImpact{}
	for name, root := range roots {
		copies := map[string]string{}
		err := filepath.WalkDir(filepath.Join(root, "automations"), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			rel, _ := filepath.Rel(root, path)
			parts := strings.Split(filepath.ToSlash(rel), "/")
			parts[1] = "replay-" + parts[1]
			copies[strings.Join(parts, "/")] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		writeTree(t, root, copies)
		c, err := reconciler.Check(context.Background(), reconciler.DirSource{Root: root}, name, h.c)
		if err != nil || !c.Plan.Valid() {
			t.Fatalf("dry-run of %s: %v %+v", name, err, c.Plan.Diagnostics)
		}
		impacts, err := reconciler.MeasureImpact(c, h.c)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(impacts)
		var shown []replayedImpact
		if err := json.Unmarshal(b, &shown); err != nil {
			t.Fatal(err)
		}
		out[name] = shown
	}
	return out
}

// checkReplayed: the replay of the case's webhook (its one delivery)
// against the automation counts it as triggering or not, and as not
// routed when the repositories rule dropped it.
func checkReplayed(t *testing.T, impacts []replayedImpact, automation, hookUID string, c firingCase) {
	t.Helper()
	for _, im := range impacts {
		if im.Automation != "replay-"+automation || im.WebhookUID != hookUID {
			continue
		}
		notRouted := 0
		if c.notRouted != "" {
			notRouted = 1
		}
		if im.Deliveries != 1 || (im.After == 1) != c.fires || im.NotRouted != notRouted {
			t.Errorf("replay: %+v, want 1 delivery that fires: %v, not routed: %d", im, c.fires, notRouted)
		}
		return
	}
	t.Errorf("replay: no impact of %s on %s in %+v", automation, hookUID, impacts)
}
