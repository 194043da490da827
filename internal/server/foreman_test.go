package server_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/codehost/github/githubtest"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
	"factory/internal/testbin"
)

// foremanTree is a factory whose foreman is the demo agent told, line by
// line, which Factory MCP tools to call (cmd/factory/demoagent_mcp.go):
// triage, then the spec, a try at IMPLEMENT before the spec is approved,
// the spec review; on approval, implement (which opens a pull request),
// review, and complete.
var foremanTree = map[string]string{
	"factory.yaml": "schemaVersion: v1alpha1\nname: Widgets\nrepositories:\n  - owner: acme\n    name: widgets\nagentDefaults:\n  model: auto\n",
	"agents/foreman/agent.md": "---\nagentType: FOREMAN\n---\nYou run the factory's work.\n" +
		`mcp: dispatch_agent {"agent": "triage", "prompt": "Triage the issue.", "wait": true}` + "\n" +
		`mcp: dispatch_agent {"agent": "spec", "prompt": "Write the spec.", "stage": "SPEC", "wait": true}` + "\n" +
		`mcp: set_stage {"stage": "IMPLEMENT"}` + "\n" +
		`mcp: ask_human {"question": "Approve the spec?", "kind": "spec_review"}` + "\n" +
		`mcp on approve: dispatch_agent {"agent": "implement", "prompt": "Implement the spec.", "stage": "IMPLEMENT", "wait": true}` + "\n" +
		`mcp on approve: dispatch_agent {"agent": "review", "prompt": "Review the change.", "stage": "REVIEW", "wait": true}` + "\n" +
		`mcp on approve: complete_task {"summary": "Implemented and reviewed."}` + "\n",
	"agents/triage/agent.md":    "---\nagentType: TRIAGE\n---\nYou triage.\n",
	"agents/spec/agent.md":      "---\nagentType: SPEC\n---\nYou write specs.\n",
	"agents/implement/agent.md": "---\nagentType: IMPLEMENT\n---\nYou implement, and open a pull request.\n",
	"agents/review/agent.md":    "---\nagentType: REVIEW\n---\nYou review.\n",
	"webhooks/github.yaml":      "authMode: signature\nsignatureScheme: github\nsecretName: gh\n",
	"automations/intake/automation.md": "---\ntriggers:\n  - provider: github\n    event: issue_created\n" +
		"---\nTake the issue through the factory.\n",
}

// TestForemanRunsTheFactory is the foreman's loop over real processes: a
// GitHub issue starts the foreman, which dispatches triage and the spec as
// child runs, is refused IMPLEMENT before the spec is approved, asks for
// the spec review and parks BLOCKED with an inbox item; the approval,
// given through the API, continues the same conversation, which
// dispatches implement (a pull request) and review, and completes the
// task. The task, its stages, outputs and run tree, and the inbox read
// back in the SDKs' shapes.
func TestForemanRunsTheFactory(t *testing.T) {
	f := githubtest.New(t)
	f.AddRepo("acme", "widgets", map[string]string{"README.md": "# Widgets\n"})
	h, hook, _ := codeHostServerTree(t, f, foremanTree)
	addRunsKey(t, h)
	opened := githubtest.Payload(t, "issues", "opened", "acme", "widgets", nil)
	opened["issue"].(map[string]any)["number"] = 12
	body, _ := json.Marshal(opened)
	ghPost(t, hook, "issues", "d-1", string(body))
	fac := h.status("acme")

	root := awaitTaskRun(t, h, fac.UID, func(r *factory.Run) bool { return r.State == factory.StateBlocked })
	if root.Asking == nil || !strings.Contains(root.StatusMessage.Message, "Approve the spec?") {
		t.Fatalf("the foreman is not waiting for the spec review: %+v %+v", root.Asking, root.StatusMessage)
	}
	task := getJSON(t, h, "/v1/factory/"+fac.UID+"/task-by-run?run_id="+root.ID)
	if task["stage"] != "SPEC" || task["ticket_source"] != "github" || task["ticket_id"] != "acme/widgets#12" {
		t.Fatalf("the task before approval: %v", task)
	}
	checkTimelineSays(t, h, root.ID, "mcp set_stage refused: the spec is not approved")
	item := inboxItemOf(t, h, root.ID)
	if item["kind"] != "spec_review" || item["factory_task_uid"] != task["uid"] || item["stage"] != "SPEC" {
		t.Fatalf("the inbox item: %v", item)
	}
	answered, err := h.c.AnswerInboxItem(t.Context(), item["notification_uid"].(string), "approve", "ship it")
	if err != nil || !answered.Resolved || answered.Answer != "approve" {
		t.Fatalf("approve: %+v %v", answered, err)
	}

	root = awaitTaskRun(t, h, fac.UID, func(r *factory.Run) bool { return r.State.Terminal() && r.Turns == 2 })
	if root.State != factory.StateSucceeded || root.Conversation() != task["conversation_id"] {
		t.Fatalf("the foreman's second turn: %s %+v", root.State, root.StatusMessage)
	}
	task = getJSON(t, h, "/v1/factory/"+fac.UID+"/tasks/"+task["uid"].(string))
	checkFinishedTask(t, h, f, fac.UID, root.ID, task)
	if items, err := h.c.Inbox(t.Context(), nil); err != nil || len(items) != 0 {
		t.Errorf("the inbox still holds %d items (%v)", len(items), err)
	}
	page, err := h.c.ListTasks(t.Context(), "acme", url.Values{"stage": {"COMPLETE"}, "full_list": {"true"}})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].UID != task["uid"] || len(page.Tasks[0].Outputs) == 0 {
		t.Errorf("the complete tasks, by the factory's name: %+v %v", page, err)
	}
}

// addRunsKey gives the server the runs key that call sends.
func addRunsKey(t *testing.T, h *harness) {
	t.Helper()
	b := h.store.NewBatch()
	b.PutAPIKey(runsKey, &factory.APIKey{Name: "ci", Scope: factory.ScopeRuns, Prefix: runsKey[:8], CreatedAt: time.Now()})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

// awaitTaskRun waits for the top-level run of the factory's one task to
// be as ok says.
func awaitTaskRun(t *testing.T, h *harness, factoryUID string, ok func(*factory.Run) bool) *factory.Run {
	t.Helper()
	var last *factory.Run
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		tasks := getJSON(t, h, "/v1/factory/"+factoryUID+"/tasks?include_current_run=true")["tasks"].([]any)
		if len(tasks) != 1 {
			continue
		}
		cur, _ := tasks[0].(map[string]any)["current_run"].(map[string]any)
		if cur == nil {
			continue
		}
		r, err := h.store.Run(cur["run_id"].(string))
		if err == nil && ok(r) {
			return r
		}
		last = r
	}
	if last != nil {
		evs, _ := h.store.RunEvents(last.ID)
		b, _ := json.MarshalIndent(evs, "", " ")
		t.Fatalf("the task's run is %s: %+v\n%s", last.State, last.StatusMessage, b)
	}
	t.Fatal("no task")
	return nil
}

func getJSON(t *testing.T, h *harness, path string) map[string]any {
	t.Helper()
	status, b := call(t, h, "GET", path, nil)
	var v map[string]any
	if err := json.Unmarshal(b, &v); status != 200 || err != nil {
		t.Fatalf("GET %s: %d %s", path, status, b)
	}
	return v
}

// checkTimelineSays fails unless a run's timeline has a message holding s.
func checkTimelineSays(t *testing.T, h *harness, runID, s string) {
	t.Helper()
	// An agent's message is reported when its next begins, or after a
	// second of silence (an agent waiting on a tool call): wait for it.
	var all []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		evs, err := h.store.RunEvents(runID)
		if err != nil {
			t.Fatal(err)
		}
		all = all[:0]
		for _, e := range evs {
			if strings.Contains(e.Message, s) {
				return
			}
			all = append(all, e.Message)
		}
	}
	t.Fatalf("the timeline of %s does not say %q:\n%s", runID, s, strings.Join(all, "\n"))
}

// inboxItemOf is the open inbox item of a run.
func inboxItemOf(t *testing.T, h *harness, runID string) map[string]any {
	t.Helper()
	for _, it := range getJSON(t, h, "/v1/factory-inbox")["items"].([]any) {
		if m := it.(map[string]any); m["run_id"] == runID {
			return m
		}
	}
	t.Fatalf("no inbox item of run %s", runID)
	return nil
}

// checkFinishedTask: COMPLETE, the four children under the foreman in
// order with their agents, the pull request among the outputs.
func checkFinishedTask(t *testing.T, h *harness, f *githubtest.Fake, factoryUID, rootID string, task map[string]any) {
	t.Helper()
	if task["stage"] != "COMPLETE" {
		t.Errorf("the task's stage: %v", task["stage"])
	}
	page := getJSON(t, h, "/v1/agent/runs?ancestor_run_id="+rootID+"&sort_by=created_at&sort_order=asc")
	var agents []string
	for _, r := range page["runs"].([]any) {
		run := r.(map[string]any)
		if run["parent_run_id"] != rootID || run["root_run_id"] != rootID || run["source"] != factory.SourceOrchestration || run["state"] != "SUCCEEDED" {
			t.Errorf("a child run: %v", run)
		}
		st, _ := h.store.Run(run["run_id"].(string))
		agents = append(agents, st.Setup.Agent)
	}
	if !slices.Equal(agents, []string{"triage", "spec", "implement", "review"}) {
		t.Errorf("the children's agents: %v", agents)
	}
	var prs []string
	for _, o := range task["outputs"].([]any) {
		if a := o.(map[string]any); a["artifact_type"] == "PULL_REQUEST" {
			prs = append(prs, fmt.Sprint(a["data"].(map[string]any)["url"]))
		}
	}
	f.Snapshot(func() {
		if len(f.Pulls) != 1 || len(prs) == 0 || prs[0] != f.Pulls[0].HTMLURL || f.Pulls[0].Head != "factory/"+rootID {
			t.Errorf("pull requests: the task's %v; GitHub's %+v", prs, f.Pulls)
		}
	})
}

// TestTaskCancelCascades: a child's failure reaches the foreman as its
// dispatch's answer; cancelling the task while the next child works
// cancels the task's whole tree, child and foreman alike, at once.
func TestTaskCancelCascades(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"factory.yaml": "schemaVersion: v1alpha1\nname: Cascade\nrepositories:\n  - owner: acme\n    name: widgets\nagentDefaults:\n  model: auto\n",
		"agents/foreman/agent.md": "---\nagentType: FOREMAN\n---\nLead.\n" +
			`mcp: dispatch_agent {"agent": "broken", "prompt": "Fail.", "wait": true}` + "\n" +
			`mcp: dispatch_agent {"agent": "slow", "prompt": "Take your time.", "wait": true}` + "\n",
		"agents/broken/agent.md": "---\nagentType: IMPLEMENT\nharness:\n  type: codex\n---\nBreak.\n",
		"agents/slow/agent.md":   "---\nagentType: REVIEW\nharness:\n  type: gemini\n---\nWait.\n",
	})
	bin := testbin.Factory(t)
	h := startWith(t, func(s *store.Store, data string) *runs.Manager {
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "demo", Log: slog.New(slog.DiscardHandler),
			Harnesses: map[string]string{"codex": "broken", "gemini": "slow"},
			Environments: map[string]runs.Environment{
				"demo":   {Executor: &runtime.ACPExecutor{Command: []string{bin, "demo-agent", "--acp", "--delay", "1ms"}}},
				"broken": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", "echo giving up; exit 3"}}},
				"slow":   {Executor: &runtime.ExecExecutor{Command: []string{"sleep", "60"}, Grace: 100 * time.Millisecond}},
			}})
	}, dirSource("cascade", root))
	addRunsKey(t, h)
	fac := h.status("cascade")
	foremanID, conv := dispatchOnly(t, h, fac.UID)
	status, b := call(t, h, "POST", "/v1/factory/"+fac.UID+"/tasks", map[string]any{"conversation_id": conv, "title": "Cascade"})
	var task map[string]any
	if json.Unmarshal(b, &task); status != 200 {
		t.Fatalf("task: %d %s", status, b)
	}
	slow := awaitChild(t, h, foremanID, "slow", factory.StateInProgress)
	checkTimelineSays(t, h, foremanID, `"state":"FAILED"`)
	status, b = call(t, h, "POST", "/v1/factory/"+fac.UID+"/tasks/"+task["uid"].(string)+"/cancel", nil)
	if json.Unmarshal(b, &task); status != 200 || task["stage"] != "CANCELLED" {
		t.Fatalf("cancel: %d %s", status, b)
	}
	for _, id := range []string{foremanID, slow.ID} {
		if r, _ := h.store.Run(id); r.State != factory.StateCancelled {
			t.Errorf("run %s is %s after the task's cancel", id, r.State)
		}
	}
}

// dispatchOnly dispatches a run of a factory's foreman: its ID and
// conversation.
func dispatchOnly(t *testing.T, h *harness, factoryUID string) (string, string) {
	t.Helper()
	status, b := call(t, h, "POST", "/v1/factory/"+factoryUID+"/runs", map[string]any{"prompt": "Go."})
	var out map[string]any
	if json.Unmarshal(b, &out); status != 200 {
		t.Fatalf("dispatch: %d %s", status, b)
	}
	r, err := h.store.Run(out["run_id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return r.ID, r.Conversation()
}

// awaitChild waits for a child of a run, of an agent, to be in a state.
func awaitChild(t *testing.T, h *harness, parent, agent string, state factory.RunState) *factory.Run {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		page := getJSON(t, h, "/v1/agent/runs?ancestor_run_id="+parent)
		for _, r := range page["runs"].([]any) {
			run, err := h.store.Run(r.(map[string]any)["run_id"].(string))
			if err == nil && run.Setup != nil && run.Setup.Agent == agent && run.State == state {
				return run
			}
		}
	}
	evs, _ := h.store.RunEvents(parent)
	b, _ := json.MarshalIndent(evs, "", " ")
	t.Fatalf("no %s child of %s is %s\n%s", agent, parent, state, b)
	return nil
}

// TestStageChangeFiresAutomations: a task's move to a stage fires the
// automations whose factory trigger selects that stage (and whence), once,
// with the change as the event's payload; other moves fire nothing.
func TestStageChangeFiresAutomations(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"factory.yaml":            "schemaVersion: v1alpha1\nname: Stages\nrepositories:\n  - owner: acme\n    name: widgets\nagentDefaults:\n  model: auto\n",
		"agents/foreman/agent.md": "---\nagentType: FOREMAN\n---\nLead.\n",
		"automations/to-review/automation.md": "---\ntriggers:\n  - provider: factory\n    event: work_item_stage_changed\n" +
			"    filter:\n      stages: [REVIEW]\n      from_stages: [IMPLEMENT]\n---\nTell the reviewers.\n",
	})
	h := startWith(t, func(s *store.Store, data string) *runs.Manager {
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "default", Log: slog.New(slog.DiscardHandler),
			Environments: map[string]runs.Environment{"default": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	}, dirSource("stages", root))
	addRunsKey(t, h)
	fac := h.status("stages")
	_, conv := dispatchOnly(t, h, fac.UID)
	status, b := call(t, h, "POST", "/v1/factory/"+fac.UID+"/tasks", map[string]any{"conversation_id": conv, "title": "Staged"})
	var task map[string]any
	if json.Unmarshal(b, &task); status != 200 {
		t.Fatalf("task: %d %s", status, b)
	}
	automationRuns := func() []any {
		return getJSON(t, h, "/v1/agent/runs?factory_uid="+fac.UID+"&q=reviewers")["runs"].([]any)
	}
	for _, stage := range []string{"REVIEW", "IMPLEMENT", "IMPLEMENT", "REVIEW"} {
		if status, b := call(t, h, "PATCH", "/v1/factory/"+fac.UID+"/tasks/"+task["uid"].(string), map[string]any{"stage": stage}); status != 200 {
			t.Fatalf("to %s: %d %s", stage, status, b)
		}
	}
	got := automationRuns()
	if len(got) != 1 {
		t.Fatalf("%d runs of the automation, want 1 (TRIAGE→REVIEW and IMPLEMENT→IMPLEMENT fire nothing)", len(got))
	}
	id := got[0].(map[string]any)["run_id"].(string)
	payload, err := h.store.RunAttachment(id, "event-payload.json")
	var ev struct {
		From, To string
		Task     map[string]any
	}
	if err != nil || json.Unmarshal(payload, &ev) != nil || ev.From != "IMPLEMENT" || ev.To != "REVIEW" || ev.Task["uid"] != task["uid"] {
		t.Errorf("the event's payload: %s %v", payload, err)
	}
}
