package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/client"
	"factory/internal/codehost"
	"factory/internal/codehost/github"
	"factory/internal/codehost/github/githubtest"
	"factory/internal/reconciler"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/store"
	"factory/internal/testbin"
	"factory/internal/writeback"
)

// codeHostServer serves a v1alpha1 factory of acme/widgets whose agent is
// the demo agent over ACP, with a GitHub App on the fake GitHub: runs get
// the repository and report back. It returns the harness, the webhook's
// ingress URL, and the data directory.
func codeHostServer(t *testing.T, f *githubtest.Fake) (*harness, string, string) {
	t.Helper()
	return codeHostServerWith(t, f, "")
}

// codeHostServerWith is codeHostServer with more of factory.yaml.
func codeHostServerWith(t *testing.T, f *githubtest.Fake, settings string) (*harness, string, string) {
	t.Helper()
	return codeHostServerTree(t, f, map[string]string{
		"factory.yaml":         "schemaVersion: v1alpha1\nname: Widgets\nrepositories:\n  - owner: acme\n    name: widgets\nagentDefaults:\n  model: auto\n" + settings,
		"agents/lead/agent.md": "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"webhooks/github.yaml": "authMode: signature\nsignatureScheme: github\nsecretName: gh\n",
		"automations/fix/automation.md": "---\ntriggers:\n  - provider: github\n    event: issue_created\n  - provider: github\n    event: issue_mentioned\n" +
			"---\nFix the issue and open a pull request.\n",
	})
}

// codeHostServerTree is codeHostServer with a tree of the caller's (its
// GitHub webhook named github, its secret gh).
func codeHostServerTree(t *testing.T, f *githubtest.Fake, tree map[string]string) (*harness, string, string) {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, tree)
	app, err := github.New(f.AppID, f.PrivateKey, f.URL)
	if err != nil {
		t.Fatal(err)
	}
	hosts := &codehost.Hosts{GitHub: app}
	bin := testbin.Factory(t)
	var data string
	rp := &writeback.Reporter{Hosts: hosts, Log: slog.New(slog.DiscardHandler), Backoff: []time.Duration{50 * time.Millisecond}}
	h := startConfigured(t, func(c *server.Config) { c.CodeHosts = hosts }, func(s *store.Store, dir string) *runs.Manager {
		data = dir
		kr, err := secrets.LoadKeyring(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := secrets.Create(s, kr, "gh", []byte(ghSecret), false, time.Now()); err != nil {
			t.Fatal(err)
		}
		cfg := runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "demo", Log: slog.New(slog.DiscardHandler),
			Environments: map[string]runs.Environment{"demo": {Executor: &runtime.ACPExecutor{Command: []string{bin, "demo-agent", "--acp", "--delay", "1ms"}}}}}
		rp.Store = s
		writeback.Configure(&cfg, hosts, s, rp, func(name string) ([]byte, error) { return secrets.Current(s, kr, name) })
		return runs.NewManager(cfg)
	}, server.FactorySource{Name: "acme", Source: reconciler.DirSource{Root: root}, Interval: time.Hour})
	rp.PublicURL = h.url
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go rp.Run(ctx)
	return h, h.status("acme").Webhooks[0].IngressURL, data
}

// TestIssueToPullRequest is the factory's loop on GitHub, over loopback
// and real processes: an issue opened on acme/widgets starts a run whose
// workspace is a clone of the repository (the default branch, on the
// run's own branch); the demo agent commits, pushes and opens a pull
// request; the issue gets one comment, made when the run starts and edited
// to its end (never a second), with the pull request; the pull request is
// the run's PULL_REQUEST artifact, its status following GitHub's events; a
// comment on the same issue continues the same run and gets 👀; no token
// is left anywhere (the workspace's .git, the store, the timeline).
func TestIssueToPullRequest(t *testing.T) {
	f := githubtest.New(t)
	f.AddRepo("acme", "widgets", map[string]string{"README.md": "# Widgets\n"})
	h, hook, data := codeHostServer(t, f)
	opened := githubtest.Payload(t, "issues", "opened", "acme", "widgets", nil)
	opened["issue"].(map[string]any)["number"] = 7
	run := awaitRun(t, h, hook, "issues", "d-1", opened, 1)
	checkFirstTurn(t, f, h, run)

	// A comment that mentions someone on the same issue: the same run.
	comment := githubtest.Payload(t, "issue_comment", "created", "acme", "widgets", func(p map[string]any) bool {
		issue, _ := p["issue"].(map[string]any)
		return issue != nil && issue["pull_request"] == nil
	})
	comment["issue"].(map[string]any)["number"] = 7
	comment["comment"].(map[string]any)["id"] = 555
	comment["comment"].(map[string]any)["body"] = "@factory please also update the docs"
	again := awaitRun(t, h, hook, "issue_comment", "d-2", comment, 2)
	if again.ID != run.ID {
		t.Fatalf("the comment started run %s; the issue's run is %s", again.ID, run.ID)
	}
	f.Snapshot(func() {
		if len(f.Comments) != 1 {
			t.Errorf("%d comments on the issue, want 1 (edited)", len(f.Comments))
		}
		if len(f.Reactions) != 1 || f.Reactions[0].On != "comment" || f.Reactions[0].ID != 555 || f.Reactions[0].Content != "eyes" {
			t.Errorf("reactions %+v", f.Reactions)
		}
	})
	checkPullRequestStatus(t, f, h, hook, run.ID)
	checkNoToken(t, f, data)
}

// awaitRun posts a GitHub event and waits for the run it starts (or
// continues) to end its turns-th turn.
func awaitRun(t *testing.T, h *harness, hook, kind, id string, payload map[string]any, turns int) *factory.Run {
	t.Helper()
	body, _ := json.Marshal(payload)
	did := deliveryID(t, ghPost(t, hook, kind, id, string(body)))
	var run *factory.Run
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		d, err := h.store.Delivery(h.status("acme").Webhooks[0].UID, did)
		if err == nil && len(d.RunIDs) == 1 {
			if run, err = h.store.Run(d.RunIDs[0]); err == nil && run.Turns == turns && run.State.Terminal() && run.ReportComment != "" {
				return run
			}
		}
		if time.Now().After(deadline) {
			evs := []*factory.RunEvent{}
			if run != nil {
				evs, _ = h.store.RunEvents(run.ID)
			}
			b, _ := json.MarshalIndent(evs, "", " ")
			t.Fatalf("delivery %s: %+v %v\nrun %+v\n%s", did, d, err, run, b)
		}
	}
}

// checkFirstTurn: the clone, the branch, the pull request, the comment.
func checkFirstTurn(t *testing.T, f *githubtest.Fake, h *harness, run *factory.Run) {
	t.Helper()
	if run.State != factory.StateSucceeded || run.Origin == nil || run.Origin.WorkItem != "github:acme/widgets#7" {
		t.Fatalf("the run: %s %+v %+v", run.State, run.StatusMessage, run.Origin)
	}
	branch := f.Head("acme", "widgets", run.Branch())
	if branch == "" || branch == f.Head("acme", "widgets", "main") {
		t.Fatalf("branch %s was not pushed", run.Branch())
	}
	var pr *factory.Artifact
	for i, a := range run.Artifacts {
		if a.Type == factory.ArtifactPullRequest {
			pr = &run.Artifacts[i]
		}
	}
	f.Snapshot(func() {
		if len(f.Pulls) != 1 || f.Pulls[0].Head != run.Branch() || f.Pulls[0].Base != "main" {
			t.Fatalf("pull requests %+v", f.Pulls)
		}
		if pr == nil || pr.Data.URL != f.Pulls[0].HTMLURL || pr.Data.Branch != run.Branch() || pr.Data.Status != codehost.PROpen {
			t.Errorf("the run's pull request artifact: %+v", pr)
		}
		if len(f.Comments) != 1 || f.Comments[0].Number != 7 || f.Comments[0].Edits == 0 {
			t.Fatalf("comments %+v", f.Comments)
		}
		body := f.Comments[0].Body
		for _, want := range []string{writeback.Marker(run.ID), "SUCCEEDED", h.url + "/ui/runs/" + run.ID, f.Pulls[0].HTMLURL, run.Branch()} {
			if !strings.Contains(body, want) {
				t.Errorf("the comment lacks %q:\n%s", want, body)
			}
		}
	})
}

// checkPullRequestStatus: the pull request merged on GitHub reads merged
// on the run.
func checkPullRequestStatus(t *testing.T, f *githubtest.Fake, h *harness, hook, runID string) {
	t.Helper()
	pr := f.SetPull(1, "closed", true)
	closed := githubtest.Payload(t, "pull_request", "closed", "acme", "widgets", nil)
	p := closed["pull_request"].(map[string]any)
	p["merged"], p["html_url"], p["number"] = true, pr.HTMLURL, pr.Number
	body, _ := json.Marshal(closed)
	ghPost(t, hook, "pull_request", "d-3", string(body))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, _ := h.store.Run(runID)
		for _, a := range r.Artifacts {
			if a.Type == factory.ArtifactPullRequest && a.Data.Status == codehost.PRMerged {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pull request's status on the run: %+v", r.Artifacts)
		}
	}
}

// checkNoToken: no token the fake minted is in any file of the data
// directory (the store, the workspaces, their .git) or the timelines.
func checkNoToken(t *testing.T, f *githubtest.Fake, data string) {
	t.Helper()
	tokens := f.TokensMinted()
	if len(tokens) == 0 {
		t.Fatal("no token was minted")
	}
	_ = filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, tk := range tokens {
			if strings.Contains(string(b), tk.Value) {
				t.Errorf("%s holds a token", p)
			}
		}
		return nil
	})
}

// TestCreatorCredentials: a factory whose credentialStrategy is CREATOR
// reaches its repositories with the token of the person who created the
// run (the managed secret their API key names): the clone, the push and
// the pull request are theirs; a run created by a key that names no token
// ends FAILED, external_authentication_required, before its agent starts.
func TestCreatorCredentials(t *testing.T) {
	f := githubtest.New(t)
	f.AddRepo("acme", "widgets", map[string]string{"README.md": "# Widgets\n"})
	h, _, _ := codeHostServerWith(t, f, "credentialStrategy: CREATOR\n")
	alice := f.UserToken("acme")
	ctx := context.Background()
	if _, err := h.c.CreateSecret(ctx, "alice-github", []byte(alice), false); err != nil {
		t.Fatal(err)
	}
	withToken, err := h.c.CreateAPIKeyWith(ctx, factory.APIKeyRequest{Name: "alice", Scope: factory.ScopeRuns, GitHubTokenSecret: "alice-github"})
	if err != nil {
		t.Fatal(err)
	}
	without, err := h.c.CreateAPIKey(ctx, "bob", factory.ScopeRuns)
	if err != nil {
		t.Fatal(err)
	}
	uid := h.status("acme").UID
	dispatch := func(key string) *factory.Run {
		var out struct {
			RunID string `json:"run_id"`
		}
		c := client.New(h.url, key)
		if err := c.Do(ctx, "POST", "/v1/factory/"+uid+"/runs", strings.NewReader(`{"prompt":"Open a pull request."}`), &out); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			r, err := h.store.Run(out.RunID)
			if err == nil && r.State.Terminal() {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s: %+v %v", out.RunID, r, err)
			}
		}
	}
	r := dispatch(withToken.Key)
	f.Snapshot(func() {
		if r.State != factory.StateSucceeded || len(f.Pulls) != 1 || f.Pulls[0].TokenReceived != alice {
			t.Fatalf("alice's run: %s %+v; pulls %+v", r.State, r.StatusMessage, f.Pulls)
		}
	})
	r = dispatch(without.Key)
	if r.State != factory.StateFailed || r.StatusMessage == nil || r.StatusMessage.ErrorCode != runs.CodeExternalAuthenticationRequired || r.StartedAt != nil {
		t.Fatalf("bob's run: %s %+v", r.State, r.StatusMessage)
	}
}
