package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory"

	"factory/internal/runtime"
	"factory/internal/testproc"
)

// fidelityTurn runs one turn of the demo agent in a laid-out run folder
// (its own HOME), as a host does.
func fidelityTurn(t *testing.T, e *runtime.ACPExecutor, tn runtime.Turn, cancelAfter string) (runtime.Result, []string) {
	t.Helper()
	if err := runtime.LayOut(&tn); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &run{}
	res := e.Run(ctx, tn, func(ev runtime.Event) {
		r.add(ev)
		if cancelAfter != "" && strings.Contains(ev.Message, cancelAfter) {
			cancel()
		}
	})
	return res, r.list()
}

// TestACPSessionLoad: a follow-up's turn loads the run's session
// (session/load) in a new agent process; the history the agent replays is
// not reported again, and the follow-up alone is the prompt. A session the
// agent cannot load is said, and a new one carries the conversation.
func TestACPSessionLoad(t *testing.T) {
	bin := demoAgent(t)
	e := &runtime.ACPExecutor{Command: []string{bin, "demo-agent", "--acp", "--delay", "1ms"}}
	tn := runtime.Turn{RunID: factory.NewUID("run_"), Prompt: "Triage the issue.", Dir: t.TempDir()}
	res, _ := fidelityTurn(t, e, tn, "")
	if res.State != factory.StateSucceeded || !strings.HasPrefix(res.Session, "demo-") {
		t.Fatalf("first turn: %+v", res)
	}
	tn.Session, tn.FollowUp, tn.Number = res.Session, "also label it", 2
	res2, events := fidelityTurn(t, e, tn, "")
	all := strings.Join(events, "\n")
	if res2.State != factory.StateSucceeded || res2.Session != res.Session || !strings.Contains(all, "continuing session "+res.Session+" (turn 2)") ||
		strings.Contains(all, "(replayed)") || !strings.Contains(all, "read a prompt of 13 bytes") {
		t.Fatalf("loaded: %+v\n%s", res2, all)
	}
	summary, _ := os.ReadFile(filepath.Join(tn.Workspace(), "SUMMARY.md"))
	if !strings.Contains(string(summary), "## Prompt\n\nTriage the issue.") || !strings.Contains(string(summary), "## Follow-up\n\nalso label it") {
		t.Fatalf("SUMMARY.md: %s", summary)
	}

	tn.Session = "demo-gone"
	res3, events := fidelityTurn(t, e, tn, "")
	all = strings.Join(events, "\n")
	if res3.State != factory.StateSucceeded || res3.Session == "demo-gone" || !strings.Contains(all, "could not load session demo-gone") ||
		!strings.Contains(all, "Follow-up from the user:") && !strings.Contains(all, "read a prompt of") {
		t.Fatalf("a session that does not load: %+v\n%s", res3, all)
	}
}

// TestACPEndsTheWholeTree: a cancel while the agent's command runs in a
// session of its own (as Claude Code runs commands) leaves no process of
// the run, found by the run's ID in their environment.
func TestACPEndsTheWholeTree(t *testing.T) {
	bin := demoAgent(t)
	e := &runtime.ACPExecutor{Command: []string{bin, "demo-agent", "--acp", "--delay", "1ms"}, Grace: time.Second,
		ExitGrace: time.Second, KillGrace: time.Second}
	tn := runtime.Turn{RunID: factory.NewUID("run_"), Prompt: "Build it.\ndemo: command 300", Dir: t.TempDir()}
	marker := runtime.RunMarker(tn.RunID)
	start := time.Now()
	res, events := fidelityTurn(t, e, tn, "started a command in a session of its own")
	if res.State != factory.StateCancelled || time.Since(start) > 10*time.Second {
		t.Fatalf("%+v after %s: %q", res, time.Since(start), events)
	}
	testproc.NoneWithEnv(t, 2*time.Second, marker)
}

// TestACPPermissionsPerRequest: allow answers a write inside the workspace
// with the narrowest allow option and refuses one outside (which does not
// happen); deny that only the agent can take as an abort ends the run
// FAILED, not_authorized, naming the tool call.
func TestACPPermissionsPerRequest(t *testing.T) {
	bin := demoAgent(t)
	e := &runtime.ACPExecutor{Command: []string{bin, "demo-agent", "--acp", "--delay", "1ms"}}
	tn := runtime.Turn{RunID: factory.NewUID("run_"), Prompt: "Write.\ndemo: write outside", Dir: t.TempDir()}
	res, events := fidelityTurn(t, e, tn, "")
	all := strings.Join(events, "\n")
	outside := filepath.Join(tn.Dir, "OUTSIDE.md")
	if _, err := os.Stat(outside); err == nil || res.State != factory.StateSucceeded {
		t.Fatalf("a write outside the workspace happened: %+v\n%s", res, all)
	}
	for _, want := range []string{"[permission] Write " + outside + ": Reject (reject_once): outside the workspace: " + outside,
		"not allowed to write " + outside + " (reject)", "[permission] Write SUMMARY.md: Allow (allow_once); paths: " + filepath.Join(tn.Workspace(), "SUMMARY.md")} {
		if !strings.Contains(all, want) {
			t.Errorf("no %q in\n%s", want, all)
		}
	}

	deny := &runtime.ACPExecutor{Command: e.Command, Permissions: runtime.PermissionsDeny}
	tn = runtime.Turn{RunID: factory.NewUID("run_"), Prompt: "Write.\ndemo: abort when refused", Dir: t.TempDir()}
	res, events = fidelityTurn(t, deny, tn, "")
	if res.State != factory.StateFailed || res.Code != runtime.CodeNotAuthorized || !strings.Contains(res.Message, "Write SUMMARY.md") {
		t.Fatalf("deny with an aborting agent: %+v\n%s", res, strings.Join(events, "\n"))
	}
}
