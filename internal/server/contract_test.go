package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"factory"

	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/server"
	"factory/internal/store"
)

// The platform API's contract with the newest official SDKs
// (docs/spec/platform-api.md), one test per call of their api.md: the
// request as the SDKs send it, the answer checked against the SDKs' types
// (testdata/sdk/types.json, with the file each comes from), and each
// answer shown to fail that check when a field the SDKs require is
// dropped (sdkTypes.conforms).

// sdkHeaders are what the SDKs send with every request (Stainless's
// client), with the team header the newest ones add where a call takes a
// team_uid.
var sdkHeaders = []string{"User-Agent", "WarpClient/JS 1.4.0-alpha.6", "Accept", "application/json", "X-Stainless-Lang", "js",
	"X-Stainless-Package-Version", "1.4.0-alpha.6", "X-Stainless-OS", "Linux", "X-Stainless-Arch", "x64",
	"X-Stainless-Runtime", "node", "X-Stainless-Runtime-Version", "v22.0.0", "X-Stainless-Retry-Count", "0", "X-Stainless-Timeout", "60",
	"X-Warp-Team-Uid", "tm_whatever"}

// contractFiles is a v1alpha1 tree that uses what the Factory object
// shows: factory.yaml's name and description, integrations with their
// settings, a code forge, agent and scorer defaults with a runner, a
// harness with managed-secret auth, self-improvement; agents of two
// harnesses with skills, a scorer that feeds self-improvement, a
// benchmark suite in the documented shape.
var contractFiles = map[string]string{
	"factory.yaml": `schemaVersion: v1alpha1
name: Acme Platform
description: Contract of the SDKs
alias: acme-bot
credentialStrategy: EXECUTOR
codeForges: [GITHUB]
repositories:
  - owner: acme
    name: widgets
mcpServers:
  docs:
    warpId: MCP_DOCS
integrations:
  - type: slack
    slack:
      autoRespondToThreadReplies: false
  - type: linear
    linear:
      teamIds: [TEAM-1]
agentDefaults:
  harness:
    type: claude
    model: sonnet
    auth:
      source: managedSecret
      secretName: CLAUDE_KEY
  runner: linux
scorerDefaults:
  model: judge-1
  sampleRate: 0.5
  runner: linux
selfImprovement:
  reviewerType: custom
  failedRunThreshold: 10
  reviewerEmails: [lead@example.com]
`,
	"agents/foreman/agent.md":                    "---\nagentType: FOREMAN\nmodel: auto\ndescription: Routes the work\n---\nRoute the work.\n",
	"agents/reviewer/agent.md":                   "---\nagentType: REVIEW\ndescription: Reviews\n---\nReview.\n",
	"agents/reviewer/skills/checklist/SKILL.md":  "---\nname: checklist\ndescription: What to check\n---\nCheck.\n",
	"skills/conventions/SKILL.md":                "---\nname: conventions\ndescription: House rules\n---\nRules.\n",
	"runners/linux.yaml":                         "platform:\n  os: linux\n  linux:\n    dockerImage: ubuntu:24.04\n",
	"scorers/quality/scorer.md":                  "---\nagents: [reviewer]\nlabels:\n  - {value: good, score: 1}\n  - {value: bad, score: 0}\npassingScore: 1\nmodel: judge-1\nselfImprovement: true\n---\nJudge.\n",
	"benchmarks/review/suite.yaml":               "name: Review\nagent: reviewer\nconfigurations:\n  - name: base\n    role: baseline\n    agents:\n      - {agent: reviewer, model: auto}\n  - name: claude\n    role: candidate\n    agents:\n      - agent: reviewer\n        harness: {type: claude, model: opus}\ntasks: [one]\n",
	"benchmarks/review/tasks/one.yaml":           "title: One\nprompt: Review it.\nsuccessCriteria: Findings have locations.\n",
	"webhooks/ci.yaml":                           "authMode: token\n",
	"automations/on-ci/automation.md":            "---\nagent: reviewer\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [WEBHOOK]\n---\nReview what CI sent.\n",
	"automations/on-push/automation.md":          "---\ntriggers:\n  - provider: github\n    event: push\n    filter:\n      repos: [acme/widgets]\n      branches: [main]\n---\nLook at the push.\n",
	"automations/teams-mentions/automation.md":   "---\ntriggers:\n  - provider: teams\n    event: app_mention\n    filter:\n      team_ids: [00000000-0000-0000-0000-000000000001]\n      channel_ids: [\"19:abc@thread.tacv2\"]\n---\nAnswer in the thread.\n",
	"automations/azure-pr-created/automation.md": "---\ntriggers:\n  - provider: azure_devops\n    event: pull_request_created\n    filter:\n      repos: [acme/widgets]\n---\nReview the pull request.\n",
	"automations/nightly/automation.md":          "---\ntriggers:\n  - provider: schedule\n    event: cron_fired\n    schedule: {name: nightly, cron: \"0 3 * * *\"}\n---\nTidy up.\n",
	"agents/reviewer/skills/checklist/more.md":   "More to check.\n",
}

// contractScript is the agent of the default environment: it reports a
// file, a plan, a screenshot and a pull request.
const contractScript = `cd "$FACTORY_OUTPUT_DIR" && printf '# report\n' > REPORT.md && printf '1. fix it\n' > plan.md &&
printf '\211PNG\r\n\032\n' > shot.png &&
cat > artifacts.jsonl <<'JSONL'
{"artifact_type":"FILE","file":"REPORT.md","description":"the report"}
{"artifact_type":"PLAN","file":"plan.md","title":"The plan"}
{"artifact_type":"SCREENSHOT","file":"shot.png","description":"the page"}
{"artifact_type":"PULL_REQUEST","url":"https://github.com/acme/widgets/pull/42","branch":"fix-42"}
JSONL`

// contractServer serves the tree with two environments: default (the
// script above) and slow (an agent that waits, for cancel and interrupt).
func contractServer(t *testing.T) (*harness, hook) {
	root := t.TempDir()
	files := map[string]string{}
	for p, c := range contractFiles {
		if p != "automations/on-ci/automation.md" {
			files[p] = c
		}
	}
	writeTree(t, root, files)
	h := startConfigured(t, func(c *server.Config) {
		c.EgressRanges = []string{"203.0.113.0/24", "2001:db8::/48"}
		c.Models = map[string][]server.Model{"default": {{ID: "auto", Name: "Auto"}, {ID: "fast-1", Provider: "ANTHROPIC", Vision: true}}}
	}, func(s *store.Store, data string) *runs.Manager {
		b := s.NewBatch()
		b.PutAPIKey(runsKey, &factory.APIKey{Name: "ci", Scope: factory.ScopeRuns, Prefix: runsKey[:8], CreatedAt: time.Now()})
		b.Commit()
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "default", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Environments: map[string]runs.Environment{
				"default": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", contractScript}}},
				"slow":    {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", "echo started; sleep 30"}}}}})
	}, dirSource("acme", root))
	// The automation on the webhook names it by UID, known after the
	// first apply.
	ci := h.hook("ci")
	writeTree(t, root, map[string]string{"automations/on-ci/automation.md": strings.ReplaceAll(contractFiles["automations/on-ci/automation.md"], "WEBHOOK", ci.uid)})
	if st, err := h.c.SyncFactory(t.Context(), h.status("acme").UID); err != nil || !st.Ready {
		t.Fatalf("sync: %v %+v", err, st)
	}
	return h, ci
}

// sdkDo sends a request as the SDKs do; key "" sends none (the
// unauthenticated calls).
func sdkDo(t *testing.T, h *harness, key, method, path string, body any, extra ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.url+path, rd)
	for i := 0; i+1 < len(sdkHeaders); i += 2 {
		req.Header.Set(sdkHeaders[i], sdkHeaders[i+1])
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// contract is one call of the SDKs: its request, the status it answers,
// and the SDK type of its answer ("" for none to check).
type contract struct {
	name, key, method, path string
	body                    any
	status                  int
	typ                     string
}

// run sends the call, checks its answer and returns it decoded.
func (c contract) run(t *testing.T, h *harness, st *sdkTypes) any {
	t.Helper()
	key := c.key
	if key == "-" {
		key = ""
	} else if key == "" {
		key = runsKey
	}
	status, hdr, b := sdkDo(t, h, key, c.method, c.path, c.body)
	if status != c.status {
		t.Fatalf("%s %s: %d, want %d: %s", c.method, c.path, status, c.status, b)
	}
	if status >= 400 && hdr.Get("Content-Type") != "application/problem+json" {
		t.Errorf("an error is not a problem: %s", hdr.Get("Content-Type"))
	}
	var v any
	if c.typ != "" {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s %s: not JSON: %s", c.method, c.path, b)
		}
		st.conforms(t, c.typ, v)
	}
	return v
}

func TestPlatformContract(t *testing.T) {
	st := loadSDKTypes(t)
	h, ci := contractServer(t)
	f := h.status("acme")
	w := newContractWorld(t, h, f)
	w.ci = ci
	for _, c := range w.calls() {
		t.Run(c.name, func(t *testing.T) {
			v := c.run(t, h, st)
			if check := w.checks[c.name]; check != nil {
				check(t, v)
			}
		})
	}
	t.Run("redirects", func(t *testing.T) { contractRedirects(t, h, w) })
	t.Run("sources and error codes", func(t *testing.T) { contractSources(t, h, st, w) })
	t.Run("a known route never answers 404", func(t *testing.T) { contractKnownRoutes(t, h, w) })
}

// contractWorld is what the calls need: a factory, finished and running
// runs, their artifacts, a schedule, an agent.
type contractWorld struct {
	factory                          *factory.FactoryStatus
	done, slow, conversation         string
	fileUID, planUID, screenshotUID  string
	schedule, reviewerUID, runnerUID string
	scorerID, suiteUID               string
	// benchRun is a benchmark run of the suite; scored a run the scorer
	// was asked to score on demand.
	benchRun, scored string
	// task is bound to the conversation of a run of the factory
	// (taskRun); unbound is another such conversation, for the create.
	task, taskRun, taskConversation string
	unbound                         string
	ci                              hook
	checks                          map[string]func(*testing.T, any)
}

func newContractWorld(t *testing.T, h *harness, f *factory.FactoryStatus) *contractWorld {
	w := &contractWorld{factory: f, checks: map[string]func(*testing.T, any){}}
	w.done = createRun(t, h, map[string]any{"prompt": "produce", "metadata": map[string]string{"ticket_id": "VIS-238"}})
	run := waitState(t, h, w.done, "SUCCEEDED")
	w.conversation = run["conversation_id"].(string)
	for _, a := range run["artifacts"].([]any) {
		m := a.(map[string]any)
		uid, _ := m["data"].(map[string]any)["artifact_uid"].(string)
		switch m["artifact_type"] {
		case "FILE":
			w.fileUID = uid
		case "PLAN":
			w.planUID = uid
		case "SCREENSHOT":
			w.screenshotUID = uid
		}
	}
	w.slow = createRun(t, h, map[string]any{"prompt": "wait", "config": map[string]any{"environment_id": "slow"}})
	waitState(t, h, w.slow, "INPROGRESS")
	w.discover(t, h, f)
	w.taskRun, w.taskConversation = factoryRun(t, h, f.UID)
	_, w.unbound = factoryRun(t, h, f.UID)
	status, tb := call(t, h, "POST", "/v1/factory/"+f.UID+"/tasks", map[string]any{"conversation_id": w.taskConversation, "title": "Bound"})
	var task map[string]any
	if json.Unmarshal(tb, &task); status != 200 || task["uid"] == nil {
		t.Fatalf("a task: %d %s", status, tb)
	}
	w.task = task["uid"].(string)
	status, b := call(t, h, "POST", "/v1/agent/schedules", map[string]any{"name": "daily", "cron_schedule": "0 9 * * *", "prompt": "daily"})
	var sch map[string]any
	json.Unmarshal(b, &sch)
	if status != 200 || sch["id"] == nil {
		t.Fatalf("schedule: %d %s", status, b)
	}
	w.schedule = sch["id"].(string)
	w.measure(t, h)
	w.addChecks()
	return w
}

// measure launches a benchmark run of the suite and scores a run on
// demand.
func (w *contractWorld) measure(t *testing.T, h *harness) {
	t.Helper()
	status, b := call(t, h, "POST", "/v1/factory/"+w.factory.UID+"/benchmarks/suites/"+w.suiteUID+"/runs",
		map[string]any{"repetition_count": 1, "configurations": []map[string]any{{"role": "baseline", "model": "auto", "display_name": "auto"}}})
	var br map[string]any
	if json.Unmarshal(b, &br); status != 201 || br["uid"] == nil {
		t.Fatalf("a benchmark run: %d %s", status, b)
	}
	w.benchRun = br["uid"].(string)
	w.scored = w.taskRun
	status, b = call(t, h, "POST", "/v1/factory/scorers/"+w.scorerID+"/score", map[string]any{"run_id": w.scored})
	if status != 202 {
		t.Fatalf("scoring a run: %d %s", status, b)
	}
}

// factoryRun dispatches a run of the factory and waits for its end: its
// ID and its conversation.
func factoryRun(t *testing.T, h *harness, uid string) (id, conversation string) {
	t.Helper()
	status, b := call(t, h, "POST", "/v1/factory/"+uid+"/runs", map[string]any{"prompt": "produce"})
	var out map[string]any
	if json.Unmarshal(b, &out); status != 200 || out["run_id"] == nil {
		t.Fatalf("dispatch: %d %s", status, b)
	}
	id = out["run_id"].(string)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r, err := h.store.Run(id); err == nil && r.State.Terminal() {
			return id, r.Conversation()
		}
	}
	t.Fatalf("run %s did not end", id)
	return "", ""
}

// discover finds the UIDs the calls name: the reviewer, the runner, the
// suite and the scorer.
func (w *contractWorld) discover(t *testing.T, h *harness, f *factory.FactoryStatus) {
	for _, a := range f.Agents {
		if a.Name == "reviewer" {
			w.reviewerUID = a.UID
		}
	}
	for _, r := range f.Runners {
		w.runnerUID = r.UID
	}
	for _, b := range f.BenchmarkSuites {
		w.suiteUID = b.UID
	}
	_, sb := call(t, h, "GET", "/v1/factory/scorers", nil)
	var scorers struct {
		Scorers []struct {
			ID int64 `json:"id"`
		} `json:"scorers"`
	}
	json.Unmarshal(sb, &scorers)
	if len(scorers.Scorers) != 1 {
		t.Fatalf("scorers: %s", sb)
	}
	w.scorerID = fmt.Sprint(scorers.Scorers[0].ID)
}

// addChecks adds what some answers must say beyond their types.
func (w *contractWorld) addChecks() {
	w.checks["factories get"] = func(t *testing.T, v any) { checkFactoryObject(t, v.(map[string]any), w) }
	w.checks["agent list"] = func(t *testing.T, v any) {
		var names []string
		for _, a := range v.(map[string]any)["agents"].([]any) {
			names = append(names, a.(map[string]any)["name"].(string))
		}
		for _, want := range []string{"foreman", "reviewer", "conventions", "checklist"} {
			if !slices.Contains(names, want) {
				t.Errorf("GET /v1/agent lacks %s: %v", want, names)
			}
		}
	}
	w.checks["networking egress ranges"] = func(t *testing.T, v any) {
		if got := v.(map[string]any)["cidrs"].([]any); len(got) != 2 || got[0] != "203.0.113.0/24" {
			t.Errorf("cidrs: %v", got)
		}
	}
	w.checks["agent models"] = func(t *testing.T, v any) {
		m := v.(map[string]any)
		var ids []string
		for _, mo := range m["models"].([]any) {
			ids = append(ids, mo.(map[string]any)["id"].(string))
		}
		if m["default_model_id"] != "auto" || !slices.Contains(ids, "fast-1") || !slices.Contains(ids, "sonnet") {
			t.Errorf("models: %v", m)
		}
	}
	w.addMeasureChecks()
	w.checks["runs conversation"] = func(t *testing.T, v any) {
		m := v.(map[string]any)
		if steps := m["steps"].([]any); len(steps) != 1 || m["turns"] == nil {
			t.Errorf("a run of one turn: steps %v, turns %v", m["steps"], m["turns"])
		}
	}
	w.checks["runs handoff attachments"] = func(t *testing.T, v any) {
		if a := v.(map[string]any)["attachments"].([]any); len(a) != 2 {
			t.Errorf("the file and the screenshot: %v", a)
		}
	}
}

// addMeasureChecks: what the scorer, suite and benchmark answers say.
func (w *contractWorld) addMeasureChecks() {
	w.checks["factories runs list scores"] = func(t *testing.T, v any) {
		scores := v.(map[string]any)["scores"].([]any)
		if len(scores) != 1 || scores[0].(map[string]any)["scorer_name"] != "quality" || scores[0].(map[string]any)["trigger_source"] != "manual" {
			t.Errorf("the scores of a run scored on demand: %v", v)
		}
	}
	w.checks["scorers list results"] = func(t *testing.T, v any) {
		if rs := v.(map[string]any)["results"].([]any); len(rs) == 0 || rs[0].(map[string]any)["scoring_run_id"] == nil {
			t.Errorf("the scorer's results: %v", v)
		}
	}
	w.checks["benchmark runs get"] = func(t *testing.T, v any) {
		m := v.(map[string]any)
		if trials := m["trials"].([]any); len(trials) != 1 || m["suite_uid"] != w.suiteUID || m["trial_count"] != 1.0 {
			t.Errorf("the benchmark run: %v", v)
		}
	}
	w.checks["suites get"] = func(t *testing.T, v any) {
		confs := v.(map[string]any)["configurations"].([]any)
		tasks := v.(map[string]any)["tasks"].([]any)
		c1 := confs[1].(map[string]any)
		ac := c1["agent_configs"].([]any)[0].(map[string]any)
		if len(confs) != 2 || confs[0].(map[string]any)["role"] != "baseline" || c1["role"] != "candidate" || ac["harness"] != "claude" ||
			ac["model"] != "opus" || ac["agent_uid"] != w.reviewerUID || len(tasks) != 1 {
			t.Errorf("the suite: %v", v)
		}
	}
	w.checks["scorers list"] = func(t *testing.T, v any) {
		sc := v.(map[string]any)["scorers"].([]any)[0].(map[string]any)
		if sc["self_improvement_enabled"] != true || sc["threshold"] != 1.0 || sc["model_id"] != "judge-1" || sc["scope_mode"] != "selected_agents" {
			t.Errorf("the scorer: %v", sc)
		}
	}
}

// checkFactoryObject: the Factory object says what factory.yaml says.
func checkFactoryObject(t *testing.T, f map[string]any, w *contractWorld) {
	t.Helper()
	ad := f["agent_defaults"].(map[string]any)
	sd := f["scorer_defaults"].(map[string]any)
	repo := f["repositories"].([]any)[0].(map[string]any)
	ints := f["integrations"].([]any)
	si := f["self_improvement"].(map[string]any)
	for what, got := range map[string][2]any{
		"name":                    {f["name"], "Acme Platform"},
		"description":             {f["description"], "Contract of the SDKs"},
		"alias":                   {f["alias"], "acme-bot"},
		"code_forge":              {f["code_forge"], "GITHUB"},
		"repository":              {repo["owner"].(string) + "/" + repo["repo"].(string), "acme/widgets"},
		"repository forge":        {repo["code_forge"], "GITHUB"},
		"slack settings":          {ints[0].(map[string]any)["slack"].(map[string]any)["auto_respond_to_thread_replies"], false},
		"linear teams":            {ints[1].(map[string]any)["linear"].(map[string]any)["team_ids"].([]any)[0], "TEAM-1"},
		"default runner":          {ad["default_runner_uid"], w.runnerUID},
		"harness":                 {ad["harness"].(map[string]any)["type"], "claude"},
		"harness auth":            {ad["harness_auth_secrets"].(map[string]any)["claude_auth_secret_name"], "CLAUDE_KEY"},
		"mcp server":              {ad["mcp_servers"].(map[string]any)["docs"].(map[string]any)["warp_id"], "MCP_DOCS"},
		"scorer runner":           {sd["default_runner_uid"], w.runnerUID},
		"scoring model":           {f["scoring"].(map[string]any)["default_model"], "judge-1"},
		"default model":           {f["default_model"], "sonnet"},
		"self-improvement":        {si["reviewer_type"], "custom"},
		"self-improvement thresh": {si["failed_run_threshold"], float64(10)},
		"key":                     {f["key"], "acme"},
	} {
		if got[0] != got[1] {
			t.Errorf("%s: %v, want %v", what, got[0], got[1])
		}
	}
	if team, _ := f["team_uid"].(string); !strings.HasPrefix(team, "tm_") {
		t.Errorf("team_uid: %v", f["team_uid"])
	}
}

// calls are the SDKs' calls, in api.md's order, as the world's state
// allows each.
func (w *contractWorld) calls() []contract {
	return slices.Concat(w.agentCalls(), w.runCalls(), w.scheduleCalls(), w.identityCalls(), w.factoryCalls(), w.measureCalls(), w.lastCalls())
}

// agentCalls: agent (artifacts, environments, models, run).
func (w *contractWorld) agentCalls() []contract {
	return []contract{
		{name: "agent list", method: "GET", path: "/v1/agent?sort_by=name&include_malformed_skills=false", status: 200, typ: "AgentListResponse"},
		{name: "agent download artifact", method: "GET", path: "/v1/agent/artifacts/" + w.fileUID + "/download", status: 200},
		{name: "agent get artifact file", method: "GET", path: "/v1/agent/artifacts/" + w.fileUID, status: 200, typ: "union:AgentGetArtifactResponse"},
		{name: "agent get artifact plan", method: "GET", path: "/v1/agent/artifacts/" + w.planUID, status: 200, typ: "union:AgentGetArtifactResponse"},
		{name: "agent get artifact screenshot", method: "GET", path: "/v1/agent/artifacts/" + w.screenshotUID, status: 200, typ: "union:AgentGetArtifactResponse"},
		{name: "agent run by external reference", method: "GET", path: "/v1/agent/run-by-external-reference?url=" + url.QueryEscape("https://github.com/acme/widgets/pull/42"),
			status: 200, typ: "AgentGetRunByExternalReferenceResponse"},
		{name: "agent environments", method: "GET", path: "/v1/agent/environments?sort_by=name", status: 200, typ: "AgentListEnvironmentsResponse"},
		{name: "agent models", method: "GET", path: "/v1/agent/models", status: 200, typ: "AgentListModelsResponse"},
		{name: "agent run", method: "POST", path: "/v1/agent/runs", status: 200, typ: "AgentRunResponse",
			body: map[string]any{"prompt": "create", "title": "t", "mode": "plan", "interactive": false, "team": true, "on_behalf_of": "someone",
				"metadata": map[string]string{"ticket_id": "VIS-1"}, "config": map[string]any{"name": "n", "computer_use_enabled": false,
					"secrets": []map[string]string{{"name": "S"}}, "skills": []string{}}}},
		{name: "agent run (older path)", method: "POST", path: "/v1/agent/run", status: 200, typ: "AgentRunResponse", body: map[string]any{"prompt": "old"}},
	}
}

// runCalls: a run, its conversation, usage, timeline, transcript,
// handoff files, interrupt and follow-ups.
func (w *contractWorld) runCalls() []contract {
	run := "/v1/agent/runs/" + w.done
	return []contract{
		{name: "runs retrieve", method: "GET", path: run, status: 200, typ: "RunItem"},
		{name: "runs list", method: "GET", path: "/v1/agent/runs?limit=10&state=SUCCEEDED&state=INPROGRESS&sort_by=created_at&sort_order=asc&source=API&task_status=running&metadata%5Bticket_id%5D=VIS-238",
			status: 200, typ: "RunPage"},
		{name: "runs list, every filter", method: "GET", path: "/v1/agent/runs?q=produce&factory_uid=a&factory_uid=b&factory_only=false&artifact_type=FILE&execution_location=REMOTE&ancestor_run_id=" + w.done + "&cursor=&limit=50",
			status: 200, typ: "RunPage"},
		{name: "runs conversation", method: "GET", path: run + "/conversation", status: 200, typ: "RunGetConversationResponse"},
		{name: "runs harness usage", method: "GET", path: run + "/harness-usage", status: 200, typ: "RunGetHarnessUsageResponse"},
		{name: "runs timeline", method: "GET", path: run + "/timeline", status: 200, typ: "RunGetTimelineResponse"},
		{name: "runs transcript", method: "GET", path: run + "/transcript", status: 302},
		{name: "runs handoff attachments", method: "GET", path: run + "/handoff/attachments", status: 200, typ: "RunListHandoffAttachmentsResponse"},
		{name: "runs interrupt", method: "POST", path: "/v1/agent/runs/" + w.slow + "/interrupt", status: 202, typ: "any"},
		{name: "runs submit follow-up", method: "POST", path: run + "/followups", status: 200, typ: "RunSubmitFollowupResponse",
			body: map[string]any{"message": "more", "mode": "normal", "attachments": []map[string]string{{"attachment_id": w.fileUID, "file_name": "report.md"}}}},
	}
}

// scheduleCalls: the seven schedule calls.
func (w *contractWorld) scheduleCalls() []contract {
	sch := "/v1/agent/schedules/" + w.schedule
	return []contract{
		{name: "schedules create", method: "POST", path: "/v1/agent/schedules", status: 200, typ: "ScheduledAgentItem",
			body: map[string]any{"name": "weekly", "cron_schedule": "0 9 * * 1", "prompt": "weekly", "enabled": false, "mode": "normal", "team": true}},
		{name: "schedules retrieve", method: "GET", path: sch, status: 200, typ: "ScheduledAgentItem"},
		{name: "schedules update", method: "PUT", path: sch, status: 200, typ: "ScheduledAgentItem",
			body: map[string]any{"name": "daily", "cron_schedule": "0 10 * * *", "enabled": true, "prompt": "daily"}},
		{name: "schedules list", method: "GET", path: "/v1/agent/schedules", status: 200, typ: "ScheduleListResponse"},
		{name: "schedules pause", method: "POST", path: sch + "/pause", status: 200, typ: "ScheduledAgentItem"},
		{name: "schedules resume", method: "POST", path: sch + "/resume", status: 200, typ: "ScheduledAgentItem"},
		{name: "schedules delete", method: "DELETE", path: sch, status: 200, typ: "ScheduleDeleteResponse"},
	}
}

// identityCalls: agent identities, the session and conversations.
func (w *contractWorld) identityCalls() []contract {
	conv := "/v1/agent/conversations/" + w.conversation
	return []contract{
		{name: "identities create", key: adminKey, method: "POST", path: "/v1/agent/identities", status: 422, typ: "Error",
			body: map[string]any{"name": "helper", "agent_type": "CUSTOM", "secrets": []map[string]string{{"name": "S"}}}},
		{name: "identities update", key: adminKey, method: "PUT", path: "/v1/agent/identities/" + w.reviewerUID, status: 422, typ: "Error",
			body: map[string]any{"description": "changed"}},
		{name: "identities list", method: "GET", path: "/v1/agent/identities?factory_uid=" + w.factory.UID, status: 200, typ: "ListAgentIdentitiesResponse"},
		{name: "identities delete", key: adminKey, method: "DELETE", path: "/v1/agent/identities/" + w.reviewerUID, status: 422, typ: "Error"},
		{name: "identities get", method: "GET", path: "/v1/agent/identities/" + w.reviewerUID, status: 200, typ: "AgentResponse"},
		{name: "sessions check redirect", key: "-", method: "GET", path: "/v1/agent/sessions/" + factory.NewUUID() + "/redirect", status: 200,
			typ: "SessionCheckRedirectResponse"},
		{name: "conversations retrieve", method: "GET", path: conv, status: 200, typ: "RunGetConversationResponse"},
		{name: "conversations check redirect", key: "-", method: "GET", path: conv + "/redirect", status: 200, typ: "ConversationCheckRedirectResponse"},
		{name: "conversations download screenshot", method: "GET", path: conv + "/screenshots/" + w.screenshotUID + "/download", status: 302},
		{name: "conversations transcript", method: "GET", path: conv + "/transcript", status: 302},
		{name: "conversations interrupt (nothing in progress)", method: "POST", path: conv + "/interrupt", status: 409, typ: "Error"},
		{name: "conversations submit follow-up", method: "POST", path: conv + "/followups", status: 200, typ: "ConversationSubmitFollowupResponse",
			body: map[string]any{"message": "and more", "mode": "normal"}},
		{name: "networking egress ranges", method: "GET", path: "/v1/networking/egress-ranges", status: 200, typ: "NetworkingGetEgressRangesResponse"},
	}
}

// factoryCalls: factories, a dispatch, a run's scores, factory files.
func (w *contractWorld) factoryCalls() []contract {
	uid := w.factory.UID
	files := map[string]any{"files": []map[string]string{{"path": "factory.yaml", "content": contractFiles["factory.yaml"]},
		{"path": "agents/foreman/agent.md", "content": "---\nagentType: FOREMAN\n---\nGo.\n"},
		{"path": "automations/a/automation.md", "content": "---\ntriggers:\n  - provider: github\n    event: issue_labled\n---\nGo.\n"}}}
	return []contract{
		{name: "factories list", method: "GET", path: "/v1/factory?limit=50&search=acme", status: 200, typ: "FactoryPage"},
		{name: "factories get", method: "GET", path: "/v1/factory/" + uid, status: 200, typ: "Factory"},
		{name: "factories runs create", method: "POST", path: "/v1/factory/" + uid + "/runs", status: 200, typ: "FactoryRunCreateResponse",
			body: map[string]any{"prompt": "from the factory", "title": "T", "ticket_ref": "linear:ENG-1", "ticket_url": "https://linear.app/x/ENG-1"}},
		{name: "factories runs list scores", method: "GET", path: "/v1/factory/runs/" + w.scored + "/scores", status: 200, typ: "RunListScoresResponse"},
		{name: "files validate", method: "POST", path: "/v1/factory-files/validate", status: 200, typ: "FileValidateResponse", body: files},
		{name: "files schemas list", key: "-", method: "GET", path: "/v1/factory-files/schemas", status: 200, typ: "SchemaListResponse"},
		{name: "files schemas retrieve", key: "-", method: "GET", path: "/v1/factory-files/schemas/v1alpha1", status: 200, typ: "SchemaRetrieveResponse"},
		{name: "files schemas get document", key: "-", method: "GET", path: "/v1/factory-files/schemas/v1alpha1/factory", status: 200, typ: "object"},
	}
}

// measureCalls: scorers, benchmark suites and runs, tasks.
func (w *contractWorld) measureCalls() []contract {
	f := "/v1/factory/" + w.factory.UID
	sc := "/v1/factory/scorers/" + w.scorerID
	task := f + "/tasks/" + w.task
	return []contract{
		{name: "scorers list", method: "GET", path: "/v1/factory/scorers?factory_uid=" + w.factory.UID + "&include_managed=false", status: 200, typ: "ScorerListResponse"},
		{name: "scorers create", method: "POST", path: "/v1/factory/scorers", status: 422, typ: "Error", body: map[string]any{"name": "s", "model_id": "m"}},
		{name: "scorers list results", method: "GET", path: sc + "/results?limit=10", status: 200, typ: "ScorerResultsPage"},
		{name: "scorers list result reasons", method: "GET", path: sc + "/results/reasons?run_id=" + w.done, status: 200, typ: "ScorerListResultReasonsResponse"},
		{name: "suites list", method: "GET", path: f + "/benchmarks/suites", status: 200, typ: "SuitePage"},
		{name: "suites get", method: "GET", path: f + "/benchmarks/suites/" + w.suiteUID, status: 200, typ: "SuiteGetResponse"},
		{name: "suites create", method: "POST", path: f + "/benchmarks/suites", status: 422, typ: "Error", body: map[string]any{"name": "s", "agent_uid": w.reviewerUID}},
		{name: "suites launch run", method: "POST", path: f + "/benchmarks/suites/" + w.suiteUID + "/runs", status: 201, typ: "SuiteLaunchRunResponse",
			body: map[string]any{"repetition_count": 1, "configurations": []map[string]any{{"role": "baseline", "model": "auto"}}}},
		{name: "suites launch run: no repetitions", method: "POST", path: f + "/benchmarks/suites/" + w.suiteUID + "/runs", status: 400, typ: "Error",
			body: map[string]any{"repetition_count": 0}},
		{name: "benchmark runs list", method: "GET", path: f + "/benchmarks/runs?limit=10&state=running&state=scoring&state=completed", status: 200, typ: "BenchmarkRunPage"},
		{name: "benchmark runs get", method: "GET", path: f + "/benchmarks/runs/" + w.benchRun, status: 200, typ: "BenchmarkRunGetResponse"},
		{name: "benchmark runs get results", method: "GET", path: f + "/benchmarks/runs/" + w.benchRun + "/results", status: 200, typ: "BenchmarkResults"},
		{name: "benchmark runs get: none", method: "GET", path: f + "/benchmarks/runs/" + factory.NewUUID(), status: 404, typ: "Error"},
		{name: "benchmark runs get results: none", method: "GET", path: f + "/benchmarks/runs/" + factory.NewUUID() + "/results", status: 404, typ: "Error"},
		{name: "tasks list", method: "GET", path: f + "/tasks?stage=TRIAGE&full_list=true&include_current_run=true", status: 200, typ: "TaskPage"},
		{name: "tasks create", method: "POST", path: f + "/tasks", status: 200, typ: "Task", body: map[string]any{"conversation_id": w.unbound, "title": "t", "stage": "SPEC"}},
		{name: "tasks create: bound already", method: "POST", path: f + "/tasks", status: 409, typ: "Error", body: map[string]any{"conversation_id": w.unbound, "title": "t"}},
		{name: "tasks get", method: "GET", path: task, status: 200, typ: "Task"},
		{name: "tasks update", method: "PATCH", path: task, status: 200, typ: "Task", body: map[string]any{"stage": "REVIEW", "description": "d"}},
		{name: "tasks get by conversation", method: "GET", path: f + "/task-by-conversation?conversation_id=" + w.taskConversation, status: 200, typ: "Task"},
		{name: "tasks get by run", method: "GET", path: f + "/task-by-run?run_id=" + w.taskRun, status: 200, typ: "Task"},
		{name: "tasks get by run: none", method: "GET", path: f + "/task-by-run?run_id=" + w.done, status: 404, typ: "Error"},
		{name: "tasks cancel", method: "POST", path: task + "/cancel", status: 200, typ: "Task"},
		{name: "tasks delete", method: "DELETE", path: task, status: 204},
		{name: "tasks get: deleted", method: "GET", path: task, status: 404, typ: "Error"},
		{name: "inbox list", method: "GET", path: "/v1/factory-inbox", status: 200, typ: "InboxList"},
		{name: "inbox mark read", method: "POST", path: "/v1/factory-inbox/notifications/read", status: 200, typ: "InboxMarkReadResponse",
			body: map[string]any{"notification_uids": []string{"ntf_nope"}}},
		{name: "inbox mark unread", method: "POST", path: "/v1/factory-inbox/notifications/unread", status: 200, typ: "InboxMarkReadResponse",
			body: map[string]any{"notification_uids": []string{"ntf_nope"}}},
	}
}

// lastCalls: errors, then the cancel of the run the interrupt stopped.
func (w *contractWorld) lastCalls() []contract {
	return []contract{
		{name: "error: no such run", method: "GET", path: "/v1/agent/runs/run_nope0000000000000000", status: 404, typ: "Error"},
		{name: "error: a bad parameter", method: "GET", path: "/v1/agent/runs?limit=0", status: 400, typ: "Error"},
		{name: "error: no key", key: "-", method: "GET", path: "/v1/agent/runs", status: 401, typ: "Error"},
		{name: "runs cancel", method: "POST", path: "/v1/agent/runs/" + w.slow + "/cancel", status: 200, typ: "string"},
	}
}

// contractRedirects: the transcripts and the screenshot redirect to URLs
// that answer without a key.
func contractRedirects(t *testing.T, h *harness, w *contractWorld) {
	for _, p := range []string{"/v1/agent/runs/" + w.done + "/transcript", "/v1/agent/conversations/" + w.conversation + "/transcript",
		"/v1/agent/conversations/" + w.conversation + "/screenshots/" + w.screenshotUID + "/download"} {
		status, hdr, _ := sdkDo(t, h, runsKey, "GET", p, nil, "Accept", "application/octet-stream")
		loc := hdr.Get("Location")
		if status != 302 || loc == "" {
			t.Fatalf("%s: %d %q", p, status, loc)
		}
		resp, err := http.Get(loc)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(b) == 0 {
			t.Fatalf("%s → %s: %d", p, loc, resp.StatusCode)
		}
		if strings.Contains(p, "transcript") {
			var first map[string]any
			if err := json.Unmarshal(bytes.SplitN(b, []byte("\n"), 2)[0], &first); err != nil || first["event_type"] != "oz_run_created" {
				t.Errorf("%s: the transcript's first line: %s", p, bytes.SplitN(b, []byte("\n"), 2)[0])
			}
		}
		resp, _ = http.Get(loc + "x")
		if resp.StatusCode != 403 {
			t.Errorf("%s: a tampered token: %d", p, resp.StatusCode)
		}
		resp.Body.Close()
	}
}

// contractSources: runs from a custom webhook's automation, the factory
// API and the Agents API read back with their sources; the webhook's
// automation runs the reviewer, whose claude harness this server does not
// run: the run fails with the platform's code, and this server's in
// status_message.detail.
func contractSources(t *testing.T, h *harness, st *sdkTypes, w *contractWorld) {
	ci := w.ci
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
	m := waitState(t, h, hookRun, "FAILED")
	st.conforms(t, "RunItem", m)
	sm := m["status_message"].(map[string]any)
	if m["source"] != "CUSTOM_WEBHOOK" || sm["error_code"] != "integration_not_configured" || sm["detail"] != "harness_not_configured" {
		t.Errorf("the reviewer's run: source %v, status %v", m["source"], sm)
	}
	if _, ok := m["request_usage"]; !ok || m["request_usage"] != nil {
		t.Errorf("request_usage: present and null until known: %v", m)
	}
	status, b := call(t, h, "POST", "/v1/factory/"+w.factory.UID+"/runs", map[string]any{"prompt": "dispatched"})
	var d map[string]any
	json.Unmarshal(b, &d)
	if status != 200 || d["ticket_ref"] != "api:"+d["run_id"].(string) || d["foreman_agent"] != "foreman" {
		t.Fatalf("dispatch: %d %s", status, b)
	}
	m = waitState(t, h, d["run_id"].(string), "SUCCEEDED")
	if m["source"] != "API" || m["factory_uid"] != w.factory.UID || m["root_run_id"] != m["run_id"] || m["finished_at"] == nil {
		t.Errorf("a dispatched run: %v", m)
	}
	pr := m["artifacts"].([]any)
	for _, a := range pr {
		if a.(map[string]any)["artifact_type"] == "PULL_REQUEST" && a.(map[string]any)["data"].(map[string]any)["status"] != "unknown" {
			t.Errorf("a pull request this server heard nothing of: %v", a)
		}
	}
}

// contractKnownRoutes: every path of the SDKs' api.md answers something
// other than 404 for a route (a 404 names a missing resource, never a
// missing route).
func contractKnownRoutes(t *testing.T, h *harness, w *contractWorld) {
	for _, r := range sdkRoutes {
		p := strings.NewReplacer("{uid}", w.factory.UID, "{runId}", w.done, "{run_id}", w.done).Replace(r[1])
		status, _, b := sdkDo(t, h, adminKey, r[0], p, map[string]any{})
		var prob map[string]any
		json.Unmarshal(b, &prob)
		if status == 404 && !strings.Contains(fmt.Sprint(prob["detail"]), "no ") || status == 405 {
			t.Errorf("%s %s: %d %s", r[0], p, status, b)
		}
	}
}

// sdkRoutes are the method and path of every call of the newest SDKs'
// api.md (ts 1f216b5 api.md, py 3c9d075 api.md), with /v1.
var sdkRoutes = [][2]string{
	{"GET", "/v1/agent"}, {"GET", "/v1/agent/artifacts/a/download"}, {"GET", "/v1/agent/artifacts/a"},
	{"GET", "/v1/agent/run-by-external-reference?url=x"}, {"GET", "/v1/agent/environments"}, {"GET", "/v1/agent/models"},
	{"POST", "/v1/agent/runs"}, {"GET", "/v1/agent/runs/{runId}"}, {"GET", "/v1/agent/runs"}, {"POST", "/v1/agent/runs/{runId}/cancel"},
	{"GET", "/v1/agent/runs/{runId}/conversation"}, {"GET", "/v1/agent/runs/{runId}/harness-usage"}, {"GET", "/v1/agent/runs/{runId}/timeline"},
	{"GET", "/v1/agent/runs/{runId}/transcript"}, {"POST", "/v1/agent/runs/{runId}/interrupt"}, {"GET", "/v1/agent/runs/{runId}/handoff/attachments"},
	{"POST", "/v1/agent/runs/{runId}/followups"},
	{"POST", "/v1/agent/schedules"}, {"GET", "/v1/agent/schedules/s"}, {"PUT", "/v1/agent/schedules/s"}, {"GET", "/v1/agent/schedules"},
	{"DELETE", "/v1/agent/schedules/s"}, {"POST", "/v1/agent/schedules/s/pause"}, {"POST", "/v1/agent/schedules/s/resume"},
	{"POST", "/v1/agent/identities"}, {"PUT", "/v1/agent/identities/x"}, {"GET", "/v1/agent/identities"}, {"DELETE", "/v1/agent/identities/x"},
	{"GET", "/v1/agent/identities/x"},
	{"GET", "/v1/agent/sessions/x/redirect"},
	{"GET", "/v1/agent/conversations/c"}, {"GET", "/v1/agent/conversations/c/redirect"}, {"GET", "/v1/agent/conversations/c/screenshots/s/download"},
	{"GET", "/v1/agent/conversations/c/transcript"}, {"POST", "/v1/agent/conversations/c/interrupt"}, {"POST", "/v1/agent/conversations/c/followups"},
	{"GET", "/v1/networking/egress-ranges"},
	{"GET", "/v1/factory"}, {"GET", "/v1/factory/{uid}"}, {"POST", "/v1/factory/{uid}/runs"}, {"GET", "/v1/factory/runs/{run_id}/scores"},
	{"POST", "/v1/factory-files/validate"}, {"GET", "/v1/factory-files/schemas/v1alpha1"}, {"GET", "/v1/factory-files/schemas"},
	{"GET", "/v1/factory-files/schemas/v1alpha1/factory"},
	{"POST", "/v1/factory/scorers"}, {"GET", "/v1/factory/scorers"}, {"GET", "/v1/factory/scorers/1/results/reasons?run_id=r"},
	{"GET", "/v1/factory/scorers/1/results"},
	{"POST", "/v1/factory/{uid}/benchmarks/suites"}, {"GET", "/v1/factory/{uid}/benchmarks/suites"}, {"GET", "/v1/factory/{uid}/benchmarks/suites/s"},
	{"POST", "/v1/factory/{uid}/benchmarks/suites/s/runs"}, {"GET", "/v1/factory/{uid}/benchmarks/runs"}, {"GET", "/v1/factory/{uid}/benchmarks/runs/r"},
	{"GET", "/v1/factory/{uid}/benchmarks/runs/r/results"},
	{"POST", "/v1/factory/{uid}/tasks"}, {"PATCH", "/v1/factory/{uid}/tasks/t"}, {"GET", "/v1/factory/{uid}/tasks"}, {"DELETE", "/v1/factory/{uid}/tasks/t"},
	{"POST", "/v1/factory/{uid}/tasks/t/cancel"}, {"GET", "/v1/factory/{uid}/tasks/t"}, {"GET", "/v1/factory/{uid}/task-by-conversation?conversation_id=c"},
	{"GET", "/v1/factory/{uid}/task-by-run?run_id=r"},
}
