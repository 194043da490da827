package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"factory"

	"factory/client"
	"factory/internal/reconciler"
	"factory/internal/reconciler/gitsource"
	"factory/internal/reconciler/gitsource/gittest"
	"factory/internal/reconciler/watch"
	"factory/internal/runs"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/store"
)

const adminKey = "fk_test_admin_key_0000000000000000000000000"

type harness struct {
	t     testing.TB
	url   string
	c     *client.Client
	store *store.Store // for reading runs directly (the Agents API comes later)
}

// start runs a real server on loopback over a store in a temp dir.
func start(t testing.TB, sources ...server.FactorySource) *harness {
	return startWith(t, nil, sources...)
}

// startWith is start with a run manager made over the server's store.
func startWith(t testing.TB, runs func(*store.Store, string) *runs.Manager, sources ...server.FactorySource) *harness {
	t.Helper()
	return startConfigured(t, nil, runs, sources...)
}

// startConfigured is startWith with a change to the server's configuration.
func startConfigured(t testing.TB, mod func(*server.Config), runs func(*store.Store, string) *runs.Manager, sources ...server.FactorySource) *harness {
	t.Helper()
	data := t.TempDir()
	s, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := secrets.LoadKeyring(data)
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.PutAPIKey(adminKey, &factory.APIKey{Name: "admin", Scope: factory.ScopeAdmin, CreatedAt: time.Now()})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logTo io.Writer = io.Discard
	if os.Getenv("FACTORY_TEST_LOG") != "" {
		logTo = os.Stderr
	}
	log := slog.New(slog.NewTextHandler(logTo, nil))
	cfg := server.Config{PublicURL: "http://" + ln.Addr().String(), Factories: sources}
	if runs != nil {
		cfg.Runs = runs(s, data)
	}
	if mod != nil {
		mod(&cfg)
	}
	srv := server.New(cfg, &reconciler.Applier{Store: s, Keyring: kr}, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
		s.Close()
	})
	select {
	case <-srv.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("server not ready")
	}
	u := "http://" + ln.Addr().String()
	return &harness{t: t, url: u, c: client.New(u, adminKey), store: s}
}

func (h *harness) status(name string) *factory.FactoryStatus {
	h.t.Helper()
	st, err := h.c.Factory(context.Background(), name)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// eventually polls a condition on the factory's status for up to 10 s.
func (h *harness) eventually(name, what string, ok func(*factory.FactoryStatus) bool) *factory.FactoryStatus {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := h.status(name)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not reached within 10s; status: ready=%v revision=%s error=%v webhooks=%v", what, st.Ready, st.Revision, st.Error, webhookNames(st))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func webhookNames(st *factory.FactoryStatus) string {
	var n []string
	for _, w := range st.Webhooks {
		n = append(n, w.Name+"="+w.AuthMode)
	}
	return strings.Join(n, ",")
}

// metric reads one sample from /metrics.
func (h *harness) metric(name, labels string) float64 {
	h.t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"{"+labels+"}") + ` (\S+)$`).FindStringSubmatch(h.metrics())
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func TestGitSource(t *testing.T) {
	remote := gittest.NewRemote(t)
	c1 := remote.Commit("one", map[string]string{"webhooks/a.yaml": "authMode: token\n"})
	src := &gitsource.Source{URL: remote.URL, Ref: "main"}
	h := start(t, server.FactorySource{Name: "acme", Source: src, Interval: 100 * time.Millisecond})

	st := h.status("acme")
	if !st.Ready || st.Revision != "main@sha1:"+c1.String() || webhookNames(st) != "a=token" {
		t.Fatalf("first sync: %+v", st)
	}
	uidA := st.Webhooks[0].UID

	// A commit is applied within an interval or so.
	c2 := remote.Commit("two", map[string]string{"webhooks/b.yaml": "authMode: url_token\n"})
	h.eventually("acme", "the second commit", func(st *factory.FactoryStatus) bool { return st.Revision == "main@sha1:"+c2.String() })

	// A bad commit is refused; the last good revision keeps serving.
	c3 := remote.Commit("bad", map[string]string{"webhooks/a.yaml": "authMode: nope\n"})
	st = h.eventually("acme", "the bad commit refused", func(st *factory.FactoryStatus) bool { return !st.Ready })
	if st.Revision != "main@sha1:"+c2.String() || st.AttemptedRevision != "main@sha1:"+c3.String() ||
		!strings.Contains(*st.Error, "webhooks/a.yaml:1:11: /authMode: must be one of token, url_token, signature") ||
		webhookNames(st) != "a=token,b=url_token" || st.Webhooks[0].UID != uidA {
		t.Fatalf("after a bad commit: %+v %v", st, *st.Error)
	}

	// Fixing it recovers.
	c4 := remote.Commit("fix", map[string]string{"webhooks/a.yaml": "authMode: url_token\n"})
	st = h.eventually("acme", "the fix", func(st *factory.FactoryStatus) bool { return st.Ready && st.Revision == "main@sha1:"+c4.String() })
	if webhookNames(st) != "a=url_token,b=url_token" || st.Webhooks[0].UID != uidA {
		t.Fatalf("after the fix: %s", webhookNames(st))
	}

	// A force-push to an older commit is applied.
	remote.ResetMain(c1)
	st = h.eventually("acme", "the force-push", func(st *factory.FactoryStatus) bool { return st.Revision == "main@sha1:"+c1.String() })
	if webhookNames(st) != "a=token" || st.Webhooks[0].UID != uidA {
		t.Fatalf("after the force-push: %s", webhookNames(st))
	}

	// An unchanged head clones nothing and writes nothing, poll after poll.
	// (The status is stored before the sync's metrics are counted: wait for
	// the metrics of the force-push first.)
	for deadline := time.Now().Add(5 * time.Second); h.metric("factory_revision_info", `factory="acme",revision="main@sha1:`+c1.String()+`"`) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the force-push's metrics were not recorded")
		}
	}
	clones := src.Clones()
	applied := h.metric("factory_syncs_total", `factory="acme",outcome="applied"`)
	time.Sleep(600 * time.Millisecond)
	if src.Clones() != clones {
		t.Fatalf("an unchanged head was cloned: %d → %d", clones, src.Clones())
	}
	if unchanged := h.metric("factory_syncs_total", `factory="acme",outcome="unchanged"`); unchanged < 3 {
		t.Fatalf("expected polls while unchanged, got %v", unchanged)
	}
	if got := h.metric("factory_syncs_total", `factory="acme",outcome="applied"`); got != applied {
		t.Fatalf("an unchanged head was applied again: %v → %v", applied, got)
	}
	if h.metric("factory_ready", `factory="acme"`) != 1 || h.metric("factory_revision_info", `factory="acme",revision="main@sha1:`+c1.String()+`"`) != 1 {
		t.Fatal("metrics do not show the applied revision")
	}

	// POST /sync answers when the sync is done.
	c5 := remote.Commit("five", map[string]string{"webhooks/c.yaml": "authMode: token\n"})
	st, err := h.c.SyncFactory(context.Background(), st.UID)
	if err != nil || st.Revision != "main@sha1:"+c5.String() {
		t.Fatalf("sync now: %v %+v", err, st)
	}
}

func TestGitRemoteUnreachableThenBack(t *testing.T) {
	root := t.TempDir()
	url := "file://" + filepath.Join(root, "later.git")
	src := &gitsource.Source{URL: url, Ref: "main"}
	h := start(t, server.FactorySource{Name: "acme", Source: src, Interval: 300 * time.Millisecond})
	st := h.status("acme")
	if st.Ready || st.Error == nil || !strings.Contains(*st.Error, "list refs of "+url) {
		t.Fatalf("an unreachable remote: %+v", st)
	}
	if h.metric("factory_syncs_total", `factory="acme",outcome="error"`) < 1 {
		t.Fatal("the failure is not counted")
	}
	// The remote appears: the retry with backoff picks it up.
	remote := gittest.NewRemote(t)
	remote.Commit("one", map[string]string{"webhooks/a.yaml": "authMode: token\n"})
	if err := os.Rename(strings.TrimPrefix(remote.URL, "file://"), filepath.Join(root, "later.git")); err != nil {
		t.Fatal(err)
	}
	h.eventually("acme", "recovery", func(st *factory.FactoryStatus) bool { return st.Ready && len(st.Webhooks) == 1 })
}

func TestWatchedDirectory(t *testing.T) {
	root := t.TempDir()
	src := reconciler.DirSource{Root: root}
	h := start(t, server.FactorySource{Name: "dir", Source: src, Interval: time.Hour,
		Watch: func(ctx context.Context) (<-chan struct{}, error) {
			// Quiet for 200 ms ends a burst: long enough that a loaded
			// machine (the race detector, two cores) writes the burst below
			// within it.
			return watch.Dir(ctx, root, 200*time.Millisecond, slog.Default())
		}})
	if st := h.status("dir"); !st.Ready || len(st.Webhooks) != 0 {
		t.Fatalf("empty directory: %+v", st)
	}

	// A webhooks/ folder created after start is picked up.
	os.Mkdir(filepath.Join(root, "webhooks"), 0o755)
	os.WriteFile(filepath.Join(root, "webhooks", "a.yaml"), []byte("authMode: token\n"), 0o644)
	h.eventually("dir", "a new folder", func(st *factory.FactoryStatus) bool { return webhookNames(st) == "a=token" })

	// An editor-style save: a temporary file renamed over the old one.
	tmp := filepath.Join(root, "webhooks", ".a.yaml.tmp")
	os.WriteFile(tmp, []byte("authMode: url_token\n"), 0o644)
	os.Rename(tmp, filepath.Join(root, "webhooks", "a.yaml"))
	h.eventually("dir", "an atomic save", func(st *factory.FactoryStatus) bool { return webhookNames(st) == "a=url_token" })

	// A burst of 100 writes is one apply.
	time.Sleep(600 * time.Millisecond)
	before := h.metric("factory_syncs_total", `factory="dir",outcome="applied"`)
	for i := 0; i < 100; i++ {
		os.WriteFile(filepath.Join(root, "webhooks", fmt.Sprintf("b%d.yaml", i%5)), []byte(fmt.Sprintf("description: write %d\n", i)), 0o644)
	}
	h.eventually("dir", "the burst", func(st *factory.FactoryStatus) bool { return len(st.Webhooks) == 6 })
	time.Sleep(600 * time.Millisecond)
	if after := h.metric("factory_syncs_total", `factory="dir",outcome="applied"`); after != before+1 {
		t.Fatalf("a burst of 100 writes made %v applies, want 1", after-before)
	}

	// A deleted file deletes the webhook.
	os.Remove(filepath.Join(root, "webhooks", "a.yaml"))
	h.eventually("dir", "a deletion", func(st *factory.FactoryStatus) bool {
		return len(st.Webhooks) == 5 && !strings.Contains(webhookNames(st), "a=")
	})
}

func TestAuth(t *testing.T) {
	h := start(t)
	for _, c := range []struct {
		key  string
		want int
	}{{"", 401}, {"nope", 401}, {adminKey, 200}} {
		_, err := client.New(h.url, c.key).Factories(context.Background())
		got := 200
		if err != nil {
			if got = client.StatusOf(err); got == 0 {
				t.Fatal(err)
			}
		}
		if got != c.want {
			t.Errorf("key %q: status %d, want %d", c.key, got, c.want)
		}
	}
	resp, err := http.Get(h.url + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", err, resp)
	}
	resp.Body.Close()
}

func dirSource(name, root string) server.FactorySource {
	return server.FactorySource{Name: name, Source: reconciler.DirSource{Root: root}, Interval: time.Hour}
}

// TestMetricsNeedAKey: /metrics lists every webhook's UID (its ingress URL),
// so on the main listener it needs a key that may read the webhooks (read,
// or admin), as GET /v1/webhooks/{uid} does; a listener of its own serves
// it without one. The attack: /metrics was public on the ingress listener.
func TestMetricsNeedAKey(t *testing.T) {
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := startConfigured(t, func(c *server.Config) { c.MetricsListener = ml }, nil)
	b := h.store.NewBatch()
	b.PutAPIKey("fk_runs_only_0000000000000000000000000000", &factory.APIKey{Name: "ci", Scope: factory.ScopeRuns, CreatedAt: time.Now()})
	b.PutAPIKey("fk_read_only_0000000000000000000000000000", &factory.APIKey{Name: "scraper", Scope: factory.ScopeRead, CreatedAt: time.Now()})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int{"": 401, "fk_runs_only_0000000000000000000000000000": 403, "fk_read_only_0000000000000000000000000000": 200, adminKey: 200} {
		req, _ := http.NewRequest(http.MethodGet, h.url+"/metrics", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != want {
			t.Fatalf("key %q: %v %v, want %d", key, err, resp.StatusCode, want)
		}
		resp.Body.Close()
	}
	resp, err := http.Get("http://" + ml.Addr().String() + "/metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the metrics listener: %v %v", err, resp)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "factory_") {
		t.Fatalf("the metrics listener serves no metrics: %.200s", body)
	}
}

// TestMethodNotAllowedIsAProblem: a wrong method gets 405 with Allow, as
// application/problem+json like every other error.
func TestMethodNotAllowedIsAProblem(t *testing.T) {
	h := start(t)
	for path, allow := range map[string]string{
		"/webhooks/w/wh_0000000000000000none": "POST",
		"/v1/secrets":                         "GET, POST, HEAD",
		"/healthz":                            "GET, HEAD",
	} {
		req, _ := http.NewRequest(http.MethodPut, h.url+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != allow || resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(string(body), `"type":"https://factory.invalid/errors/method_not_allowed"`) {
			t.Errorf("PUT %s: %d, Allow %q, %s: %s", path, resp.StatusCode, resp.Header.Get("Allow"), resp.Header.Get("Content-Type"), body)
		}
	}
}

// TestPushReceiver: a signed push notification syncs the pushed factory at
// once (its poll interval is an hour); a wrong signature syncs nothing, and
// another repository's push concerns no factory.
func TestPushReceiver(t *testing.T) {
	remote := gittest.NewRemote(t)
	remote.Commit("one", map[string]string{"webhooks/a.yaml": "authMode: token\n"})
	src := &gitsource.Source{URL: remote.URL, Ref: "main"}
	h := startConfigured(t, func(c *server.Config) { c.PushSecret = "push-secret" }, nil,
		server.FactorySource{Name: "acme", Source: src, Interval: time.Hour})
	if _, err := h.c.CreateSecret(context.Background(), "push-secret", []byte("s3cret-push-key"), false); err != nil {
		t.Fatal(err)
	}
	c2 := remote.Commit("two", map[string]string{"webhooks/b.yaml": "authMode: token\n"})
	push := func(repoURL, signWith string) (int, string) {
		body := fmt.Sprintf(`{"ref":"refs/heads/main","repository":{"clone_url":%q,"pushed_at":%d}}`, repoURL, time.Now().Unix())
		m := hmac.New(sha256.New, []byte(signWith))
		m.Write([]byte(body))
		req, _ := http.NewRequest(http.MethodPost, h.url+"/hooks/push", strings.NewReader(body))
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := push(remote.URL, "wrong"); status != 401 {
		t.Fatalf("a wrong signature: %d %s", status, body)
	}
	if status, body := push("https://github.com/acme/other.git", "s3cret-push-key"); status != 202 || !strings.Contains(body, `"factories":[]`) {
		t.Fatalf("another repository: %d %s", status, body)
	}
	if st := h.status("acme"); st.Revision == "main@sha1:"+c2.String() {
		t.Fatal("synced without a push")
	}
	if status, body := push(strings.ToUpper(remote.URL[:7])+remote.URL[7:]+"/", "s3cret-push-key"); status != 202 || !strings.Contains(body, `"factories":["acme"]`) {
		t.Fatalf("the pushed repository: %d %s", status, body)
	}
	h.eventually("acme", "the pushed commit", func(st *factory.FactoryStatus) bool { return st.Revision == "main@sha1:"+c2.String() })
}

// TestPushReceiverReplaysAndFloods: a signed push notification was
// accepted again for ever (each replay a sync, a fetch of the remote), and
// wrong signatures were answered without a budget. The attack: the same
// signed notification twice, a signed one dated long ago or not dated, and
// a flood of wrong signatures from one address.
func TestPushReceiverReplaysAndFloods(t *testing.T) {
	h := startConfigured(t, func(c *server.Config) { c.PushSecret = "push-secret" }, nil)
	if _, err := h.c.CreateSecret(context.Background(), "push-secret", []byte("s3cret-push-key"), false); err != nil {
		t.Fatal(err)
	}
	sign := func(body string) string {
		m := hmac.New(sha256.New, []byte("s3cret-push-key"))
		m.Write([]byte(body))
		return "sha256=" + hex.EncodeToString(m.Sum(nil))
	}
	push := func(from, body, sig string) answer {
		return post(t, h.url+"/hooks/push", from, body, "X-GitHub-Event", "push", "X-Hub-Signature-256", sig)
	}
	dated := func(at time.Time) string {
		return fmt.Sprintf(`{"ref":"refs/heads/main","after":"%d","repository":{"clone_url":"https://github.com/acme/other.git","pushed_at":%d}}`, at.UnixNano(), at.Unix())
	}
	body := dated(time.Now())
	if a := push("", body, sign(body)); a.status != 202 {
		t.Fatalf("a signed notification: %d %s", a.status, a.body)
	}
	if a := push("", body, sign(body)); a.status != 409 || !strings.Contains(a.body, "received already") {
		t.Errorf("the same notification again: %d %s", a.status, a.body)
	}
	old := dated(time.Now().Add(-10 * time.Minute))
	if a := push("", old, sign(old)); a.status != 401 || !strings.Contains(a.body, "pushed_at") {
		t.Errorf("a notification of a push 10 minutes ago: %d %s", a.status, a.body)
	}
	undated := `{"ref":"refs/heads/main","repository":{"clone_url":"https://github.com/acme/other.git"}}`
	if a := push("", undated, sign(undated)); a.status != 401 || !strings.Contains(a.body, "pushed_at") {
		t.Errorf("a signed notification without a time: %d %s", a.status, a.body)
	}

	// From one address: ten wrong signatures, then 429 with Retry-After,
	// even for a right one; another address is not held back.
	for i := range 10 {
		if a := push("127.0.0.2", body, "sha256=00"); a.status != 401 {
			t.Fatalf("wrong signature %d: %d %s", i+1, a.status, a.body)
		}
	}
	fresh := dated(time.Now())
	a := push("127.0.0.2", fresh, sign(fresh))
	if a.status != 429 || a.header.Get("Retry-After") == "" || !strings.Contains(a.body, "resource_unavailable") {
		t.Fatalf("past the failed-auth budget: %d %v %s", a.status, a.header, a.body)
	}
	if a := push("127.0.0.3", fresh, sign(fresh)); a.status != 202 {
		t.Fatalf("another address: %d %s", a.status, a.body)
	}
}

// TestProblemCatalog: every problem has instance, trace_id and retryable;
// one a retry cannot help says x-should-retry: false, and an
// Idempotency-Key used with another body is such a conflict.
func TestProblemCatalog(t *testing.T) {
	h := runsServer(t, 1, `true`)
	check := func(status int, hdr http.Header, b []byte, wantStatus int, wantRetry bool) {
		t.Helper()
		var p map[string]any
		json.Unmarshal(b, &p)
		if status != wantStatus || p["instance"] == nil || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(fmt.Sprint(p["trace_id"])) ||
			p["retryable"] != wantRetry || (hdr.Get("X-Should-Retry") == "false") == wantRetry {
			t.Fatalf("%d %v %s, want %d retryable %v", status, hdr, b, wantStatus, wantRetry)
		}
	}
	do := func(method, path, body string, hdrs ...string) (int, http.Header, []byte) {
		req, _ := http.NewRequest(method, h.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+runsKey)
		for i := 0; i+1 < len(hdrs); i += 2 {
			req.Header.Set(hdrs[i], hdrs[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	s, hd, b := do("GET", "/v1/agent/runs/run_nope", "")
	check(s, hd, b, 404, false)
	if !strings.Contains(string(b), `"instance":"/v1/agent/runs/run_nope"`) {
		t.Fatalf("instance: %s", b)
	}
	s, hd, b = do("POST", "/v1/agent/runs", `{}`)
	check(s, hd, b, 400, false)
	do("POST", "/v1/agent/runs", `{"prompt":"a"}`, "Idempotency-Key", "k")
	s, hd, b = do("POST", "/v1/agent/runs", `{"prompt":"b"}`, "Idempotency-Key", "k")
	check(s, hd, b, 409, false)
}
