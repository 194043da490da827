package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"factory"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
	"factory/internal/testnpm"
)

// mcpServer serves two factories, acme and other, whose runs leave their
// run token in their workspace (token.txt) and wait.
func mcpServer(t *testing.T) *harness {
	t.Helper()
	tree := map[string]string{
		"factory.yaml":            "schemaVersion: v1alpha1\nname: NAME\nrepositories:\n  - owner: acme\n    name: NAME\nagentDefaults:\n  model: auto\n",
		"agents/foreman/agent.md": "---\nagentType: FOREMAN\n---\nLead.\n",
		"agents/helper/agent.md":  "---\nagentType: IMPLEMENT\n---\nHelp.\n",
	}
	var sources []factorySourceArg
	for _, name := range []string{"acme", "other"} {
		root := t.TempDir()
		files := map[string]string{}
		for p, c := range tree {
			files[p] = strings.ReplaceAll(c, "NAME", name)
		}
		writeTree(t, root, files)
		sources = append(sources, factorySourceArg{name, root})
	}
	script := `printf %s "$FACTORY_RUN_TOKEN" > token.txt; sleep 30`
	h := startWith(t, func(s *store.Store, data string) *runs.Manager {
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "default", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Environments: map[string]runs.Environment{"default": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", script}, Grace: 100 * time.Millisecond}}}})
	}, dirSource(sources[0].name, sources[0].root), dirSource(sources[1].name, sources[1].root))
	addRunsKey(t, h)
	return h
}

type factorySourceArg struct{ name, root string }

// runToken dispatches a run of a factory and reads the token its agent
// was given.
func runToken(t *testing.T, h *harness, factoryUID string) (runID, token string) {
	t.Helper()
	status, b := call(t, h, "POST", "/v1/factory/"+factoryUID+"/runs", map[string]any{"prompt": "work"})
	var out map[string]any
	if json.Unmarshal(b, &out); status != 200 {
		t.Fatalf("dispatch: %d %s", status, b)
	}
	runID = out["run_id"].(string)
	path := filepath.Join(h.store.Dir(), "runs", runID, "workspace", "token.txt")
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return runID, string(b)
		}
	}
	t.Fatalf("run %s left no token", runID)
	return "", ""
}

// mcpConnect opens a session of the Go SDK's client with a bearer token.
func mcpConnect(t *testing.T, h *harness, token string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url + "/v1/mcp/factory",
		HTTPClient: &http.Client{Transport: bearerTransport(token)}, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// toolText calls a tool and returns its text and whether it was an error.
func toolText(t *testing.T, s *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

var (
	publicTools = []string{"complete_task", "get_conversation", "get_factory_file_schema", "get_task", "list_factories", "list_tasks",
		"message_foreman", "send_task", "validate_factory_files"}
	orchestrationTools = []string{"ask_human", "dispatch_agent", "get_run", "message_run", "set_stage"}
)

// TestFactoryMCPServer checks the Factory MCP server with the MCP Go SDK's
// client: the tools an API key and a run's token see, with their input
// schemas; a bad token refused before any session; a run's token kept to
// its own factory and task and worthless once the run ended; tool errors
// as MCP tool errors a model can read.
func TestFactoryMCPServer(t *testing.T) {
	h := mcpServer(t)
	acme, other := h.status("acme"), h.status("other")
	if _, err := mcpConnect(t, h, "fk_nope"); err == nil {
		t.Fatal("a session opened with an unknown key")
	}
	key, err := mcpConnect(t, h, runsKey)
	if err != nil {
		t.Fatal(err)
	}
	checkTools(t, key, publicTools)
	text, isErr := toolText(t, key, "list_factories", nil)
	if isErr || !strings.Contains(text, acme.UID) || !strings.Contains(text, other.UID) || !strings.Contains(text, `"helper"`) {
		t.Errorf("list_factories with a key: %s", text)
	}
	if res, err := key.CallTool(context.Background(), &mcp.CallToolParams{Name: "dispatch_agent", Arguments: map[string]any{"agent": "helper", "prompt": "x"}}); err == nil && !res.IsError {
		t.Error("an API key dispatched an agent")
	}
	if text, isErr := toolText(t, key, "get_factory_file_schema", map[string]any{"document": "agent"}); isErr || !strings.Contains(text, "agentType") {
		t.Errorf("get_factory_file_schema: %s", text)
	}
	if text, isErr := toolText(t, key, "validate_factory_files", map[string]any{"files": []map[string]string{{"path": "agents/x/agent.md", "content": "---\nagentTyp: FOREMAN\n---\nGo.\n"}}}); isErr || !strings.Contains(text, "agentTyp") {
		t.Errorf("validate_factory_files: %s", text)
	}

	runID, token := runToken(t, h, acme.UID)
	run, err := mcpConnect(t, h, token)
	if err != nil {
		t.Fatal(err)
	}
	checkTools(t, run, append(slices.Clone(publicTools), orchestrationTools...))
	checkRunToken(t, run, acme, other)
	// Another task of the same factory: read, never changed, by this run.
	otherRun, _ := runToken(t, h, acme.UID)
	r, _ := h.store.Run(otherRun)
	status, b := call(t, h, "POST", "/v1/factory/"+acme.UID+"/tasks", map[string]any{"conversation_id": r.Conversation(), "title": "Not yours"})
	var task map[string]any
	if json.Unmarshal(b, &task); status != 200 {
		t.Fatalf("task: %d %s", status, b)
	}
	if text, isErr := toolText(t, run, "get_task", map[string]any{"factory_task_uid": task["uid"]}); isErr || !strings.Contains(text, "Not yours") {
		t.Errorf("get_task of a task of the run's factory: %s", text)
	}
	for tool, args := range map[string]map[string]any{"complete_task": {"factory_task_uid": task["uid"]},
		"message_foreman": {"factory_task_uid": task["uid"], "message": "hi"}, "send_task": {"factory_task_uid": task["uid"], "note": "back"}} {
		if text, isErr := toolText(t, run, tool, args); !isErr || !strings.Contains(text, "its own task only") {
			t.Errorf("%s of another task: %v %s", tool, isErr, text)
		}
	}
	if _, err := h.c.CancelRun(context.Background(), runID); err != nil {
		t.Fatal(err)
	}
	if res, err := run.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_factories"}); err == nil && !res.IsError {
		t.Error("a cancelled run's token still works")
	}
	if _, err := mcpConnect(t, h, token); err == nil {
		t.Error("a cancelled run's token opened a session")
	}
}

// checkTools: exactly these tools, each with an object input schema.
func checkTools(t *testing.T, s *mcp.ClientSession, want []string) {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tool := range res.Tools {
		got = append(got, tool.Name)
		schema, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(schema), `"type":"object"`) || tool.Description == "" {
			t.Errorf("tool %s: schema %s, description %q", tool.Name, schema, tool.Description)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
}

// checkRunToken: a run's token lists its own factory only, cannot reach
// another's tasks, and its errors are tool errors that say why.
func checkRunToken(t *testing.T, s *mcp.ClientSession, own, other *factory.FactoryStatus) {
	t.Helper()
	text, isErr := toolText(t, s, "list_factories", nil)
	if isErr || !strings.Contains(text, own.UID) || strings.Contains(text, other.UID) {
		t.Errorf("list_factories with a run token: %s", text)
	}
	if text, isErr := toolText(t, s, "list_tasks", map[string]any{"factory_uid": other.UID}); !isErr || !strings.Contains(text, "its own factory") {
		t.Errorf("list_tasks of another factory: %v %s", isErr, text)
	}
	// New work from a run would be a tree past its task and its depth
	// limit, in its own factory or another's.
	for _, uid := range []string{other.UID, own.UID} {
		if text, isErr := toolText(t, s, "send_task", map[string]any{"factory_uid": uid, "title": "x", "note": "y"}); !isErr || !strings.Contains(text, "not start new work") {
			t.Errorf("send_task of new work to %s: %v %s", uid, isErr, text)
		}
	}
	if text, isErr := toolText(t, s, "dispatch_agent", map[string]any{"agent": "nobody", "prompt": "x"}); !isErr || !strings.Contains(text, "helper") {
		t.Errorf("dispatch_agent of an unknown agent: %v %s", isErr, text)
	}
	if text, isErr := toolText(t, s, "set_stage", map[string]any{"stage": "SOMEWHERE"}); !isErr || !strings.Contains(text, "TRIAGE") {
		t.Errorf("set_stage to no stage: %v %s", isErr, text)
	}
	if text, isErr := toolText(t, s, "get_run", map[string]any{"run_id": "run_nope"}); !isErr || !strings.Contains(text, "no run") {
		t.Errorf("get_run of nothing: %v %s", isErr, text)
	}
}

// TestFactoryMCPServerFromTypeScript talks to the server with the MCP
// TypeScript SDK's client (@modelcontextprotocol/sdk from npm): an
// independent implementation of the transport lists the tools and calls
// one.
func TestFactoryMCPServerFromTypeScript(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	pkg := testnpm.Package(t, "@modelcontextprotocol/sdk", "1.32.2")
	h := mcpServer(t)
	acme := h.status("acme")
	script := filepath.Join(t.TempDir(), "client.mjs")
	client := filepath.Join(pkg, "dist", "esm", "client")
	src := `import { Client } from "` + client + `/index.js";
import { StreamableHTTPClientTransport } from "` + client + `/streamableHttp.js";
const transport = new StreamableHTTPClientTransport(new URL(process.argv[2]), {requestInit: {headers: {Authorization: "Bearer " + process.argv[3]}}});
const c = new Client({name: "ts-test", version: "1.0.0"});
await c.connect(transport);
const tools = await c.listTools();
const res = await c.callTool({name: "list_factories", arguments: {}});
const bad = await c.callTool({name: "list_tasks", arguments: {factory_uid: "fc_nope"}});
console.log(JSON.stringify({tools: tools.tools.map(t => t.name).sort(), text: res.content[0].text, badError: bad.isError, badText: bad.content[0].text}));
await c.close();
`
	if err := os.WriteFile(script, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("node", script, h.url+"/v1/mcp/factory", runsKey).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct {
		Tools    []string `json:"tools"`
		Text     string   `json:"text"`
		BadError bool     `json:"badError"`
		BadText  string   `json:"badText"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := slices.Clone(publicTools)
	slices.Sort(want)
	if !slices.Equal(got.Tools, want) || !strings.Contains(got.Text, acme.UID) || !got.BadError || !strings.Contains(got.BadText, "no factory") {
		t.Errorf("the TypeScript client saw %+v", got)
	}
}
