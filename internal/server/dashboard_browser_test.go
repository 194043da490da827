package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/server"
	"factory/internal/store"
)

// chromium finds Debian's Chromium (make test installs it where it can).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium here (make test installs Debian's chromium package where apt can): the dashboard's browser tests need one")
	return ""
}

// tab is a headless Chromium page. Now and then (about one test run in
// ten, under load) chromedp loses its DevTools connection to the browser
// while a page updates itself; it then cancels the page's context, and
// every later step says "context canceled". A run page being watched is
// then opened again in a new browser (recover), and the test says so.
type tab struct {
	t        *testing.T
	ctx      context.Context
	cancel   func()
	lastURL  string // the run page last read, for recover
	reopened int
	life     time.Duration // how long a browser may live
}

// browser opens a tab for 25 s; the test's cleanup closes it.
func browser(t *testing.T) *tab { return browserFor(t, 25*time.Second) }

// browserFor opens a tab that lives d at most.
func browserFor(t *testing.T, d time.Duration) *tab {
	t.Helper()
	b := &tab{t: t, life: d}
	b.ctx, b.cancel = openBrowser(t, d)
	t.Cleanup(func() { b.cancel() })
	return b
}

// openBrowser starts Chromium and opens a page in it, for d at most.
func openBrowser(t *testing.T, d time.Duration) (context.Context, func()) {
	t.Helper()
	// Chromium's output is drained for as long as it runs. Without a
	// writer, chromedp closes the pipe once it has read the DevTools URL,
	// and the browser's next line of log (it logs now and then: D-Bus,
	// event streams closing) meets a closed pipe: SIGPIPE ends the browser
	// mid-test, and every later step says "context canceled".
	var out io.Writer = io.Discard
	if os.Getenv("FACTORY_TEST_LOG") != "" {
		out = os.Stderr
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.Flag("headless", "new"),
		chromedp.CombinedOutput(out))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	var lastMu sync.Mutex
	var last []string
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithDebugf(func(f string, a ...any) {
		m := fmt.Sprintf(f, a...)
		if len(m) > 600 {
			m = m[:600]
		}
		lastMu.Lock()
		last = append(last, m)
		if len(last) > 6 {
			last = last[1:]
		}
		lastMu.Unlock()
	}))
	t.Cleanup(func() {
		if t.Failed() {
			lastMu.Lock()
			t.Logf("the last messages with the browser:\n%s", strings.Join(last, "\n"))
			lastMu.Unlock()
		}
	})
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *inspector.EventDetached:
			t.Logf("the page's inspector detached: %s", e.Reason)
		case *inspector.EventTargetCrashed:
			t.Logf("the page crashed")
		}
	})
	chromedp.ListenBrowser(ctx, func(ev any) {
		switch e := ev.(type) {
		case *target.EventTargetDestroyed:
			t.Logf("target destroyed: %s", e.TargetID)
		case *target.EventDetachedFromTarget:
			t.Logf("detached from target: %s", e.SessionID)
		case *target.EventTargetCrashed:
			t.Logf("target crashed: %s %s", e.TargetID, e.Status)
		}
	})
	ctx, cancelTimeout := context.WithTimeout(ctx, d)
	return ctx, func() { cancelTimeout(); cancelCtx(); cancelAlloc() }
}

// recover opens the dashboard again in a new browser, signed in, at url.
func (b *tab) recover(h *harness, url string) error {
	b.reopened++
	b.t.Logf("chromedp lost its connection to the browser; opening %s again in a new one", url)
	b.cancel()
	b.ctx, b.cancel = openBrowser(b.t, b.life)
	return chromedp.Run(b.ctx, chromedp.Navigate(h.url+"/ui/login"), chromedp.WaitVisible("#key", chromedp.ByID),
		chromedp.SendKeys("#key", adminKey, chromedp.ByID), chromedp.Click("#signin", chromedp.ByID), chromedp.WaitVisible("h2", chromedp.ByQuery),
		chromedp.Navigate(url), chromedp.WaitVisible("#runstate", chromedp.ByID))
}

// TestDashboardInABrowser drives the dashboard in a real browser against a
// real server: a wrong key and a right one; the Enabled toggle (ingress
// answers 404 while the webhook is disabled); a delivery appearing in the
// open delivery log without a reload; the run it started reaching
// SUCCEEDED on its page without a reload; a prompt holding <script> shown
// as text and never run.
func TestDashboardInABrowser(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"webhooks/ci.yaml": "authMode: token\n"})
	h := startWith(t, func(s *store.Store, data string) *runs.Manager {
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "sh", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", "sleep 3; echo done"}}}}})
	}, server.FactorySource{Name: "acme", Source: reconciler.DirSource{Root: root}, Interval: time.Hour})
	ci := h.hook("ci")
	writeTree(t, root, map[string]string{"automations/all.md": "---\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [" +
		ci.uid + "]\n---\nHandle it. <b>bold</b><script>window.pwned = 1</script>\n",
		"automations/failed-only.md": "---\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [" + ci.uid +
			"]\n      payload:\n        status: [failed]\n---\nOnly failures.\n"})
	if st, err := h.c.SyncFactory(context.Background(), h.status("acme").UID); err != nil || !st.Ready {
		t.Fatal(err, st)
	}
	b := browser(t)
	ctx := b.ctx
	var text string
	// A wrong key, then the right one.
	err := chromedp.Run(ctx,
		chromedp.Navigate(h.url+"/ui/"),
		chromedp.WaitVisible("#key", chromedp.ByID),
		chromedp.SendKeys("#key", "fk_not_a_key", chromedp.ByID),
		chromedp.Click("#signin", chromedp.ByID),
		chromedp.WaitVisible("#error", chromedp.ByID),
		chromedp.Text("#error", &text, chromedp.ByID),
	)
	if err != nil || !strings.Contains(text, "unknown or revoked") {
		t.Fatalf("a wrong key: %v %q", err, text)
	}
	err = chromedp.Run(ctx,
		chromedp.SendKeys("#key", adminKey, chromedp.ByID),
		chromedp.Click("#signin", chromedp.ByID),
		chromedp.WaitVisible("h2", chromedp.ByQuery),
		chromedp.Text("main", &text, chromedp.ByQuery),
	)
	if err != nil || !strings.Contains(text, "acme") || !strings.Contains(text, ci.uid) {
		t.Fatalf("the overview: %v %q", err, text)
	}
	checkToggle(t, ctx, h, ci)
	runPage := checkLiveDeliveryAndRun(t, b, h, ci)
	checkTestFilter(t, b.ctx, h)
	checkFollowUpAndCancel(t, b, h, runPage)
	// A run started from the Runs page, followed to its end.
	err = chromedp.Run(b.ctx, chromedp.Navigate(h.url+"/ui/runs"), chromedp.WaitVisible("#prompt", chromedp.ByID),
		chromedp.SendKeys("#prompt", "Started from the dashboard", chromedp.ByID), chromedp.Click("#start", chromedp.ByID),
		chromedp.WaitVisible("#runstate", chromedp.ByID), chromedp.Location(&b.lastURL))
	if err != nil {
		t.Fatal(err)
	}
	waitPageState(t, b, h, "INPROGRESS")
	waitPageState(t, b, h, "SUCCEEDED")
}

// pageState is the state the open run page shows, "" while it has none
// (or is loading). An evaluation that fails while the browser is still
// there is tried again for up to two seconds: the page replaces its live
// part on every event, and navigates after a form. A lost browser is
// replaced, at most twice, on the run page the test opened last
// (b.lastURL).
func pageState(b *tab, h *harness) (string, error) {
	var s string
	var err error
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b.ctx.Err() != nil {
			if b.reopened >= 2 || b.lastURL == "" {
				break
			}
			if err = b.recover(h, b.lastURL); err != nil {
				return "", err
			}
		}
		if err = chromedp.Run(b.ctx, chromedp.Evaluate(`(document.getElementById("runstate") || {}).textContent || ""`, &s)); err == nil {
			return s, nil
		}
	}
	return "", fmt.Errorf("reading the run page's state: %w (the browser's context: %v)", err, b.ctx.Err())
}

// waitPageState waits until the open run page shows a state.
func waitPageState(t *testing.T, b *tab, h *harness, want string) {
	t.Helper()
	var s string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(150 * time.Millisecond) {
		var err error
		if s, err = pageState(b, h); err != nil {
			t.Fatal(err)
		}
		if s == want {
			return
		}
	}
	t.Fatalf("the run page shows %q, never %q", s, want)
}

// checkFollowUpAndCancel: a follow-up sent from the run's page continues
// the run; Cancel, on the page, cancels it.
func checkFollowUpAndCancel(t *testing.T, b *tab, h *harness, runPage string) {
	t.Helper()
	b.lastURL = h.url + runPage
	err := chromedp.Run(b.ctx, chromedp.Navigate(h.url+runPage), chromedp.WaitVisible("#message", chromedp.ByID),
		chromedp.SendKeys("#message", "also label it", chromedp.ByID), chromedp.Click("#send", chromedp.ByID))
	if err != nil {
		t.Fatal(err)
	}
	waitPageState(t, b, h, "INPROGRESS") // the follow-up's turn
	if err := chromedp.Run(b.ctx, chromedp.WaitVisible("#cancel", chromedp.ByID), chromedp.Click("#cancel", chromedp.ByID)); err != nil {
		t.Fatal(err)
	}
	waitPageState(t, b, h, "CANCELLED")
}

// checkToggle: disabling the webhook makes ingress answer 404; enabling it
// brings it back.
func checkToggle(t *testing.T, ctx context.Context, h *harness, ci hook) {
	t.Helper()
	var state string
	for _, want := range []struct {
		state  string
		status int
	}{{"suspended", 404}, {"enabled", 202}} {
		err := chromedp.Run(ctx,
			chromedp.Navigate(h.url+"/ui/webhooks/"+ci.uid),
			chromedp.WaitVisible("#toggle", chromedp.ByID),
			chromedp.Click("#toggle", chromedp.ByID),
			chromedp.WaitVisible(`//td[@id="state"][normalize-space()="`+want.state+`"]`, chromedp.BySearch),
			chromedp.Text("#state", &state, chromedp.ByID),
		)
		if err != nil || state != want.state {
			t.Fatalf("toggle: %v %q, want %q", err, state, want.state)
		}
		if a := post(t, ci.url, "", `{"probe":true}`, "Authorization", "Bearer "+ci.secret); a.status != want.status {
			t.Fatalf("ingress while %s: %d, want %d", state, a.status, want.status)
		}
	}
}

// checkLiveDeliveryAndRun: with the webhook page open, a delivery posted
// from outside appears in its log; its run's page shows the run reaching
// SUCCEEDED; the prompt's <script> is text.
func checkLiveDeliveryAndRun(t *testing.T, b *tab, h *harness, ci hook) string {
	t.Helper()
	ctx := b.ctx
	if err := chromedp.Run(ctx, chromedp.Navigate(h.url+"/ui/webhooks/"+ci.uid), chromedp.WaitVisible("#deliveries table", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	id := deliveryID(t, post(t, ci.url, "", `{"n":2}`, "Authorization", "Bearer "+ci.secret, "X-Service-Delivery-Id", "live-1"))
	var runHref string
	wctx, stop := context.WithTimeout(ctx, 10*time.Second)
	err := chromedp.Run(wctx,
		chromedp.WaitVisible(`//tr[contains(., "`+id+`")]//a[starts-with(@href, "/ui/runs/")]`, chromedp.BySearch),
		chromedp.AttributeValue(`//tr[contains(., "`+id+`")]//a[starts-with(@href, "/ui/runs/")]`, "href", &runHref, nil, chromedp.BySearch),
	)
	stop()
	if err != nil || !strings.HasPrefix(runHref, "/ui/runs/run_") {
		t.Fatalf("the delivery did not appear in the open log: %v %q", err, runHref)
	}
	screenshot(t, ctx, "dashboard-webhook.png")
	var states []string
	var prompt string
	var pwned bool
	var seenAt time.Time
	reopened := b.reopened
	b.lastURL = h.url + runHref
	err = chromedp.Run(ctx, chromedp.Navigate(h.url+runHref), chromedp.WaitVisible("#runstate", chromedp.ByID))
	for deadline := time.Now().Add(20 * time.Second); err == nil; time.Sleep(150 * time.Millisecond) {
		// Read in one script: htmx replaces the node every half second.
		var s string
		if s, err = pageState(b, h); err != nil {
			break
		}
		if s == "" {
			continue
		}
		if len(states) == 0 || states[len(states)-1] != s {
			states = append(states, s)
		}
		if s == string(factory.StateSucceeded) {
			seenAt = time.Now()
			break
		}
		if time.Now().After(deadline) {
			break
		}
	}
	if err == nil {
		// In one script: the live part is replaced on each event.
		err = chromedp.Run(b.ctx, chromedp.Evaluate(`document.getElementById("prompt").textContent`, &prompt), chromedp.Evaluate(`window.pwned === 1`, &pwned))
	}
	if err != nil || states[len(states)-1] != "SUCCEEDED" || len(states) < 2 {
		t.Fatalf("the run page did not follow the run live: %v %v", err, states)
	}
	// The end reaches the open page through its event stream, well before
	// the fallback poll (every 5 s) would bring it.
	run, err := h.c.GetRun(context.Background(), strings.TrimPrefix(runHref, "/ui/runs/"))
	// (Unless the browser had to be opened again meanwhile: that takes
	// its own seconds.)
	if err != nil || run.FinishedAt == nil {
		t.Fatalf("the run after its end: %v %+v", err, run)
	}
	if b.reopened == reopened && seenAt.Sub(*run.FinishedAt) > 2*time.Second {
		t.Fatalf("the page showed the run's end %v after it ended (%v)", seenAt.Sub(*run.FinishedAt), err)
	}
	t.Logf("the page showed the run's end %v after it ended", seenAt.Sub(*run.FinishedAt))
	if !strings.Contains(prompt, "<script>window.pwned = 1</script>") || pwned {
		t.Fatalf("the prompt was not shown as text: %q (ran: %v)", prompt, pwned)
	}
	screenshot(t, b.ctx, "dashboard-run.png")
	return runHref
}

// TestDashboardAccess: a page without a session goes to sign-in; a POST
// without the CSRF token is 403; a runs key sees no toggle and a forged
// toggle is refused; every page answers 200, 302 or 303 to both kinds of
// key, with the security headers.
func TestDashboardAccess(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"webhooks/ci.yaml": "authMode: token\n", "webhooks/other.yaml": "authMode: token\n"})
	h := runsServerWith(t, root)
	ci := h.hook("ci")
	for _, key := range []string{adminKey, runsKey} {
		c := signIn(t, h, key)
		for _, path := range []string{"/", "/ui/", "/ui/webhooks/" + ci.uid, "/ui/webhooks/" + ci.uid + "/deliveries", "/ui/runs", "/ui/runs?state=SUCCEEDED&q=x", "/ui/schedules", "/ui/tasks", "/ui/inbox",
			"/ui/assets/htmx.min.js", "/ui/assets/app.css"} {
			resp, err := c.Get(h.url + path)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s as %s: %v %v", path, key[:8], err, resp)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || resp.Header.Get("X-Frame-Options") != "DENY" {
				t.Fatalf("%s: headers %v", path, resp.Header)
			}
			resp.Body.Close()
		}
		page := get(t, h.url+"/ui/webhooks/"+ci.uid) // no session: sign in first
		if !strings.Contains(page.body, `id="key"`) {
			t.Fatalf("a page without a session: %s", page.body)
		}
		resp, _ := c.PostForm(h.url+"/ui/webhooks/"+ci.uid+"/toggle", url.Values{})
		if resp.StatusCode != 403 {
			t.Fatalf("a POST without the CSRF token: %d", resp.StatusCode)
		}
		if key == adminKey {
			checkDeliveryPage(t, h, c, ci)
			checkRevealAndSync(t, h, c)
		}
		if key == runsKey {
			checkSchedulePause(t, h, c)
			resp, _ := c.Get(h.url + "/ui/webhooks/" + ci.uid)
			b, _ := io.ReadAll(resp.Body)
			csrf := between(string(b), `name="csrf" value="`, `"`)
			if strings.Contains(string(b), `id="toggle"`) || csrf == "" {
				t.Fatalf("a runs key sees the toggle (or no token): %s", b)
			}
			for _, action := range []string{"/ui/webhooks/" + ci.uid + "/toggle", "/ui/webhooks/" + ci.uid + "/reveal", "/ui/factories/" + h.status("acme").UID + "/sync"} {
				resp, _ = c.PostForm(h.url+action, url.Values{"csrf": {csrf}})
				if resp.StatusCode != 403 {
					t.Fatalf("a forged %s with a runs key: %d", action, resp.StatusCode)
				}
			}
		}
	}
}

// checkRevealAndSync: an admin reveals a webhook's generated secret from
// its pane, after a confirmation, once (the second time says why not);
// Sync now syncs and says so.
func checkRevealAndSync(t *testing.T, h *harness, c *http.Client) {
	t.Helper()
	uid := webhookUID(h, "other")
	resp, _ := c.Get(h.url + "/ui/webhooks/" + uid)
	b, _ := io.ReadAll(resp.Body)
	csrf := between(string(b), `name="csrf" value="`, `"`)
	if !strings.Contains(string(b), `href="/ui/webhooks/`+uid+`/reveal"`) {
		t.Fatalf("the pane of an unrevealed generated secret offers no reveal: %s", b)
	}
	resp, _ = c.Get(h.url + "/ui/webhooks/" + uid + "/reveal")
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `id="confirm-reveal"`) || strings.Contains(string(b), `id="secret"`) {
		t.Fatalf("the confirmation: %d %s", resp.StatusCode, b)
	}
	var shown []string
	for range 2 {
		resp, _ = c.PostForm(h.url+"/ui/webhooks/"+uid+"/reveal", url.Values{"csrf": {csrf}})
		b, _ = io.ReadAll(resp.Body)
		shown = append(shown, fmt.Sprint(resp.StatusCode, " ", resp.Header.Get("Cache-Control"), " ", between(string(b), `<pre class="secret" id="secret">`, "<"),
			between(string(b), `<p class="error" id="error">`, "<")))
	}
	if !strings.HasPrefix(shown[0], "200 no-store ") || len(shown[0]) < len("200 no-store ")+20 || !strings.Contains(shown[1], "409  the secret of webhook acme/other was already revealed") {
		t.Fatalf("reveal twice: %q", shown)
	}
	resp, _ = c.PostForm(h.url+"/ui/factories/"+h.status("acme").UID+"/sync", url.Values{"csrf": {csrf}})
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `<p class="ok" id="synced">Synced acme.</p>`) {
		t.Fatalf("Sync now: %d %s", resp.StatusCode, b)
	}
}

func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, to)
	return v
}

// signIn signs in with a key, through the sign-in page's form as a
// browser does, and returns a client that keeps the session.
func signIn(t testing.TB, h *harness, key string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(h.url + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	form, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp, err = c.PostForm(h.url+"/ui/login", url.Values{"key": {key}, "csrf": {between(string(form), `name="csrf" value="`, `"`)}})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("sign in: %v %v", err, resp)
	}
	resp.Body.Close()
	return c
}

// runsServerWith serves a factory at root with the admin key and a runs key.
func runsServerWith(t testing.TB, root string) *harness {
	t.Helper()
	return startWith(t, func(s *store.Store, data string) *runs.Manager {
		b := s.NewBatch()
		b.PutAPIKey(runsKey, &factory.APIKey{Name: "ci", Scope: factory.ScopeRuns, Prefix: runsKey[:8], CreatedAt: time.Now()})
		b.Commit()
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "sh", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	}, server.FactorySource{Name: "acme", Source: reconciler.DirSource{Root: root}, Interval: time.Hour})
}

// checkSchedulePause: a schedule made through the API shows on the
// Schedules page, and its Pause form pauses it.
func checkSchedulePause(t *testing.T, h *harness, c *http.Client) {
	t.Helper()
	code, body := call(t, h, "POST", "/v1/agent/schedules", map[string]any{"name": "nightly", "cron_schedule": "0 3 * * *", "prompt": "Summarise"})
	id := between(string(body), `"id":"`, `"`)
	if code != 200 || id == "" {
		t.Fatalf("create a schedule: %d %s", code, body)
	}
	resp, _ := c.Get(h.url + "/ui/schedules")
	b, _ := io.ReadAll(resp.Body)
	csrf := between(string(b), `name="csrf" value="`, `"`)
	if !strings.Contains(string(b), "nightly") || !strings.Contains(string(b), `id="toggle-`+id+`"`) {
		t.Fatalf("the Schedules page: %s", b)
	}
	resp, _ = c.PostForm(h.url+"/ui/schedules/"+id+"/pause", url.Values{"csrf": {csrf}})
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `<td id="state-`+id+`">paused</td>`) {
		t.Fatalf("pause: %d %s", resp.StatusCode, b)
	}
}

// checkTestFilter runs Test filter from the Automations page on the last
// delivery: the catch-all automation would trigger; the one that wants
// status failed would not, and says which key failed.
func checkTestFilter(t *testing.T, ctx context.Context, h *harness) {
	t.Helper()
	st := h.status("acme")
	ds, _, err := h.c.Deliveries(context.Background(), st.Webhooks[0].UID, 1, "")
	if err != nil || len(ds) == 0 {
		t.Fatal(err, ds)
	}
	test := func(a factory.AutomationStatus, input, value, button string) (verdict, result string) {
		t.Helper()
		err := chromedp.Run(ctx,
			chromedp.Navigate(h.url+"/ui/automations"),
			chromedp.Click("#details-"+a.ID+" summary", chromedp.ByQuery),
			chromedp.WaitVisible("#"+input+"-"+a.ID, chromedp.ByID),
			chromedp.SendKeys("#"+input+"-"+a.ID, value, chromedp.ByID),
			chromedp.Click("#"+button+"-"+a.ID, chromedp.ByID),
			chromedp.WaitVisible("#verdict", chromedp.ByID),
			chromedp.Text("#verdict", &verdict, chromedp.ByID),
			chromedp.Text("#result", &result, chromedp.ByID),
		)
		if err != nil {
			t.Fatalf("Test filter of %s: %v", a.Name, err)
		}
		return verdict, result
	}
	for _, a := range st.Automations {
		verdict, keys := test(a, "delivery", ds[0].ID, "test")
		want := map[string]string{"all": "Would trigger", "failed-only": "Would not trigger"}[a.Name]
		if verdict != want || a.Name == "failed-only" && !strings.Contains(keys, "/status") {
			t.Fatalf("Test filter of %s on %s: %q, want %q\n%s", a.Name, ds[0].ID, verdict, want, keys)
		}
		if a.Name != "failed-only" {
			continue
		}
		// A pasted payload, matching and not.
		for payload, want := range map[string]string{`{"status": "failed"}`: "Would trigger", `{"status": "passed"}`: "Would not trigger"} {
			if verdict, keys := test(a, "payload", payload, "test-payload"); verdict != want {
				t.Fatalf("Test filter of %s on the pasted %s: %q, want %q\n%s", a.Name, payload, verdict, want, keys)
			}
		}
	}
}

// screenshot saves the page as PNG into $FACTORY_SCREENSHOTS (the README's
// images are made this way: FACTORY_SCREENSHOTS=docs/images go test
// ./internal/server -run TestDashboardInABrowser); without it, nothing.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("FACTORY_SCREENSHOTS")
	if dir == "" {
		return
	}
	var png []byte
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(1100, 760), chromedp.CaptureScreenshot(&png)); err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", "..", dir) // relative to the repository, not this package
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkDeliveryPage: a delivery's page shows its payload as text (a
// <script> in it is escaped, never markup), and Redeliver makes a new
// delivery that says what it repeats.
func checkDeliveryPage(t *testing.T, h *harness, c *http.Client, ci hook) {
	t.Helper()
	id := deliveryID(t, post(t, ci.url, "", `{"title":"<script>alert(1)</script>"}`, "Authorization", "Bearer "+ci.secret))
	resp, err := c.Get(h.url + "/ui/webhooks/" + ci.uid + "/deliveries/" + id)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	if resp.StatusCode != 200 || strings.Contains(page, "<script>alert") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("the delivery page: %d\n%s", resp.StatusCode, page)
	}
	resp, _ = c.PostForm(h.url+"/ui/deliveries/"+id+"/redeliver", url.Values{"csrf": {between(page, `name="csrf" value="`, `"`)}})
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "Redelivery of</th><td><code>"+id) {
		t.Fatalf("redeliver: %d\n%s", resp.StatusCode, b)
	}
}
