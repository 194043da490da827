package server_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDashboardLinks walks every page of the dashboard, as an admin key
// and as a runs key, over a factory with something on every page (the
// v1alpha1 example, webhooks with a paged delivery log, an unrevealed
// secret, runs with an attachment, a task): every link, script, fragment and
// event stream a page names answers 200, 302 or 303, and no page holds a
// webhook's secret.
func TestDashboardLinks(t *testing.T) {
	root := t.TempDir()
	copyTree(t, filepath.Join("..", "..", "examples", "v1alpha1"), root)
	// Its deploy automation names the webhook by the UID the example's
	// setup imports: here it names the UID the webhook gets.
	deployFailed, err := os.ReadFile(filepath.Join(root, "automations", "deploy-failed", "automation.md"))
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(root, "automations", "deploy-failed"))
	writeTree(t, root, map[string]string{"webhooks/ci.yaml": "authMode: token\n", "webhooks/other.yaml": "authMode: token\n"})
	h := runsServerWith(t, root)
	if _, err := h.c.CreateSecret(context.Background(), "deploys-signing-secret", nil, false); err != nil {
		t.Fatal(err)
	}
	ci := h.hook("ci") // reveals its secret, which no page may show
	writeTree(t, root, map[string]string{"automations/deploy-failed/automation.md": strings.Replace(string(deployFailed),
		"wh_widgets0deploys0000001", webhookUID(h, "deploys"), 1), "automations/ci/automation.md": "---\nagent: builder\ntriggers:\n  - provider: webhook\n    event: received\n" +
		"    filter:\n      webhook_ids: [" + ci.uid + "]\n---\nLook at <it>.\n"})
	if st, err := h.c.SyncFactory(context.Background(), h.status("acme").UID); err != nil || !st.Ready {
		t.Fatal(err, st)
	}
	for i := 0; i < 30; i++ { // more than a page of the log
		if a := post(t, ci.url, "", fmt.Sprintf(`{"n": %d}`, i), "Authorization", "Bearer "+ci.secret); a.status != 202 {
			t.Fatalf("delivery %d: %d", i, a.status)
		}
	}
	code, body := call(t, h, "POST", "/v1/agent/runs", map[string]any{"prompt": "with a file",
		"attachments": []map[string]string{{"file_name": "notes.txt", "mime_type": "text/html", "data": base64.StdEncoding.EncodeToString([]byte("<script>1</script>"))}}})
	if code != 200 {
		t.Fatalf("a run with an attachment: %d %s", code, body)
	}
	fac := h.status("acme").UID
	_, conv := dispatchOnly(t, h, fac)
	if code, body := call(t, h, "POST", "/v1/factory/"+fac+"/tasks", map[string]any{"conversation_id": conv, "title": "A task"}); code != 200 {
		t.Fatalf("a task: %d %s", code, body)
	}
	for _, key := range []string{adminKey, runsKey} {
		as := map[string]string{adminKey: "admin", runsKey: "runs"}[key]
		c := signIn(t, h, key)
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		seen := walk(t, c, h.url, "/ui/", ci.secret)
		for _, must := range []string{"/ui/definition", "/ui/webhooks", "/ui/automations", "/ui/runs", "/ui/schedules", "/ui/assets/app.js",
			"/ui/webhooks/" + ci.uid + "/deliveries", "/v1/events?factory_uid=", "/ui/runs/run_", "/ui/tasks", "/ui/inbox", "/ui/tasks/board?factory_uid=" + fac,
			"/ui/factories/" + fac + "/tasks/task_", "/ui/inbox?resolved=1"} {
			if !hasPrefixIn(seen, must) {
				t.Errorf("as %s: no page links to %s", as, must)
			}
		}
		if !hasPrefixIn(seen, "/ui/webhooks/"+ci.uid+"?before=") {
			t.Errorf("as %s: the delivery log of 30 has no link to older deliveries", as)
		}
		if revealLink := strings.Contains(strings.Join(keys(seen), " "), "/reveal"); revealLink != (key == adminKey) {
			t.Errorf("as %s: a link to reveal a secret: %v", as, revealLink)
		}
		checkAttachment(t, c, h, seen)
		t.Logf("as %s: %d URLs", as, len(seen))
	}
}

// checkAttachment: the run page links to its attachment, which the
// session may download, as a download: it claims to be HTML, and must not
// run as the dashboard's page.
func checkAttachment(t *testing.T, c *http.Client, h *harness, seen map[string]bool) {
	t.Helper()
	for u := range seen {
		if !strings.HasSuffix(u, "/attachments/notes.txt") {
			continue
		}
		resp, err := c.Get(h.url + u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") ||
			resp.Header.Get("Content-Security-Policy") != "sandbox" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s: %d %v", u, resp.StatusCode, resp.Header)
		}
		return
	}
	t.Fatal("no page links to the run's attachment")
}

// linkAttr finds what a page asks the browser to fetch or go to.
var linkAttr = regexp.MustCompile(`(?:href|src|hx-get|sse-connect)="([^"]*)"`)

// walk visits every same-site URL reachable from start, and fails on an
// answer other than 200, 302 or 303, or a page that holds secret.
func walk(t *testing.T, c *http.Client, base, start, secret string) map[string]bool {
	t.Helper()
	seen := map[string]bool{start: true}
	queue := []string{start}
	for len(queue) > 0 && len(seen) < 400 {
		path := queue[0]
		queue = queue[1:]
		status, ctype, body := fetch(t, c, base+path)
		if status != 200 && status != 302 && status != 303 {
			t.Fatalf("%s: %d\n%s", path, status, body)
		}
		if secret != "" && strings.Contains(body, secret) {
			t.Fatalf("%s shows a webhook's secret", path)
		}
		if !strings.HasPrefix(ctype, "text/html") {
			continue
		}
		for _, m := range linkAttr.FindAllStringSubmatch(body, -1) {
			u := html.UnescapeString(m[1])
			if !strings.HasPrefix(u, "/") || strings.HasPrefix(u, "//") || seen[u] {
				continue
			}
			seen[u] = true
			queue = append(queue, u)
		}
	}
	return seen
}

// fetch GETs a URL; an event stream is read only up to its headers.
func fetch(t *testing.T, c *http.Client, url string) (status int, ctype, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	defer resp.Body.Close()
	ctype = resp.Header.Get("Content-Type")
	if strings.HasPrefix(ctype, "text/event-stream") {
		return resp.StatusCode, ctype, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, ctype, string(b)
}

func hasPrefixIn(m map[string]bool, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// copyTree copies a directory's files.
func copyTree(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(to, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// webhookUID is the UID of a webhook of factory acme.
func webhookUID(h *harness, name string) string {
	for _, w := range h.status("acme").Webhooks {
		if w.Name == name {
			return w.UID
		}
	}
	h.t.Fatalf("no webhook %s", name)
	return ""
}
