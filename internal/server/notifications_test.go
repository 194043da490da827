package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"factory"
	"factory/internal/notify"
	"factory/internal/reconciler"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/store"
	"factory/internal/testnpm"
)

// StandardWebhooksVersion is the release of the official Standard
// Webhooks library (npm) the receivers verify with.
const StandardWebhooksVersion = "1.1.1"

// hookReceiver keeps every request it answered 2xx, and answers 503 while
// down.
type hookReceiver struct {
	mu   sync.Mutex
	down bool
	got  []received
}

type received struct {
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Secret  string            `json:"secret"`
	typ     string
	run     string
}

func (rc *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.down {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var e notify.Envelope
	_ = json.Unmarshal(b, &e)
	rc.got = append(rc.got, received{Headers: map[string]string{"webhook-id": r.Header.Get("webhook-id"),
		"webhook-timestamp": r.Header.Get("webhook-timestamp"), "webhook-signature": r.Header.Get("webhook-signature")},
		Body: string(b), typ: e.Type, run: e.Data.RunID + "@" + r.URL.Path})
	w.WriteHeader(http.StatusNoContent)
}

func (rc *hookReceiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// verifyWithLibrary checks every request with the official Standard
// Webhooks library: its Webhook(secret).verify(body, headers).
func verifyWithLibrary(t *testing.T, got []received) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skipf("node is not installed (it runs the standardwebhooks library): %v", err)
	}
	dir := testnpm.Package(t, "standardwebhooks", StandardWebhooksVersion)
	in := filepath.Join(t.TempDir(), "requests.json")
	b, _ := json.Marshal(got)
	if err := os.WriteFile(in, b, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `const { Webhook } = require(process.argv[1]);
const reqs = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
const out = reqs.map((r) => { try { new Webhook(r.secret).verify(r.body, r.headers); return "ok"; } catch (e) { return String(e); } });
const bad = reqs.map((r) => { try { new Webhook(r.secret).verify(r.body + " ", r.headers); return "forged body verified"; } catch (e) { return "ok"; } });
console.log(JSON.stringify(out.concat(bad)));`
	cmd := exec.Command("node", "-e", script, dir, in)
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, res)
	}
	var results []string
	if err := json.Unmarshal(bytes.TrimSpace(res), &results); err != nil {
		t.Fatalf("node said %s", res)
	}
	for i, r := range results {
		if r != "ok" {
			t.Errorf("request %d: the standardwebhooks library says %s", i%len(got), r)
		}
	}
}

// notifyServer serves a factory whose one route posts every event of its
// runs to rc, signed with the secret "hooks"; runs say one line.
func notifyServer(t *testing.T, rc *hookReceiver) (*harness, string) {
	t.Helper()
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"factory.yaml": "schemaVersion: v1alpha1\nname: Ops\ncodeForges: [NONE]\nrepositories: []\nagentDefaults:\n  model: auto\nnotifications:\n" +
			"  - name: ops\n    url: " + srv.URL + "/ops\n    secretName: hooks\n    events: [run.created, run.started, run.succeeded, run.failed]\n",
		"agents/lead/agent.md": "---\nagentType: FOREMAN\n---\nYou lead.\n",
	})
	var n *notify.Notifier
	h := startConfigured(t, func(c *server.Config) { c.Notify = n }, func(s *store.Store, dir string) *runs.Manager {
		kr, err := secrets.LoadKeyring(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := secrets.Create(s, kr, "hooks", []byte(routeHookSecret), false, time.Now()); err != nil {
			t.Fatal(err)
		}
		n, err = notify.New(notify.Config{Store: s, Keyring: kr, AllowInsecure: true, Log: slog.New(slog.DiscardHandler),
			Retries: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
				time.Second, time.Second, time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "sh", Log: slog.New(slog.DiscardHandler),
			Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", "echo ok"}}}}})
		m.Observe(func(*factory.Run) { n.Wake() })
		return m
	}, server.FactorySource{Name: "ops", Source: reconciler.DirSource{Root: root}, Interval: time.Hour})
	return h, srv.URL
}

const routeHookSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"

// apiJSON calls the API with the admin key.
func apiJSON(t *testing.T, h *harness, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(context.Background(), method, h.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

// TestRunStatusWebhooks: the runs of a factory whose route lists events
// send them, and a run created with a webhook of its own sends every
// event there, signed with the secret its creation answered once; a
// receiver down for a while gets every event afterwards, in order per run,
// none twice; each request verifies with the official Standard Webhooks
// library; the delivery log lists them by route, and a redelivery sends
// the same message again.
func TestRunStatusWebhooks(t *testing.T) {
	rc := &hookReceiver{down: true}
	h, recv := notifyServer(t, rc)
	uid := h.status("ops").UID
	var made []struct {
		RunID         string `json:"run_id"`
		WebhookSecret string `json:"webhook_secret"`
	}
	for i := 0; i < 3; i++ {
		var c struct {
			RunID         string `json:"run_id"`
			WebhookSecret string `json:"webhook_secret"`
		}
		body := map[string]any{"prompt": "do it"}
		if i == 2 {
			body["webhook"] = map[string]string{"url": recv + "/own"}
		}
		if code := apiJSON(t, h, "POST", "/v1/factories/"+uid+"/runs", body, &c); code != 200 {
			t.Fatalf("create: %d", code)
		}
		made = append(made, c)
	}
	if made[2].WebhookSecret == "" || !strings.HasPrefix(made[2].WebhookSecret, "whsec_") || made[0].WebhookSecret != "" {
		t.Fatalf("the answers' secrets: %+v", made)
	}
	time.Sleep(700 * time.Millisecond) // down: every attempt so far failed
	rc.mu.Lock()
	rc.down = false
	rc.mu.Unlock()
	want := 3*3 + 3 // each run on the route; the third on its own webhook too
	var got []received
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got = rc.all(); len(got) >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests, want %d", len(got), want)
		}
	}
	time.Sleep(300 * time.Millisecond)
	got = rc.all()
	checkOrder(t, got, made[2].RunID)
	for i := range got {
		got[i].Secret = routeHookSecret
		if strings.HasSuffix(got[i].run, "/own") {
			got[i].Secret = made[2].WebhookSecret
		}
	}
	verifyWithLibrary(t, got)
	checkLog(t, h, rc, made[2].RunID)
}

// checkOrder: every run's events came once each, in the order they
// happened.
func checkOrder(t *testing.T, got []received, own string) {
	t.Helper()
	seen := map[string]bool{}
	order := map[string][]string{}
	for _, g := range got {
		if seen[g.Headers["webhook-id"]] {
			t.Errorf("%s came twice", g.Headers["webhook-id"])
		}
		seen[g.Headers["webhook-id"]] = true
		order[g.run] = append(order[g.run], g.typ)
	}
	if len(order) != 4 {
		t.Fatalf("events of %d runs and routes: %v", len(order), order)
	}
	for run, types := range order {
		if strings.Join(types, ",") != "run.created,run.started,run.succeeded" {
			t.Errorf("%s: %v", run, types)
		}
	}
	if _, ok := order[own+"@/own"]; !ok {
		t.Errorf("no event of the run's own webhook: %v", order)
	}
}

// checkLog: the delivery log by route, newest first, with attempts; a
// redelivery (202) sends the message again.
func checkLog(t *testing.T, h *harness, rc *hookReceiver, own string) {
	t.Helper()
	var page struct {
		Deliveries []factory.Notification `json:"deliveries"`
	}
	if code := apiJSON(t, h, "GET", "/v1/notifications/deliveries?route=ops", nil, &page); code != 200 || len(page.Deliveries) != 9 {
		t.Fatalf("the ops route's log: %d, %d deliveries", code, len(page.Deliveries))
	}
	retried := false
	for i, d := range page.Deliveries {
		if d.Status != factory.NotificationDelivered || i > 0 && d.ID > page.Deliveries[i-1].ID {
			t.Errorf("%d: %+v", i, d)
		}
		retried = retried || d.Attempts > 1
	}
	if !retried {
		t.Error("no delivery was retried")
	}
	if code := apiJSON(t, h, "GET", "/v1/notifications/deliveries?route=run:"+own, nil, &page); code != 200 || len(page.Deliveries) != 3 {
		t.Fatalf("the run's own route's log: %d, %d deliveries", code, len(page.Deliveries))
	}
	before := len(rc.all())
	var again factory.Notification
	if code := apiJSON(t, h, "POST", "/v1/notifications/deliveries/"+page.Deliveries[0].ID+"/redeliver", nil, &again); code != 202 ||
		again.MessageID != page.Deliveries[0].MessageID {
		t.Fatalf("redeliver: %d %+v", code, again)
	}
	for deadline := time.Now().Add(10 * time.Second); len(rc.all()) == before; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the redelivery was not sent")
		}
	}
	if got := rc.all(); got[len(got)-1].Headers["webhook-id"] != again.MessageID {
		t.Errorf("redelivered %s", got[len(got)-1].Headers["webhook-id"])
	}
	if code := apiJSON(t, h, "POST", "/v1/agent/runs", map[string]any{"prompt": "x", "webhook": map[string]string{"url": "http://example.com/x"}}, nil); code != 400 {
		t.Errorf("a webhook over http to a public host: %d", code)
	}
}
