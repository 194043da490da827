package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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
)

// writeTree writes files under root, making folders as needed.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// agentsTree is the factory of TestAgentRunsFromV1Alpha1Tree.
var agentsTree = map[string]string{
	"factory.yaml": "schemaVersion: v1alpha1\nname: Agents\nrepositories:\n  - owner: acme\n    name: api\nsecrets: [GH_TOKEN]\nmcpServers: {local: {command: ./mcp}}\n" +
		"agentDefaults:\n  model: fast-model\n  runner: prep\n",
	"agents/auditor/agent.md":                          "---\nsecrets: [not-created]\n---\nYou audit.\n",
	"agents/lead/agent.md":                             "---\nagentType: FOREMAN\nsecrets: [deploy.key]\n---\nYou are the foreman of acme.\n",
	"agents/builder/agent.md":                          "---\nrunner: broken\nharness:\n  type: oz\n  model: big-model\n---\nYou are the builder.\n",
	"agents/reviewer/agent.md":                         "---\nharness:\n  type: codex\n  reasoningLevel: high\n---\nYou review.\n",
	"agents/builder/skills/release-notes/SKILL.md":     "---\nname: release-notes\ndescription: Notes.\n---\nOne line per change.\n",
	"skills/house-style/SKILL.md":                      "---\nname: house-style\ndescription: Style.\n---\nBranches are factory/<issue>.\n",
	"skills/house-style/scripts/check.sh":              "exit 0\n",
	"runners/prep.yaml":                                "setupCommands:\n  - echo prepared > prepared.txt\n  - test -f .agents/skills/house-style/SKILL.md\nplatform:\n  linux:\n    dockerImage: debian:12\n",
	"runners/broken.yaml":                              "setupCommands:\n  - \"true\"\n  - echo half-way >&2; exit 3\nplatform:\n  linux:\n    dockerImage: debian:12\n",
	"webhooks/ci.yaml":                                 "authMode: token\n",
	"agents/builder/skills/release-notes/template.txt": "## Changes\n",
}

// TestAgentRunsFromV1Alpha1Tree drives a v1alpha1 factory through a real
// server and real agent processes: a custom-webhook delivery starts a run of
// the automation's agent (the foreman by default) whose prompt starts with
// the agent's prompt, whose workspace holds the agent's skills and what the
// runner's setup commands made; a failing setup command ends a run FAILED
// (environment_setup_failed) before its agent starts; a harness no
// environment runs fails the run (harness_not_configured).
func TestAgentRunsFromV1Alpha1Tree(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, agentsTree)
	var manager *runs.Manager
	agent := `cat PROMPT.md > seen.txt; echo "$FACTORY_AGENT $FACTORY_HARNESS $FACTORY_MODEL $GH_TOKEN $DEPLOY_KEY" > env.txt; ls .agents/skills > skills.txt`
	h := startWith(t, func(s *store.Store, data string) *runs.Manager {
		kr, err := secrets.LoadKeyring(data)
		if err != nil {
			t.Fatal(err)
		}
		for name, value := range map[string]string{"GH_TOKEN": "gh-123", "deploy.key": "dk-456"} {
			if _, _, err := secrets.Create(s, kr, name, []byte(value), false, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		manager = runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "sh", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", agent}}}},
			SecretValue:  func(name string) ([]byte, error) { return secrets.Current(s, kr, name) }})
		return manager
	}, server.FactorySource{Name: "acme", Source: reconciler.DirSource{Root: root}, Interval: time.Hour})
	ctx := context.Background()
	ci := h.hook("ci")
	for name, agent := range map[string]string{"by-foreman": "", "by-builder": "builder", "by-reviewer": "reviewer", "by-auditor": "auditor"} {
		front := "---\n"
		if agent != "" {
			front += "agent: " + agent + "\n"
		}
		writeTree(t, root, map[string]string{"automations/" + name + "/automation.md": front + "triggers:\n  - provider: webhook\n    event: received\n    filter:\n" +
			"      webhook_ids: [" + ci.uid + "]\n      payload:\n        kind: [" + name + "]\n---\nHandle " + name + ".\n"})
	}
	if st, err := h.c.SyncFactory(ctx, h.status("acme").UID); err != nil || !st.Ready {
		t.Fatalf("%v %+v", err, st)
	}
	run := func(kind string) *factory.Run {
		t.Helper()
		id := deliveryID(t, post(t, ci.url, "", `{"kind":"`+kind+`"}`, "Authorization", "Bearer "+ci.secret))
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			d, err := h.c.Delivery(ctx, ci.uid, id)
			if err == nil && len(d.RunIDs) == 1 {
				if r, err := h.store.Run(d.RunIDs[0]); err == nil && r.State.Terminal() {
					return r
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no finished run: %+v", kind, d)
			}
		}
	}
	read := func(r *factory.Run, name string) string {
		b, _ := os.ReadFile(filepath.Join(manager.Workspace(r.ID), name))
		return string(b)
	}
	checkForemanRun(t, run("by-foreman"), read)
	checkSetupFailed(t, run("by-builder"), read)
	r := run("by-reviewer")
	if r.State != factory.StateFailed || r.StatusMessage == nil || r.StatusMessage.ErrorCode != "harness_not_configured" ||
		!strings.Contains(r.StatusMessage.Message, "codex") {
		t.Fatalf("an unmapped harness: %s %+v", r.State, r.StatusMessage)
	}

	r = run("by-auditor")
	if r.State != factory.StateFailed || r.StatusMessage == nil || r.StatusMessage.ErrorCode != runs.CodeSecretUnavailable ||
		!strings.Contains(r.StatusMessage.Message, "not-created") || read(r, "seen.txt") != "" {
		t.Fatalf("a granted secret that does not exist: %s %+v", r.State, r.StatusMessage)
	}
	checkDispatch(t, h, read)
}

// checkDispatch: a run dispatched to the factory is its foreman's.
func checkDispatch(t *testing.T, h *harness, read func(*factory.Run, string) string) {
	t.Helper()
	a := post(t, h.url+"/v1/factory/"+h.status("acme").UID+"/runs", "", `{"prompt":"Ship the release notes."}`, "Authorization", "Bearer "+adminKey)
	var d struct {
		Foreman string `json:"foreman_agent"`
		RunID   string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(a.body), &d); err != nil || a.status != 200 || d.Foreman != "lead" {
		t.Fatalf("dispatch: %d %s", a.status, a.body)
	}
	var r *factory.Run
	var err error
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r, err = h.store.Run(d.RunID); err == nil && r.State.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dispatched run did not finish: %+v", r)
		}
	}
	if r.State != factory.StateSucceeded || r.Title != "Ship the release notes." || !strings.HasPrefix(read(r, "seen.txt"), "You are the foreman of acme.\n") ||
		read(r, "prepared.txt") != "prepared\n" {
		t.Fatalf("the dispatched run: %s %q %q", r.State, r.Title, read(r, "seen.txt"))
	}
}

// checkForemanRun: the run of the foreman, on the default (oz) harness.
func checkForemanRun(t *testing.T, r *factory.Run, read func(*factory.Run, string) string) {
	t.Helper()
	if r.State != factory.StateSucceeded {
		t.Fatalf("the foreman's run: %s %+v", r.State, r.StatusMessage)
	}
	if !strings.HasPrefix(r.Prompt, "You are the foreman of acme.\n") || !strings.Contains(r.Prompt, "Handle by-foreman.") ||
		read(r, "seen.txt") != r.Prompt {
		t.Fatalf("the prompt does not start with the agent's: %q", r.Prompt)
	}
	if r.Setup == nil || string(r.Setup.MCPServers["local"]) != `{"command":"./mcp"}` {
		t.Fatalf("the factory's MCP servers are not offered to the run: %+v", r.Setup)
	}
	if got := read(r, "env.txt"); got != "lead oz fast-model gh-123 dk-456\n" {
		t.Fatalf("the agent's settings: %q", got)
	}
	if got := read(r, "skills.txt"); got != "house-style\n" {
		t.Fatalf("the foreman sees the shared skills only: %q", got)
	}
	if read(r, ".agents/skills/house-style/scripts/check.sh") != "exit 0\n" || read(r, "prepared.txt") != "prepared\n" {
		t.Fatal("the skill's files or the setup's output are missing from the workspace")
	}
}

// checkSetupFailed: the builder's runner fails its second setup command.
func checkSetupFailed(t *testing.T, r *factory.Run, read func(*factory.Run, string) string) {
	t.Helper()
	if r.State != factory.StateFailed || r.StatusMessage == nil || r.StatusMessage.ErrorCode != runtime.CodeEnvironmentSetupFailed ||
		!strings.Contains(r.StatusMessage.Message, "exited with status 3") || !strings.Contains(r.StatusMessage.Message, "half-way") {
		t.Fatalf("a failing setup command: %s %+v", r.State, r.StatusMessage)
	}
	if read(r, "seen.txt") != "" {
		t.Fatal("the agent ran after its setup failed")
	}
	if read(r, ".agents/skills/release-notes/template.txt") != "## Changes\n" || read(r, ".agents/skills/house-style/SKILL.md") == "" {
		t.Fatal("the builder sees its own skill and the shared ones")
	}
}
