package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"factory/internal/codehost"
	"factory/internal/codehost/github"
	"factory/internal/codehost/github/githubtest"
	"factory/internal/reconciler/gitsource"
	"factory/internal/server"
)

// TestDefinitionCheck: a pull request on the repository a factory is
// applied from gets a warp/factory-config check run on its head commit:
// failure, with an annotation at the error's file and line, for an
// invalid change; success, with the plan's summary, for a valid one. The
// factory itself keeps serving what it applied.
func TestDefinitionCheck(t *testing.T) {
	f := githubtest.New(t)
	tree := map[string]string{
		"factory.yaml":         "schemaVersion: v1alpha1\nname: Acme\nrepositories:\n  - owner: acme\n    name: factory\nagentDefaults:\n  model: auto\n",
		"agents/lead/agent.md": "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"webhooks/github.yaml": "authMode: signature\nsignatureScheme: github\nsecretName: gh\n",
	}
	f.AddRepo("acme", "factory", tree)
	app, err := github.New(f.AppID, f.PrivateKey, f.URL)
	if err != nil {
		t.Fatal(err)
	}
	hosts := &codehost.Hosts{GitHub: app}
	cred := func() ([]byte, error) {
		tok, err := app.Token(context.Background(), []codehost.Repo{{Host: codehost.GitHub, Path: "acme/factory"}})
		return []byte("x-access-token:" + tok.Value), err
	}
	src := &gitsource.Source{URL: f.CloneURL("acme", "factory"), Ref: "main", Credential: cred}
	h := startConfigured(t, func(c *server.Config) { c.CodeHosts = hosts }, withSecrets(t, map[string]string{"gh": ghSecret}),
		server.FactorySource{Name: "acme", Source: src, Interval: time.Hour})
	hook := h.status("acme").Webhooks[0].IngressURL

	bad := f.Commit("acme", "factory", "broken", map[string]string{"webhooks/ci.yaml": "authMode: bearer\nsecretName: ci\n"})
	check := prCheck(t, f, hook, "d-1", 3, bad)
	if check.Conclusion != "failure" || len(check.Annotations) == 0 || check.Name != server.DefaultCheckName {
		t.Fatalf("an invalid change's check: %+v", check)
	}
	a := check.Annotations[0]
	if a["path"] != "webhooks/ci.yaml" || a["annotation_level"] != "failure" || !strings.Contains(a["message"].(string), "authMode") {
		t.Errorf("annotation %v", a)
	}
	good := f.Commit("acme", "factory", "fine", map[string]string{"webhooks/ci.yaml": "authMode: token\nsecretName: gh\n"})
	check = prCheck(t, f, hook, "d-2", 4, good)
	if check.Conclusion != "success" || !strings.Contains(check.Summary, "1 to create") || !strings.Contains(check.Summary, "| + | webhook | ci |") {
		t.Fatalf("a valid change's check: %+v\n%s", check, check.Summary)
	}
	if st := h.status("acme"); !st.Ready || !strings.HasPrefix(st.Revision, "main@") {
		t.Errorf("the factory after the checks: %+v", st)
	}
}

// prCheck posts a pull request's opened event at head and waits for the
// check run on it.
func prCheck(t *testing.T, f *githubtest.Fake, hook, id string, number int, head string) githubtest.CheckRun {
	t.Helper()
	p := githubtest.Payload(t, "pull_request", "opened", "acme", "factory", nil)
	pr := p["pull_request"].(map[string]any)
	pr["number"] = number
	pr["head"].(map[string]any)["sha"] = head
	body, _ := json.Marshal(p)
	ghPost(t, hook, "pull_request", id, string(body))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var found *githubtest.CheckRun
		f.Snapshot(func() {
			for _, c := range f.Checks {
				if c.HeadSHA == head {
					c := *c
					found = &c
				}
			}
		})
		if found != nil {
			return *found
		}
		if time.Now().After(deadline) {
			t.Fatalf("no check run on %s", head)
		}
	}
}
