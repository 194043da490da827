package server_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"factory"

	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
)

// The contract of the current official SDKs (docs/spec/platform-api.md),
// one test per row, with requests sent as the newest SDKs send them and
// answers read as their types read them. The field lists and enums below
// are transcribed from the SDKs' published types (oz-sdk-typescript
// 1.4.0-alpha.6 src/resources/agent/*.ts, oz-sdk-python 0.11
// types/agent/*.py) and the platform API's spec, not from this server's
// structs.

// sdkHeaders are the headers the TypeScript SDK sends with every request.
var sdkHeaders = []string{"User-Agent", "OzAPI/JS 1.4.0-alpha.6", "Accept", "application/json", "X-Stainless-Lang", "js",
	"X-Stainless-Package-Version", "1.4.0-alpha.6", "X-Stainless-OS", "Linux", "X-Stainless-Arch", "x64",
	"X-Stainless-Runtime", "node", "X-Stainless-Runtime-Version", "v22.0.0", "X-Stainless-Retry-Count", "0", "X-Stainless-Timeout", "60"}

var (
	sdkRunStates   = []string{"QUEUED", "PENDING", "CLAIMED", "INPROGRESS", "SUCCEEDED", "FAILED", "BLOCKED", "ERROR", "CANCELLED"}
	sdkRunSources  = []string{"LINEAR", "API", "SLACK", "LOCAL", "SCHEDULED_AGENT", "WEB_APP", "GITHUB_ACTION", "CLOUD_MODE", "CLI", "JIRA", "SELF_IMPROVEMENT", "GITHUB_WEBHOOK", "GITLAB_WEBHOOK", "AUTOFIX", "RUN_SCORER", "ORCHESTRATION", "CUSTOM_WEBHOOK"}
	sdkErrorCodes  = []string{"insufficient_credits", "feature_not_available", "external_authentication_required", "not_authorized", "invalid_request", "resource_not_found", "budget_exceeded", "integration_disabled", "integration_not_configured", "operation_not_supported", "environment_setup_failed", "content_policy_violation", "conflict", "authentication_required", "resource_unavailable", "internal_error", "infrastructure_timeout", "agent_process_failed"}
	sdkRunItem     = []string{"created_at", "prompt", "run_id", "state", "task_id", "title", "updated_at", "finished_at", "root_run_id"}
	sdkPrincipal   = []string{"user", "service_account"}
	sdkArtifactReq = map[string][]string{"FILE": {"artifact_uid", "filename", "filepath", "mime_type"}, "PULL_REQUEST": {"url", "branch"},
		"PLAN": {"document_uid"}, "SCREENSHOT": {"artifact_uid", "mime_type"}, "EXTERNAL_REFERENCE": {"reference_type", "url"}}
)

// sdkCall sends a request as the SDK does and decodes the answer.
func sdkCall(t *testing.T, h *harness, method, path string, body any, wantStatus int) map[string]any {
	t.Helper()
	status, b := call(t, h, method, path, body, append(slices.Clone(sdkHeaders), "Content-Type", "application/json")...)
	if status != wantStatus {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, status, wantStatus, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: not a JSON object: %s", method, path, b)
	}
	return m
}

// has fails unless obj has every field, not null; nullable fields (null
// allowed, key required) are named with a trailing "?".
func has(t *testing.T, what string, obj any, fields ...string) map[string]any {
	t.Helper()
	m, ok := obj.(map[string]any)
	if !ok {
		t.Fatalf("%s: not an object: %v", what, obj)
	}
	for _, f := range fields {
		name, nullable := strings.CutSuffix(f, "?")
		v, present := m[name]
		if !present || v == nil && !nullable {
			t.Errorf("%s: lacks %s: %v", what, name, m)
		}
	}
	return m
}

func oneOf(t *testing.T, what string, v any, allowed []string) {
	t.Helper()
	s, _ := v.(string)
	if !slices.Contains(allowed, s) {
		t.Errorf("%s: %v is not one of the SDK's %v", what, v, allowed)
	}
}

// checkRunItem reads a run as the SDKs' RunItem does.
func checkRunItem(t *testing.T, obj any) map[string]any {
	t.Helper()
	fields := slices.Clone(sdkRunItem)
	fields[slices.Index(fields, "finished_at")] = "finished_at?"
	m := has(t, "RunItem", obj, fields...)
	oneOf(t, "RunItem.state", m["state"], sdkRunStates)
	if m["source"] != nil {
		oneOf(t, "RunItem.source", m["source"], sdkRunSources)
	}
	oneOf(t, "RunItem.execution_location", m["execution_location"], []string{"LOCAL", "REMOTE"})
	for _, p := range []string{"creator", "executor"} {
		if m[p] != nil {
			oneOf(t, "RunItem."+p+".type", m[p].(map[string]any)["type"], sdkPrincipal)
		}
	}
	for _, a := range m["artifacts"].([]any) {
		art := has(t, "ArtifactItem", a, "artifact_type", "created_at", "data")
		typ, _ := art["artifact_type"].(string)
		has(t, "ArtifactItem "+typ, art["data"], sdkArtifactReq[typ]...)
	}
	if sm, ok := m["status_message"].(map[string]any); ok {
		has(t, "RunItem.status_message", sm, "message")
		if sm["error_code"] != nil {
			oneOf(t, "status_message.error_code", sm["error_code"], sdkErrorCodes)
		}
	}
	return m
}

// contractServer runs the demo-like agent of artifactScript, with a
// factory that has a custom webhook and an automation on it.
func contractServer(t *testing.T) (*harness, string) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "webhooks"), 0o755)
	os.WriteFile(filepath.Join(root, "webhooks", "ci.yaml"), []byte("name: CI\nauthMode: token\n"), 0o644)
	return startWith(t, func(s *store.Store, data string) *runs.Manager {
		b := s.NewBatch()
		b.PutAPIKey(runsKey, &factory.APIKey{Name: "ci", Scope: factory.ScopeRuns, Prefix: runsKey[:8], CreatedAt: time.Now()})
		b.Commit()
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "default", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Environments: map[string]runs.Environment{"default": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", artifactScript}}}}})
	}, dirSource("acme", root)), root
}

func TestPlatformContract(t *testing.T) {
	h, dir := contractServer(t)
	t.Run("factories", func(t *testing.T) { contractFactories(t, h) })
	t.Run("create", func(t *testing.T) { contractCreate(t, h) })
	t.Run("list", func(t *testing.T) { contractList(t, h) })
	t.Run("run item and sources", func(t *testing.T) { contractSources(t, h, dir) })
	t.Run("timeline and conversation", func(t *testing.T) { contractTimeline(t, h) })
	t.Run("follow-ups and interrupt", func(t *testing.T) { contractFollowUps(t, h) })
	t.Run("artifacts", func(t *testing.T) { contractArtifacts(t, h) })
	t.Run("errors", func(t *testing.T) { contractErrors(t, h) })
	t.Run("environments and agents", func(t *testing.T) { contractAlso(t, h) })
}

// contractFactories: the singular factory paths.
func contractFactories(t *testing.T, h *harness) {
	list := sdkCall(t, h, "GET", "/v1/factory?limit=50&search=acme", nil, 200)
	has(t, "page_info", list["page_info"], "has_next_page")
	facs := list["factories"].([]any)
	if len(facs) != 1 {
		t.Fatalf("factories: %v", facs)
	}
	f := has(t, "Factory", facs[0], "uid", "name", "alias?", "repositories", "integrations?", "agent_defaults", "credential_strategy",
		"default_model?", "created_at", "updated_at")
	uid := f["uid"].(string)
	has(t, "Factory", sdkCall(t, h, "GET", "/v1/factory/"+uid, nil, 200), "uid", "name", "agent_defaults")
	d := has(t, "dispatch", sdkCall(t, h, "POST", "/v1/factory/"+uid+"/runs", map[string]any{"prompt": "from the factory", "ticket_url": "https://x/T-1"}, 200),
		"factory_uid", "foreman_agent", "run_id", "state", "ticket_ref")
	if d["ticket_ref"] != "api:"+d["run_id"].(string) {
		t.Errorf("ticket_ref %v, want api:<run_id>", d["ticket_ref"])
	}
	oneOf(t, "dispatch state", d["state"], sdkRunStates)
}

// contractCreate: the create request with the newest fields, and its
// answer.
func contractCreate(t *testing.T, h *harness) {
	body := map[string]any{"prompt": "create", "title": "t", "mode": "plan", "interactive": false, "team": true,
		"on_behalf_of": "someone", "metadata": map[string]string{"ticket_id": "VIS-238"}, "config": map[string]any{"name": "n"}}
	m := has(t, "AgentRunResponse", sdkCall(t, h, "POST", "/v1/agent/runs", body, 200), "run_id", "state", "task_id", "at_capacity")
	oneOf(t, "state", m["state"], sdkRunStates)
	if _, ok := m["at_capacity"].(bool); !ok {
		t.Errorf("at_capacity: %v", m["at_capacity"])
	}
}

// contractList: every list parameter, encoded as the SDK's qs does
// (repeated keys for arrays, metadata[key] with the brackets escaped).
func contractList(t *testing.T, h *harness) {
	id := createRun(t, h, map[string]any{"prompt": "listed", "metadata": map[string]string{"ticket_id": "VIS-238"}})
	waitState(t, h, id, "SUCCEEDED")
	states := "state=" + strings.Join(sdkRunStates, "&state=")
	for _, q := range []string{
		states,
		"sort_by=title&sort_order=asc", "sort_by=agent", "sort_by=created_at", "sort_by=updated_at&sort_order=desc",
		"q=listed", "metadata%5Bticket_id%5D=VIS-238", "ancestor_run_id=" + id, "factory_uid=a&factory_uid=b",
		"source=API&source=CUSTOM_WEBHOOK", "factory_only=true", "schedule_id=s", "skill=o/r:SKILL.md", "skill_spec=o/r:SKILL.md",
		"artifact_type=FILE", "executor=factory-server", "execution_location=REMOTE", "automation_id=au", "creator=c",
		"environment_id=empty-environment", "model_id=m", "name=n", "created_after=2020-01-01T00:00:00Z",
		"created_before=2999-01-01T00:00:00Z", "updated_after=2020-01-01T00:00:00Z", "cursor=&limit=50", "some_future_parameter=1",
	} {
		page := sdkCall(t, h, "GET", "/v1/agent/runs?"+q, nil, 200)
		has(t, q+": page_info", page["page_info"], "has_next_page")
		for _, r := range page["runs"].([]any) {
			checkRunItem(t, r)
		}
	}
	for q, want := range map[string]bool{"q=listed": true, "metadata%5Bticket_id%5D=VIS-238": true, "artifact_type=FILE": true,
		states: true, "metadata%5Bticket_id%5D=VIS-1": false} {
		runs := sdkCall(t, h, "GET", "/v1/agent/runs?limit=100&"+q, nil, 200)["runs"].([]any)
		found := slices.ContainsFunc(runs, func(r any) bool { return r.(map[string]any)["run_id"] == id })
		if found != want {
			t.Errorf("%s: found %v, want %v", q, found, want)
		}
	}
}

// contractSources: a run from a custom webhook's automation, one from the
// factory API and one from the Agents API read back with their source,
// root_run_id, finished_at and run_time.
func contractSources(t *testing.T, h *harness, dir string) {
	ci := h.hook("ci")
	root := h.status("acme")
	os.MkdirAll(filepath.Join(dir, "automations"), 0o755)
	autoFile := filepath.Join(dir, "automations", "on-ci.md")
	os.WriteFile(autoFile, []byte("---\ntitle: on ci\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: ["+ci.uid+"]\n---\nAct.\n"), 0o644)
	if st, err := h.c.SyncFactory(t.Context(), root.UID); err != nil || !st.Ready {
		t.Fatalf("sync: %v %+v", err, st)
	}
	dlv := deliveryID(t, post(t, ci.url, "", `{"x":1}`, "Authorization", "Bearer "+ci.secret))
	var hookRun string
	for deadline := time.Now().Add(10 * time.Second); hookRun == ""; time.Sleep(20 * time.Millisecond) {
		if d, err := h.c.Delivery(t.Context(), ci.uid, dlv); err == nil && len(d.RunIDs) > 0 {
			hookRun = d.RunIDs[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("the delivery started no run")
		}
	}
	d := sdkCall(t, h, "POST", "/v1/factory/"+root.UID+"/runs", map[string]any{"prompt": "dispatched"}, 200)
	api := createRun(t, h, map[string]any{"prompt": "direct"})
	for id, source := range map[string]string{hookRun: "CUSTOM_WEBHOOK", d["run_id"].(string): "API", api: "API"} {
		waitState(t, h, id, "SUCCEEDED")
		m := checkRunItem(t, sdkCall(t, h, "GET", "/v1/agent/runs/"+id, nil, 200))
		runTime, _ := m["run_time"].(string)
		if m["source"] != source || m["root_run_id"] != id || m["finished_at"] == nil || !strings.HasPrefix(runTime, "PT") {
			t.Errorf("run %s: source %v root %v finished_at %v run_time %v; want %s", id, m["source"], m["root_run_id"], m["finished_at"], m["run_time"], source)
		}
	}
}

// contractTimeline: the timeline's events and the conversation.
func contractTimeline(t *testing.T, h *harness) {
	id := createRun(t, h, map[string]any{"prompt": "timeline"})
	waitState(t, h, id, "SUCCEEDED")
	events := sdkCall(t, h, "GET", "/v1/agent/runs/"+id+"/timeline", nil, 200)["events"].([]any)
	var types []string
	for _, e := range events {
		m := has(t, "timeline event", e, "event_type", "event_uuid", "occurred_at", "run_id")
		types = append(types, m["event_type"].(string))
	}
	for _, want := range []string{"oz_run_created", "agent_started", "oz_run_done"} {
		if !slices.Contains(types, want) {
			t.Errorf("timeline lacks %s: %v", want, types)
		}
	}
	conv := has(t, "conversation", sdkCall(t, h, "GET", "/v1/agent/runs/"+id+"/conversation", nil, 200), "run_id", "conversation_id", "turns")
	if turns := conv["turns"].([]any); len(turns) != 1 {
		t.Errorf("turns: %v", turns)
	}
}

// contractFollowUps: the follow-up's answer, and interrupt's statuses.
func contractFollowUps(t *testing.T, h *harness) {
	id := createRun(t, h, map[string]any{"prompt": "follow"})
	waitState(t, h, id, "SUCCEEDED")
	m := has(t, "follow-up", sdkCall(t, h, "POST", "/v1/agent/runs/"+id+"/followups", map[string]any{"message": "more", "mode": "normal"}, 200),
		"followup_id", "outcome")
	oneOf(t, "outcome", m["outcome"], []string{"live_session", "queued_prompt", "handoff_execution"})
	waitState(t, h, id, "SUCCEEDED")
	has(t, "problem", sdkCall(t, h, "POST", "/v1/agent/runs/"+id+"/interrupt", nil, 409), "type", "title", "status", "error")
}

// contractArtifacts: the artifact answers, and the run by its pull
// request.
func contractArtifacts(t *testing.T, h *harness) {
	id := createRun(t, h, map[string]any{"prompt": "produce"})
	run := checkRunItem(t, waitState(t, h, id, "SUCCEEDED"))
	for _, a := range run["artifacts"].([]any) {
		art := a.(map[string]any)
		data := art["data"].(map[string]any)
		uid, ok := data["artifact_uid"].(string)
		if !ok {
			continue
		}
		got := has(t, "AgentGetArtifactResponse", sdkCall(t, h, "GET", "/v1/agent/artifacts/"+uid, nil, 200), "artifact_type", "artifact_uid", "created_at", "data")
		switch art["artifact_type"] {
		case "FILE":
			has(t, "FileArtifactResponse.data", got["data"], "content_type", "download_url", "expires_at", "filename")
		case "PLAN":
			has(t, "PlanArtifactResponse.data", got["data"], "content", "content_type", "document_uid", "notebook_uid")
		}
	}
	byRef := sdkCall(t, h, "GET", "/v1/agent/run-by-external-reference?url=https%3A%2F%2Fgithub.com%2Facme%2Fapp%2Fpull%2F42", nil, 200)
	checkRunItem(t, byRef)
}

// contractErrors: the problem body of each status the API answers.
func contractErrors(t *testing.T, h *harness) {
	for path, code := range map[string]string{"/v1/agent/runs/run_nope0000000000000000": "resource_not_found", "/v1/agent/runs?limit=0": "invalid_request"} {
		status := map[string]int{"resource_not_found": 404, "invalid_request": 400}[code]
		m := has(t, "problem", sdkCall(t, h, "GET", path, nil, status), "type", "title", "status", "error", "instance", "trace_id", "retryable")
		if !strings.Contains(m["type"].(string), code) || m["retryable"] != false {
			t.Errorf("%s: %v", path, m)
		}
	}
	req, _ := http.NewRequest("GET", h.url+"/v1/agent/runs", nil)
	req.Header.Set("Authorization", "Bearer not-a-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("x-should-retry") != "false" {
		t.Errorf("unauthenticated: %d x-should-retry %q", resp.StatusCode, resp.Header.Get("x-should-retry"))
	}
}

// contractAlso: environments and agents, which the SDKs call too.
func contractAlso(t *testing.T, h *harness) {
	envs := sdkCall(t, h, "GET", "/v1/agent/environments", nil, 200)["environments"].([]any)
	if len(envs) == 0 {
		t.Fatal("no environments")
	}
	for _, e := range envs {
		has(t, "CloudEnvironment", e, "config", "last_updated", "setup_failed", "uid")
	}
	if _, ok := sdkCall(t, h, "GET", "/v1/agent", nil, 200)["agents"].([]any); !ok {
		t.Error("GET /v1/agent: no agents list")
	}
}
