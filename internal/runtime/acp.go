package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os/exec"
	"slices"
	"time"

	"factory"

	acp "github.com/coder/acp-go-sdk"
)

// ACPExecutor runs a turn as one Agent Client Protocol session with the
// environment's agent (JSON-RPC over stdio: initialize, session/new with
// the workspace as cwd, or session/load of the run's session on a
// follow-up when the agent offers it, session/prompt, streamed
// session/update, session/cancel). Gemini CLI speaks it natively; Claude
// Code and Codex through their ACP adapters. Each turn is a process of its
// own, ended gracefully (docs/spec/harnesses.md, "Ending a turn").
type ACPExecutor struct {
	Command []string
	// Grace is how long a cancelled agent has to end its turn before it
	// is ended (default 10 s).
	Grace time.Duration
	// Permissions answers the agent's permission requests when the turn
	// names no policy: "allow" (default), "deny" or "ask".
	Permissions string
	// InitTimeout bounds the answer to initialize (default 30 s).
	InitTimeout time.Duration
	// ExitGrace and KillGrace are how the agent is ended after its turn:
	// its stdin closed, ExitGrace to exit, then SIGTERM to what is left of
	// the turn and SIGKILL after KillGrace (defaults ExitGrace and
	// KillGrace).
	ExitGrace, KillGrace time.Duration
}

// Run runs one turn: start the agent, the handshake (initialize, then
// session/load or session/new), then the prompt, supervised until the
// agent ends its turn or the turn is stopped; then the agent is ended.
func (e *ACPExecutor) Run(ctx context.Context, t Turn, events func(Event)) Result {
	if len(e.Command) == 0 {
		return Result{State: factory.StateError, Message: "the environment has no command"}
	}
	cmd := exec.Command(e.Command[0], e.Command[1:]...)
	cmd.Dir = t.Workspace()
	cmd.Env = agentEnv(t, RunMarker(t.RunID))
	toAgent, err := cmd.StdinPipe()
	if err != nil {
		return Result{State: factory.StateError, Message: err.Error()}
	}
	proc, err := startAgent(cmd, &t)
	if err != nil {
		return Result{State: factory.StateError, Message: err.Error()}
	}
	if t.RunID != "" {
		proc.marker = RunMarker(t.RunID)
	}
	defer proc.close()
	var waitErr error
	exited := waitExit(proc, &waitErr)
	res := e.Drive(ctx, t, &AgentStream{Stdin: toAgent, Stdout: proc.stdout, Stderr: proc.stderr, Exited: exited,
		ExitErr: func() error { return waitErr }}, events)
	proc.end(toAgent, cmp.Or(e.ExitGrace, ExitGrace), cmp.Or(e.KillGrace, KillGrace))
	return res
}

// AgentStream is a started ACP agent as Drive needs it: the protocol on
// its stdin and stdout, the end of its stderr, its exit.
type AgentStream struct {
	Stdin   io.WriteCloser
	Stdout  io.Reader
	Stderr  *Tail
	Exited  <-chan struct{} // closed when the agent has exited
	ExitErr func() error    // why it exited, once Exited is closed
	// Workspace is the turn's workspace as the agent sees it, when not
	// at the turn's path (a container's mount): the session's directory,
	// and where the agent's file requests are read from.
	Workspace string
}

// Drive runs one turn of an agent started elsewhere (a container): the
// handshake, then the prompt, supervised as Run's. Whoever started the
// agent stops what is left of it after.
func (e *ACPExecutor) Drive(ctx context.Context, t Turn, agent *AgentStream, events func(Event)) Result {
	if t.ws == nil {
		defer t.Release() // opened here, for this turn only
	}
	// The agent's file requests go through the workspace opened once for
	// the turn: whatever it makes of the path meanwhile (a link to /), the
	// root stays the folder that was checked.
	ws, err := t.WorkspaceRoot()
	if err != nil {
		return Result{State: factory.StateError, Message: "the workspace: " + err.Error()}
	}
	policy := cmp.Or(t.Permissions, e.Permissions, PermissionsAllow)
	s := &acpTurn{ctx: ctx, t: t, agent: agent, grace: cmp.Or(e.Grace, 10*time.Second), initTimeout: cmp.Or(e.InitTimeout, 30*time.Second),
		cl: &acpClient{workspace: t.Workspace(), agentWorkspace: agent.Workspace, ws: ws, events: events, activity: make(chan struct{}, 1),
			policy: policy, approve: t.Approve, ctx: ctx, idle: t.IdleTimeout}}
	s.exited = agent.Exited
	// The connection's own diagnostics (a closed pipe at every turn's end)
	// are not the server's news: what matters reaches the run's result.
	// The library reads its logger from its receive goroutine, which starts
	// with the connection: the gate holds that goroutine's first read until
	// the logger is set, so that the two do not race.
	gate := &gatedReader{r: agent.Stdout, open: make(chan struct{})}
	s.conn = acp.NewClientSideConnection(s.cl, agent.Stdin, gate)
	s.conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	close(gate.open)
	if res, ok := s.handshake(); !ok {
		return res
	}
	res := s.prompt()
	res.Links = s.cl.takeLinks()
	res.Session = string(s.session)
	return res
}

// acpTurn is one turn of an ACP agent in progress.
type acpTurn struct {
	ctx                context.Context
	t                  Turn
	agent              *AgentStream
	conn               *acp.ClientSideConnection
	cl                 *acpClient
	grace, initTimeout time.Duration
	session            acp.SessionId
	// canLoad says the agent offers session/load; loaded that the turn
	// goes on in the run's session (its prompt is the follow-up alone).
	canLoad, loaded bool
	// stopped says the server asked the agent to end the turn
	// (session/cancel): a cancelled stop is then the server's, not the
	// agent's.
	stopped bool

	exited <-chan struct{} // closed when the agent's process has exited
}

// result ends the turn: the agent's text not yet reported is reported.
func (s *acpTurn) result(state factory.RunState, msg string) Result {
	s.cl.flush()
	return Result{State: state, Message: msg, Stderr: s.agent.Stderr.String()}
}

// died is the result of a turn whose agent exited before ending it.
func (s *acpTurn) died(err error) Result {
	msg := "the agent exited during the turn"
	if err != nil {
		msg += ": " + err.Error()
	}
	if last := lastLine(s.agent.Stderr.String()); last != "" {
		msg += ": " + last
	}
	return s.result(factory.StateError, msg)
}

// call makes one handshake call with a timeout. gone says the agent exited
// meanwhile; an agent that does not answer is a platform failure.
func (s *acpTurn) call(f func(context.Context) error) (err error, gone bool) {
	cctx, cancel := context.WithTimeout(s.ctx, s.initTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(cctx) }()
	select {
	case err := <-done:
		if err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && s.ctx.Err() == nil {
			return context.DeadlineExceeded, false // the library wraps it in an RPC error
		}
		if err != nil {
			// A failed call may be the agent dying: say so if it did.
			select {
			case <-s.exited:
				return err, true
			case <-time.After(200 * time.Millisecond):
			}
		}
		return err, false
	case <-s.exited:
		return errors.New("exited"), true
	}
}

// handshake initializes the agent and opens the turn's session: the run's
// session loaded (session/load) when the turn has one and the agent offers
// it, else a new one in the workspace. A session that does not load is
// said on the timeline, and a new one opened. ok is false when the turn
// ended there, with res saying how.
func (s *acpTurn) handshake() (res Result, ok bool) {
	steps := []struct {
		what string // "the agent <what>: <error>"
		call func(context.Context) error
	}{
		{"failed initialize", func(c context.Context) error {
			r, err := s.conn.Initialize(c, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber,
				ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}}})
			s.canLoad = r.AgentCapabilities.LoadSession
			return err
		}},
		{"could not load its session", s.load},
		{"could not open a session", func(c context.Context) error {
			if s.loaded {
				return nil
			}
			r, err := s.conn.NewSession(c, acp.NewSessionRequest{Cwd: s.cwd(), McpServers: mcpServers(s.t.MCPServers)})
			s.session = r.SessionId
			return err
		}},
	}
	for i, step := range steps {
		err, gone := s.call(step.call)
		switch {
		case gone:
			return s.died(nil), false
		case s.ctx.Err() != nil:
			return s.result(stoppedBy(s.ctx)), false
		case i == 0 && errors.Is(err, context.DeadlineExceeded):
			return s.result(factory.StateError, fmt.Sprintf("the agent did not answer initialize within %s", s.initTimeout)), false
		case i == 1 && err != nil:
			s.cl.say(fmt.Sprintf("[session] the agent could not load session %s (%v): a new session carries the conversation", s.t.Session, err))
		case err != nil:
			return s.result(factory.StateError, fmt.Sprintf("the agent %s: %v", step.what, err)), false
		}
	}
	return Result{}, true
}

// cwd is the session's directory: the workspace as the agent sees it.
func (s *acpTurn) cwd() string { return cmp.Or(s.agent.Workspace, s.t.Workspace()) }

// load loads the run's session, when the turn has one and the agent
// offers session/load. The agent replays the session's history as
// updates: they are not the turn's news, and are not reported.
func (s *acpTurn) load(c context.Context) error {
	if s.t.Session == "" || !s.canLoad {
		return nil
	}
	s.cl.setReplaying(true)
	defer s.cl.setReplaying(false)
	_, err := s.conn.LoadSession(c, acp.LoadSessionRequest{SessionId: acp.SessionId(s.t.Session), Cwd: s.cwd(), McpServers: mcpServers(s.t.MCPServers)})
	if err == nil {
		s.session, s.loaded = acp.SessionId(s.t.Session), true
	}
	return err
}

// promptText is what the turn asks: the follow-up alone in a loaded
// session; else the run's prompt, with the follow-up of a continued run.
func (s *acpTurn) promptText() string {
	switch {
	case s.loaded && s.t.FollowUp != "":
		return s.t.FollowUp
	case s.t.FollowUp != "":
		return s.t.Prompt + "\n\n---\nThe run continues. Follow-up from the user:\n" + s.t.FollowUp
	}
	return s.t.Prompt
}

// prompt sends the turn's prompt and supervises the turn until it ends.
func (s *acpTurn) prompt() Result {
	promptCtx, stopPrompt := context.WithCancel(context.Background())
	defer stopPrompt()
	var resp acp.PromptResponse
	var promptErr error
	answered := make(chan struct{})
	go func() {
		resp, promptErr = s.conn.Prompt(promptCtx, acp.PromptRequest{SessionId: s.session, Prompt: []acp.ContentBlock{acp.TextBlock(s.promptText())}})
		close(answered)
	}()
	ended := make(chan struct{})
	go func() {
		select {
		case <-answered:
		case <-s.exited:
		}
		close(ended)
	}()
	finish := func() Result {
		select {
		case <-answered:
		default:
			return s.died(s.agent.ExitErr()) // exited without answering
		}
		if promptErr != nil {
			select {
			case <-s.exited:
				return s.died(s.agent.ExitErr())
			case <-time.After(100 * time.Millisecond):
			}
			return s.result(factory.StateFailed, "the agent answered the prompt with an error: "+promptErr.Error())
		}
		return s.stopReason(resp.StopReason)
	}
	// stop asks the agent to end the turn (session/cancel), and waits for
	// its answer, its exit, or the grace period.
	stop := func(state factory.RunState, msg string) Result {
		s.stopped = true
		_ = s.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: s.session})
		select {
		case <-answered:
		case <-s.exited:
		case <-time.After(s.grace):
		}
		return s.result(state, msg)
	}
	return Supervise(s.ctx, s.t, s.cl.activity, ended, finish, stop)
}

// stopReason is how a turn the agent ended ends: end_turn SUCCEEDED,
// cancelled CANCELLED (FAILED, not_authorized, when the agent cancelled
// it itself after a tool call was refused: its only refusal aborts the
// turn), anything else FAILED.
func (s *acpTurn) stopReason(r acp.StopReason) Result {
	switch r {
	case acp.StopReasonEndTurn:
		return s.result(factory.StateSucceeded, "the agent ended its turn")
	case acp.StopReasonCancelled:
		if refused := s.cl.refusedCall(); refused != "" && !s.stopped {
			res := s.result(factory.StateFailed, fmt.Sprintf("the agent ended its turn when %s was refused permission", refused))
			res.Code = CodeNotAuthorized
			return res
		}
		return s.result(factory.StateCancelled, "cancelled")
	}
	return s.result(factory.StateFailed, fmt.Sprintf("the agent stopped: %s", r))
}

var errNoTerminals = errors.New("terminals are not offered to agents by this server")

func (c *acpClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNoTerminals
}
func (c *acpClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNoTerminals
}
func (c *acpClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNoTerminals
}
func (c *acpClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNoTerminals
}
func (c *acpClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNoTerminals
}

// gatedReader blocks reads until open is closed.
type gatedReader struct {
	r    io.Reader
	open chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	<-g.open
	return g.r.Read(p)
}

// mcpServers turns a run's MCP servers into ACP's, in name order: a
// command is a stdio server, a url an HTTP one; others are not offered.
func mcpServers(servers map[string]json.RawMessage) []acp.McpServer {
	out := []acp.McpServer{}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		var s struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		}
		if json.Unmarshal(servers[name], &s) != nil {
			continue
		}
		switch {
		case s.Command != "":
			env := []acp.EnvVariable{}
			for _, k := range slices.Sorted(maps.Keys(s.Env)) {
				env = append(env, acp.EnvVariable{Name: k, Value: s.Env[k]})
			}
			args := s.Args
			if args == nil {
				args = []string{}
			}
			out = append(out, acp.McpServer{Stdio: &acp.McpServerStdio{Name: name, Command: s.Command, Args: args, Env: env}})
		case s.URL != "":
			headers := []acp.HttpHeader{}
			for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
				headers = append(headers, acp.HttpHeader{Name: k, Value: s.Headers[k]})
			}
			out = append(out, acp.McpServer{Http: &acp.McpServerHttpInline{Type: "http", Name: name, Url: s.URL, Headers: headers}})
		}
	}
	return out
}
