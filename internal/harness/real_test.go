package harness_test

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"factory"
	"factory/internal/gateway"
	"factory/internal/gateway/scripted"
	"factory/internal/harness"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
)

// TestHarnessesEnv names the harnesses folder the real agents' tests run
// (make test installs them there with factory harnesses install when npm
// is on the machine).
const TestHarnessesEnv = "FACTORY_TEST_HARNESSES"

// providerKey is the provider's real key: the gateway's only.
const providerKey = "sk-provider-real-key-must-not-leak-7f3a"

// realModels are the models each harness asks the scripted server for.
var realModels = map[string]string{"claude": "claude-sonnet-4-5", "codex": "gpt-5.3-codex", "gemini": "gemini-2.5-flash"}

// realRig is a run manager whose only environment runs a real harness,
// through the model gateway, in front of a scripted model server.
type realRig struct {
	h     harness.Harness
	up    *scripted.Server
	store *store.Store
	m     *runs.Manager

	mu        sync.Mutex
	workspace string // the workspace of the run going on
	outside   bool   // its file is written beside the workspace, not in it
	command   string // its command

	log lockedBuffer // the run manager's and the gateway's log
}

// lockedBuffer is a log written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (rg *realRig) target() string {
	rg.mu.Lock()
	defer rg.mu.Unlock()
	if rg.outside {
		return filepath.Join(filepath.Dir(rg.workspace), "OUTSIDE.md")
	}
	return filepath.Join(rg.workspace, "NOTES.md")
}

func (rg *realRig) shellCommand() string {
	rg.mu.Lock()
	defer rg.mu.Unlock()
	return cmpOr(rg.command, "echo hi > shell.txt")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func newRealRig(t *testing.T, name string) *realRig {
	t.Helper()
	root := os.Getenv(TestHarnessesEnv)
	if root == "" {
		t.Skipf("%s is not set: no installed harnesses to run (make test installs them when npm is there)", TestHarnessesEnv)
	}
	h, _ := harness.Lookup(name)
	if h.Installed(root) == "" {
		t.Skipf("%s is not installed in %s (factory harnesses install %s)", name, root, name)
	}
	if _, err := exec.LookPath("node"); err != nil && h.Node {
		t.Skip("node is not installed")
	}
	dir := t.TempDir()
	s, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tokens := &gateway.Tokens{Key: []byte("the test server's gateway key")}
	rg := &realRig{h: h, store: s}
	rg.up = scripted.New(writeThenShell(rg.target, rg.shellCommand))
	t.Cleanup(rg.up.Close)
	var gw *httptest.Server
	setup := func(r *factory.Run, _ string) ([]string, map[string][]byte, *runtime.Result) {
		env, home := h.Setup(harness.Turn{Model: realModels[name], GatewayURL: gw.URL + "/v1/gateway/" + h.Provider, Token: tokens.Mint(r.ID)})
		return env, home, nil
	}
	log := slog.New(slog.NewTextHandler(&rg.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rg.m = runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: name, Log: log, HarnessSetup: setup,
		// Confined, as the server's own environment of an installed harness
		// is: the harness's install is what it reads besides the system.
		Environments: map[string]runs.Environment{name: {Executor: &runtime.ACPExecutor{Command: h.Command(root)}, Harness: name, ReadOnly: []string{root}}}})
	g := gateway.New(gateway.Config{Tokens: tokens, Runs: rg.m, Log: log,
		Providers: map[string]gateway.Provider{h.Provider: {URL: rg.up.URL}},
		Key:       func(*factory.Run, string) ([]byte, error) { return []byte(providerKey), nil }})
	mux := http.NewServeMux()
	mux.Handle(gateway.Prefix, g)
	gw = httptest.NewServer(mux)
	t.Cleanup(gw.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); rg.m.Wait() })
	rg.m.Start(ctx)
	return rg
}

// runOpts are what a run of the rig varies.
type runOpts struct {
	budget      *factory.Budget
	permissions string
	outside     bool
	command     string
}

func (rg *realRig) run(t *testing.T, prompt string, o runOpts) *factory.Run {
	t.Helper()
	return rg.wait(t, rg.start(t, prompt, o))
}

func (rg *realRig) start(t *testing.T, prompt string, o runOpts) string {
	t.Helper()
	id := factory.NewUID(factory.PrefixRun)
	rg.mu.Lock()
	rg.workspace, rg.outside, rg.command = filepath.Join(rg.m.RunDir(id), "workspace"), o.outside, o.command
	rg.mu.Unlock()
	_, err := rg.m.Create(runs.CreateRequest{ID: id, Prompt: prompt,
		Setup: &factory.RunSetup{Harness: &factory.Harness{Type: rg.h.Name}, Budget: o.budget, Permissions: o.permissions}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// wait waits for a run's turn to end.
func (rg *realRig) wait(t *testing.T, id string) *factory.Run {
	t.Helper()
	r := &factory.Run{ID: id}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		got, err := rg.store.Run(r.ID)
		if err == nil && got.State.Terminal() {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not end: %+v", r.ID, got)
		}
	}
}

// writeThenShell: the first answer writes NOTES.md, the second runs a
// command, the third ends the turn; each says what it does first.
func writeThenShell(target, command func() string) scripted.Script {
	return func(r *scripted.Request) scripted.Reply {
		u := scripted.Usage{Input: 100, Output: 20, Cached: 5}
		if strings.Contains(r.LastUser(), "Say it again") {
			return scripted.Reply{Text: fmt.Sprintf("Again, after %d tool results.", r.ToolResults), Usage: u}
		}
		switch r.ToolResults {
		case 0:
			return scripted.Reply{Text: "I will write NOTES.md.", Tools: []scripted.ToolCall{writeTool(r, target())}, Usage: u}
		case 1:
			return scripted.Reply{Text: "Now I run a shell command.", Tools: []scripted.ToolCall{shellTool(r, command())}, Usage: u}
		}
		return scripted.Reply{Text: "All done: NOTES.md is written.", Usage: u}
	}
}

// TestRealHarnesses runs Claude Code, Codex and Gemini CLI, installed,
// through the model gateway against the scripted model server: a file
// written, a shell command run, the messages apart and in order, the
// usage recorded equal to what the model server reported, the provider's
// key nowhere the agent or a person sees (the run's files, its timeline,
// the agent's processes' environments, the server's log); a follow-up
// that loads the session; refusals (outside the workspace, deny); a
// cancel during a command with nothing left; and a budget that stops a
// run mid-way, FAILED budget_exceeded.
func TestRealHarnesses(t *testing.T) {
	for _, name := range harness.Names() {
		t.Run(name, func(t *testing.T) {
			rg := newRealRig(t, name)
			got := rg.run(t, "Write NOTES.md, then run a command.", runOpts{})
			ws := filepath.Join(rg.m.RunDir(got.ID), "workspace")
			if got.State != factory.StateSucceeded {
				t.Fatalf("%s: %+v\n%s", got.State, got.StatusMessage, timeline(rg.store, got.ID))
			}
			if b, err := os.ReadFile(filepath.Join(ws, "NOTES.md")); err != nil || string(b) != "# Notes\n" {
				t.Errorf("NOTES.md: %q %v\n%s", b, err, timeline(rg.store, got.ID))
			}
			if b, err := os.ReadFile(filepath.Join(ws, "shell.txt")); err != nil || strings.TrimSpace(string(b)) != "hi" {
				t.Errorf("shell.txt: %q %v\n%s", b, err, timeline(rg.store, got.ID))
			}
			checkMessagesInOrder(t, rg.store, got.ID, "I will write NOTES.md.", "Now I run a shell command.", "All done: NOTES.md is written.")
			rep := rg.up.Reported(nil)
			if want := rep.Input + rep.Output + rep.Cached; got.Spent == nil || got.Spent.Tokens != want || want == 0 {
				t.Errorf("usage recorded %+v, the model server reported %+v", got.Spent, rep)
			}
			if name == "gemini" {
				// Gemini CLI 0.61.0 does not always find the session it saved
				// ("No previous sessions found for this project": the run goes
				// on in a new session carrying the conversation), and when it
				// does, it replays the history after session/load has answered,
				// which the timeline then shows again.
				t.Log("the follow-up's session/load is not checked for gemini: see the comment")
			} else {
				checkFollowUpLoads(t, rg, got.ID)
			}
			checkNoKey(t, rg.store, got.ID, rg.m.RunDir(got.ID))
			if strings.Contains(rg.log.String(), providerKey) {
				t.Error("the provider's key is in the server's log")
			}

			// A budget of fewer tokens than two calls: the second is refused.
			stopped := rg.run(t, "Write NOTES.md, then run a command.", runOpts{budget: &factory.Budget{MaxTokens: 150}})
			if stopped.State != factory.StateFailed || stopped.StatusMessage == nil || stopped.StatusMessage.ErrorCode != "budget_exceeded" ||
				stopped.Exceeded == nil || stopped.Exceeded.Limit != factory.LimitTokens {
				t.Errorf("a run past its budget: %s %+v %+v", stopped.State, stopped.StatusMessage, stopped.Exceeded)
			}
			checkRefusals(t, rg)
			checkCancelDuringCommand(t, rg)
		})
	}
}

// checkFollowUpLoads: a follow-up's turn loads the agent's session (the
// model sees the first turn's tool results), and says so once.
func checkFollowUpLoads(t *testing.T, rg *realRig, id string) {
	t.Helper()
	if _, _, err := rg.m.SendFollowUp(id, "Say it again.", nil); err != nil {
		t.Fatal(err)
	}
	var got *factory.Run
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		got, _ = rg.store.Run(id)
		if got != nil && got.Turns == 2 && got.State.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follow-up did not end: %+v", got)
		}
	}
	if got.State != factory.StateSucceeded {
		t.Fatalf("follow-up: %s %+v\n%s", got.State, got.StatusMessage, timeline(rg.store, id))
	}
	events, _ := rg.store.RunEvents(id)
	last := events[len(events)-1]
	for _, e := range events {
		if e.Kind == "message" && strings.HasPrefix(e.Message, "Again, after ") {
			last = e
		}
	}
	if !strings.HasPrefix(last.Message, "Again, after ") || strings.HasPrefix(last.Message, "Again, after 0 ") {
		t.Errorf("the follow-up's turn did not load the session (the model saw no tool result of the first turn):\n%s", timeline(rg.store, id))
	}
}

// checkRefusals: a write outside the workspace is refused and not done;
// under deny the agent's write is refused, and an agent that can only
// take the refusal as an abort (Codex) ends FAILED, not_authorized.
func checkRefusals(t *testing.T, rg *realRig) {
	t.Helper()
	out := rg.run(t, "Write OUTSIDE.md, then run a command.", runOpts{outside: true})
	if _, err := os.Stat(filepath.Join(rg.m.RunDir(out.ID), "OUTSIDE.md")); err == nil {
		t.Errorf("a write outside the workspace was done:\n%s", timeline(rg.store, out.ID))
	}
	if out.State == factory.StateCancelled {
		t.Errorf("a refused write outside ended the run CANCELLED: %+v", out.StatusMessage)
	}
	denied := rg.run(t, "Write NOTES.md, then run a command.", runOpts{permissions: runtime.PermissionsDeny})
	if _, err := os.Stat(filepath.Join(rg.m.RunDir(denied.ID), "workspace", "NOTES.md")); err == nil {
		t.Errorf("a denied write was done:\n%s", timeline(rg.store, denied.ID))
	}
	switch {
	case denied.State == factory.StateCancelled:
		t.Errorf("deny ended the run CANCELLED: %+v", denied.StatusMessage)
	case denied.State == factory.StateFailed && (denied.StatusMessage == nil || denied.StatusMessage.ErrorCode != "not_authorized"):
		t.Errorf("deny ended the run FAILED but not not_authorized: %+v", denied.StatusMessage)
	}
}

// checkCancelDuringCommand: a cancel while the agent's command runs ends
// the run CANCELLED with no process of it left (by its run ID).
func checkCancelDuringCommand(t *testing.T, rg *realRig) {
	t.Helper()
	id := rg.start(t, "Write NOTES.md, then run a long command.", runOpts{command: "sleep 60 && echo late > late.txt"})
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(timeline(rg.store, id), "Now I run a shell command."); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command never started:\n%s", timeline(rg.store, id))
		}
	}
	time.Sleep(2 * time.Second) // the command is running
	running := processesOf(id)
	if len(running) == 0 {
		t.Error("no process of the run found while its command runs")
	}
	for _, env := range environsOf(id) {
		if strings.Contains(env, providerKey) {
			t.Error("the provider's key is in the environment of an agent's process")
		}
	}
	if _, err := rg.m.Cancel(id); err != nil {
		t.Fatal(err)
	}
	got := rg.wait(t, id)
	if got.State != factory.StateCancelled {
		t.Errorf("cancel during a command: %s %+v", got.State, got.StatusMessage)
	}
	// A turn's end gives the agent 5 s to exit, then its processes 5 s
	// between SIGTERM and SIGKILL.
	left := processesOf(id)
	for deadline := time.Now().Add(15 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = processesOf(id) {
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("processes of the run left 15 s after its cancel: %v", left)
	}
}

// environsOf are the environments of the processes of the run.
func environsOf(id string) []string {
	var out []string
	files, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains("\x00"+string(b), "\x00FACTORY_RUN_ID="+id+"\x00") {
			out = append(out, string(b))
		}
	}
	return out
}

// processesOf are the processes whose environment names the run.
func processesOf(id string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains("\x00"+string(b), "\x00FACTORY_RUN_ID="+id+"\x00") {
			cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			out = append(out, strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// timeline is a run's timeline, a line an event.
func timeline(s *store.Store, id string) string {
	events, _ := s.RunEvents(id)
	var out []string
	for _, e := range events {
		out = append(out, e.Kind+": "+e.Message)
	}
	return strings.Join(out, "\n")
}

// checkMessagesInOrder: each message is an event of its own, in order.
func checkMessagesInOrder(t *testing.T, s *store.Store, id string, want ...string) {
	t.Helper()
	events, err := s.RunEvents(id)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, e := range events {
		if i < len(want) && strings.TrimSpace(e.Message) == want[i] {
			i++
		}
	}
	if i != len(want) {
		var got []string
		for _, e := range events {
			got = append(got, e.Kind+": "+e.Message)
		}
		t.Errorf("messages apart and in order: found %d of %q in\n%s", i, want, strings.Join(got, "\n"))
	}
}

// checkNoKey: the provider's key is in no file of the run's (workspace,
// HOME, logs) and nowhere on its timeline.
func checkNoKey(t *testing.T, s *store.Store, id, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, _ := os.ReadFile(p); strings.Contains(string(b), providerKey) {
			t.Errorf("the provider's key is in %s", p)
		}
		return nil
	})
	events, _ := s.RunEvents(id)
	for _, e := range events {
		if strings.Contains(e.Message, providerKey) {
			t.Errorf("the provider's key is on the timeline: %s", e.Message)
		}
	}
}

func writeTool(r *scripted.Request, path string) scripted.ToolCall {
	switch {
	case r.HasTool("Write"):
		return scripted.ToolCall{Name: "Write", Input: map[string]any{"file_path": path, "content": "# Notes\n"}}
	case r.HasTool("write_file"):
		return scripted.ToolCall{Name: "write_file", Input: map[string]any{"file_path": path, "content": "# Notes\n"}}
	}
	return scripted.ToolCall{Name: "apply_patch", Input: map[string]any{"input": "*** Begin Patch\n*** Add File: " + path + "\n+# Notes\n*** End Patch\n"}}
}

func shellTool(r *scripted.Request, cmd string) scripted.ToolCall {
	switch {
	case r.HasTool("Bash"):
		return scripted.ToolCall{Name: "Bash", Input: map[string]any{"command": cmd, "description": "write shell.txt"}}
	case r.HasTool("run_shell_command"):
		return scripted.ToolCall{Name: "run_shell_command", Input: map[string]any{"command": cmd, "description": "write shell.txt"}}
	case r.HasTool("exec_command"):
		return scripted.ToolCall{Name: "exec_command", Input: map[string]any{"cmd": cmd}}
	}
	return scripted.ToolCall{Name: "shell", Input: map[string]any{"command": []string{"bash", "-lc", cmd}}}
}
