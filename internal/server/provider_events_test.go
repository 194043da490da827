package server_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v88/github"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/store"
)

const ghSecret = "github-app-webhook-secret"

// ghPost signs a delivery as GitHub does, checks with GitHub's own library
// (go-github's ValidatePayload and ParseWebHook) that the signature and the
// payload are GitHub's, and posts it.
func ghPost(t *testing.T, url, kind, id, body string) answer {
	t.Helper()
	m := hmac.New(sha256.New, []byte(ghSecret))
	m.Write([]byte(body))
	sig := "sha256=" + hex.EncodeToString(m.Sum(nil))
	req, _ := http.NewRequest("POST", url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", sig)
	req.Header.Set("X-GitHub-Event", kind)
	req.Header.Set("X-GitHub-Delivery", id)
	payload, err := gh.ValidatePayload(req, []byte(ghSecret))
	if err != nil {
		t.Fatalf("GitHub's library refuses the test delivery: %v", err)
	}
	if _, err := gh.ParseWebHook(kind, payload); err != nil {
		t.Fatalf("GitHub's library cannot read the %s payload: %v", kind, err)
	}
	return post(t, url, "", body, "Content-Type", "application/json", "X-Hub-Signature-256", sig, "X-GitHub-Event", kind, "X-GitHub-Delivery", id)
}

// TestGitHubEventsThroughServe: a labeled issue starts one run of the
// issue_labeled automation, another label none; a push starts the push
// automation only on main with a file under api/; a ping and a push to a
// repository the factory does not list start nothing and say why.
func TestGitHubEventsThroughServe(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"factory.yaml":                       "schemaVersion: v1alpha1\nname: GH\nrepositories:\n  - owner: acme\n    name: widgets\nagentDefaults:\n  model: auto\n",
		"agents/lead/agent.md":               "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"webhooks/github.yaml":               "authMode: signature\nsignatureScheme: github\nsecretName: gh\n",
		"automations/labeled/automation.md":  "---\ntriggers:\n  - provider: github\n    event: issue_labeled\n    filter:\n      labels: [factory-ready]\n---\nImplement the issue.\n",
		"automations/api-push/automation.md": "---\ntriggers:\n  - provider: github\n    event: push\n    filter:\n      branches: [main]\n      paths: [\"api/**\"]\n---\nCheck the API docs.\n",
	})
	h := serveWithSecrets(t, root, map[string]string{"gh": ghSecret})
	hook := h.status("acme").Webhooks[0]
	deliver := func(kind, id, body string) *factory.Delivery {
		t.Helper()
		did := deliveryID(t, ghPost(t, hook.IngressURL, kind, id, body))
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			d, err := h.c.Delivery(context.Background(), hook.UID, did)
			if err == nil && (len(d.RunIDs) > 0 || d.Event != nil || d.Outcome != "") {
				return &d.Delivery
			}
			if time.Now().After(deadline) {
				sd, serr := h.store.Delivery(hook.UID, did)
				q, _ := h.store.EvalQueue(10)
				t.Fatalf("delivery %s was not evaluated: %+v %v; queue %v", did, sd, serr, q)
			}
		}
	}
	issue := func(label string) string {
		return `{"action":"labeled","label":{"name":"` + label + `"},"issue":{"number":7,"title":"Crash","html_url":"https://github.com/acme/widgets/issues/7","user":{"login":"octocat"},"labels":[{"name":"` + label + `"}],"assignees":[]},"repository":{"full_name":"acme/widgets","name":"widgets","owner":{"login":"acme"}},"sender":{"login":"octocat"}}`
	}
	push := func(repo, branch, file string) string {
		return `{"ref":"refs/heads/` + branch + `","compare":"https://github.com/` + repo + `/compare/a...b","pusher":{"name":"octocat"},"sender":{"login":"octocat"},"commits":[{"id":"b","added":[],"removed":[],"modified":["` + file + `"]}],"repository":{"full_name":"` + repo + `","name":"x","owner":{"login":"acme"}}}`
	}

	d := deliver("issues", "d-1", issue("factory-ready"))
	if len(d.RunIDs) != 1 || d.Event == nil || d.Event.Event != "issue_labeled" {
		t.Fatalf("a labeled issue: %+v %+v", d, d.Event)
	}
	run, err := h.store.Run(d.RunIDs[0])
	if err != nil || run.Source != factory.SourceGitHub || run.TriggerURL != "https://github.com/acme/widgets/issues/7" ||
		!strings.HasPrefix(run.Prompt, "You lead.") || !strings.Contains(run.Prompt, "Implement the issue.") ||
		!strings.Contains(run.Prompt, "the github event issue_labeled in acme/widgets") {
		t.Fatalf("the run: %v %+v\n%s", err, run, run.Prompt)
	}
	d2 := deliver("issues", "d-2", issue("bug"))
	if len(d2.RunIDs) != 0 || d2.Event == nil {
		t.Fatalf("another label started a run: %+v", d2)
	}
	checkExplained(t, h, run.AutomationID, d2.ID)
	checkPushes(t, deliver, push)
}

// checkExplained: Test filter says why the labeled automation did not
// fire for the bug label, key by key.
func checkExplained(t *testing.T, h *harness, automationID, deliveryID string) {
	t.Helper()
	var res factory.TestResult
	if err := h.c.TestFilter(context.Background(), automationID, deliveryID, &res); err != nil {
		t.Fatal(err)
	}
	var labels *factory.KeyResult
	for i, k := range res.PayloadCheck.Keys {
		if k.Path == "labels" {
			labels = &res.PayloadCheck.Keys[i]
		}
	}
	if res.WouldTrigger || labels == nil || labels.Passed || fmt.Sprint(labels.Expected) != "[factory-ready]" || fmt.Sprint(labels.Actual) != "[bug]" {
		t.Fatalf("test filter: %+v", res)
	}
}

// checkPushes: pushes fire by branch and path; a ping and a push to an
// unlisted repository start nothing and say why.
func checkPushes(t *testing.T, deliver func(kind, id, body string) *factory.Delivery, push func(repo, branch, file string) string) {
	t.Helper()
	for _, c := range []struct {
		branch, file string
		runs         int
	}{{"main", "api/users.go", 1}, {"main", "docs/index.md", 0}, {"dev", "api/users.go", 0}} {
		if d := deliver("push", "p-"+c.branch+c.file, push("acme/widgets", c.branch, c.file)); len(d.RunIDs) != c.runs {
			t.Fatalf("push of %s on %s: %d runs, want %d", c.file, c.branch, len(d.RunIDs), c.runs)
		}
	}
	if d := deliver("ping", "ping-1", `{"zen":"Design for failure.","hook_id":1,"repository":{"full_name":"acme/widgets"},"sender":{"login":"octocat"}}`); len(d.RunIDs) != 0 || !strings.Contains(d.Outcome, "ping") {
		t.Fatalf("a ping: %+v", d)
	}
	if d := deliver("push", "other-1", push("evil/fork", "main", "api/x.go")); len(d.RunIDs) != 0 || !strings.Contains(d.Outcome, "not routed: repository evil/fork") {
		t.Fatalf("an unlisted repository: %+v", d)
	}
}

// TestSlackThroughServe: Slack's url_verification is answered with its
// challenge and logs no delivery; an app mention starts one run; Slack's
// retry of it (same event_id, X-Slack-Retry-Num) is a duplicate.
func TestSlackThroughServe(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"factory.yaml":                      "schemaVersion: v1alpha1\nname: Slack\nrepositories: []\nagentDefaults:\n  model: auto\n",
		"agents/lead/agent.md":              "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"webhooks/slack.yaml":               "authMode: signature\nsignatureScheme: slack\nsecretName: slack\n",
		"automations/mention/automation.md": "---\ntriggers:\n  - provider: slack\n    event: app_mention\n    filter:\n      keywords: [deploy]\n---\nAnswer the mention.\n",
	})
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	h := serveWithSecrets(t, root, map[string]string{"slack": secret})
	hook := h.status("acme").Webhooks[0]
	// Slack's documented signing: v0=hex(HMAC-SHA256(secret, "v0:" + ts + ":" + body)).
	send := func(body string, extra ...string) answer {
		ts := fmt.Sprint(time.Now().Unix())
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte("v0:" + ts + ":" + body))
		return post(t, hook.IngressURL, "", body, append([]string{"X-Slack-Request-Timestamp", ts, "X-Slack-Signature", "v0=" + hex.EncodeToString(m.Sum(nil))}, extra...)...)
	}
	a := send(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	if a.status != 200 || !strings.Contains(a.body, `"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"`) {
		t.Fatalf("url_verification: %d %s", a.status, a.body)
	}
	mention := `{"token":"x","team_id":"T1","api_app_id":"A1","type":"event_callback","event_id":"Ev08MFMKH6","event_time":1764000000,` +
		`"event":{"type":"app_mention","user":"U0123456789","text":"<@U0BOT> deploy the fix","ts":"1764000000.000100","channel":"C0123456789","event_ts":"1764000000.000100"}}`
	first := deliveryID(t, send(mention))
	retry := send(mention, "X-Slack-Retry-Num", "1", "X-Slack-Retry-Reason", "http_timeout")
	if retry.status != 202 || !strings.Contains(retry.body, `"duplicate_of":"`+first+`"`) {
		t.Fatalf("Slack's retry: %d %s", retry.status, retry.body)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := h.c.Delivery(context.Background(), hook.UID, first)
		if err == nil && len(d.RunIDs) == 1 {
			r, _ := h.store.Run(d.RunIDs[0])
			if r == nil || r.Source != factory.SourceSlack || !strings.Contains(r.Prompt, "slack event app_mention in C0123456789") {
				t.Fatalf("the run: %+v", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mention started no run: %+v %v", d, err)
		}
	}
	if ds, _, err := h.c.Deliveries(context.Background(), hook.UID, 10, ""); err != nil || len(ds) != 2 {
		t.Fatalf("the log holds the mention and its retry, not the verification: %d %v", len(ds), err)
	}
}

// serveWithSecrets serves the factory at root as "acme", with the managed
// secrets given and agents that do nothing.
func serveWithSecrets(t *testing.T, root string, values map[string]string) *harness {
	t.Helper()
	return serveFactories(t, values, server.FactorySource{Name: "acme", Source: reconciler.DirSource{Root: root}, Interval: time.Hour})
}

// serveFactories serves factories with the managed secrets given and
// agents that do nothing.
func serveFactories(t *testing.T, values map[string]string, sources ...server.FactorySource) *harness {
	t.Helper()
	return startWith(t, withSecrets(t, values), sources...)
}

// withSecrets makes the managed secrets given, and a run manager whose
// agents do nothing.
func withSecrets(t *testing.T, values map[string]string) func(*store.Store, string) *runs.Manager {
	return func(s *store.Store, data string) *runs.Manager {
		kr, err := secrets.LoadKeyring(data)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range values {
			if _, _, err := secrets.Create(s, kr, name, []byte(v), false, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "sh", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	}
}
