package runtime_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory"

	"factory/internal/runtime"
	"factory/internal/testbin"
)

// demoAgent builds the factory binary once: its demo-agent --acp is the
// real ACP agent these tests drive.
func demoAgent(t *testing.T) string { return testbin.Factory(t) }

func acpTurn(t *testing.T, e *runtime.ACPExecutor, mod func(*runtime.Turn), cancelAfter string) (runtime.Result, *run, string) {
	t.Helper()
	tn := runtime.Turn{RunID: factory.NewUID("run_"), Prompt: "Triage the issue.\nMore detail.", Dir: t.TempDir()}
	dir := tn.Workspace()
	os.MkdirAll(filepath.Join(dir, "attachments"), 0o755)
	os.WriteFile(filepath.Join(dir, "attachments", "event-payload.json"), []byte(`{"a":1}`), 0o644)
	if mod != nil {
		mod(&tn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &run{}
	add := func(ev runtime.Event) {
		r.add(ev)
		if cancelAfter != "" && strings.Contains(ev.Message, cancelAfter) {
			cancel()
		}
	}
	if e.Grace == 0 {
		e.Grace = time.Second
	}
	res := e.Run(ctx, tn, add)
	return res, r, dir
}

func TestACPWithTheDemoAgent(t *testing.T) {
	bin := demoAgent(t)
	e := &runtime.ACPExecutor{Command: []string{bin, "demo-agent", "--acp", "--delay", "10ms"}}
	res, r, dir := acpTurn(t, e, nil, "")
	if res.State != factory.StateSucceeded {
		t.Fatalf("%+v", res)
	}
	events := strings.Join(r.list(), "\n")
	for _, want := range []string{"[demo agent] this is the bundled demo agent: it does no AI", "read a prompt of 30 bytes", "found 1 attachment(s)", "wrote SUMMARY.md",
		"[permission] Write SUMMARY.md: Allow (allow_once)"} {
		if !strings.Contains(events, want) {
			t.Errorf("no %q in\n%s", want, events)
		}
	}
	summary, err := os.ReadFile(filepath.Join(dir, "SUMMARY.md"))
	if err != nil || !strings.Contains(string(summary), "event-payload.json (7 bytes)") || !strings.Contains(string(summary), "Triage the issue.") {
		t.Fatalf("SUMMARY.md: %v\n%s", err, summary)
	}

	// MCP servers of the run's setup are offered to the session: a command
	// as stdio, a url as HTTP; a warpId one (the product's registry) is not.
	res, r, _ = acpTurn(t, e, func(tn *runtime.Turn) {
		tn.MCPServers = map[string]json.RawMessage{"local": json.RawMessage(`{"command":"./mcp","args":["--stdio"],"env":{"A":"1"}}`),
			"remote": json.RawMessage(`{"url":"https://mcp.example/mcp","headers":{"X-Team":"web"}}`), "registry": json.RawMessage(`{"warpId":"mcp_1"}`)}
	}, "")
	if got := strings.Join(r.list(), "\n"); res.State != factory.StateSucceeded || !strings.Contains(got, "was offered MCP servers: local (stdio), remote (http)") {
		t.Fatalf("MCP servers: %+v\n%s", res, got)
	}

	// A follow-up turn carries the history.
	_, _, dir = acpTurn(t, e, func(tn *runtime.Turn) { tn.FollowUp = "also label it" }, "")
	if summary, _ := os.ReadFile(filepath.Join(dir, "SUMMARY.md")); !strings.Contains(string(summary), "## Follow-up\n\nalso label it") {
		t.Fatalf("follow-up: %s", summary)
	}

	// The environment's policy denies the write.
	deny := &runtime.ACPExecutor{Command: e.Command, Permissions: "deny"}
	res, r, dir = acpTurn(t, deny, nil, "")
	if _, err := os.Stat(filepath.Join(dir, "SUMMARY.md")); res.State != factory.StateSucceeded || err == nil ||
		!strings.Contains(strings.Join(r.list(), "\n"), "not allowed to write SUMMARY.md") {
		t.Fatalf("denied: %+v %v", res, err)
	}
}

func TestACPCancelMidTurn(t *testing.T) {
	bin := demoAgent(t)
	e := &runtime.ACPExecutor{Command: []string{"sh", "-c", "echo $$ > pid; exec " + bin + " demo-agent --acp --delay 2s"}}
	start := time.Now()
	res, r, dir := acpTurn(t, e, nil, "it does no AI")
	if res.State != factory.StateCancelled || time.Since(start) > 5*time.Second {
		t.Fatalf("%+v after %v, events %q", res, time.Since(start), r.list())
	}
	if _, err := os.Stat(filepath.Join(dir, "SUMMARY.md")); err == nil {
		t.Fatal("a cancelled turn wrote SUMMARY.md")
	}
	noneLeft(t, dir)
}

func TestACPMisbehavingAgents(t *testing.T) {
	bin := demoAgent(t)
	cases := []struct {
		name, script string
		mod          func(*runtime.Turn)
		state        factory.RunState
		msg          string
	}{
		{"never answers initialize", `echo $$ > pid; sleep 30`, nil, factory.StateError, "did not answer initialize"},
		{"crashes", `echo $$ > pid; echo "panic: oops" >&2; exit 3`, nil, factory.StateError, "the agent exited"},
		{"writes garbage", `echo $$ > pid; while :; do echo 'not json at all'; sleep 0.01; done`, nil, factory.StateError, "did not answer initialize"},
		{"goes quiet", `echo $$ > pid; exec ` + bin + ` demo-agent --acp --delay 5s`, func(tn *runtime.Turn) { tn.IdleTimeout = 500 * time.Millisecond }, factory.StateFailed, "idle timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &runtime.ACPExecutor{Command: []string{"sh", "-c", c.script}, InitTimeout: 500 * time.Millisecond}
			start := time.Now()
			res, _, dir := acpTurn(t, e, c.mod, "")
			if res.State != c.state || !strings.Contains(res.Message, c.msg) || time.Since(start) > 8*time.Second {
				t.Fatalf("%+v after %v", res, time.Since(start))
			}
			noneLeft(t, dir)
		})
	}
}
