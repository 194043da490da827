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
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"factory"

	acp "github.com/coder/acp-go-sdk"
)

// ACPExecutor runs a turn as one Agent Client Protocol session with the
// environment's agent (JSON-RPC over stdio: initialize, session/new with
// the workspace as cwd, session/prompt, streamed session/update,
// session/cancel). Gemini CLI speaks it natively; Claude Code and Codex
// through their ACP adapters. Each turn is a new process: a follow-up to a
// finished run is a new session whose prompt carries the history.
type ACPExecutor struct {
	Command []string
	// Grace is how long a cancelled agent has to end its turn before its
	// process group is killed (default 10 s).
	Grace time.Duration
	// Permissions answers the agent's permission requests: "allow"
	// (default) or "deny".
	Permissions string
	// InitTimeout bounds the answer to initialize (default 30 s).
	InitTimeout time.Duration
}

// Run runs one turn: start the agent, the handshake (initialize, then
// session/new), then the prompt, supervised until the agent ends its turn
// or the turn is stopped.
func (e *ACPExecutor) Run(ctx context.Context, t Turn, events func(Event)) Result {
	if len(e.Command) == 0 {
		return Result{State: factory.StateError, Message: "the environment has no command"}
	}
	cmd := exec.Command(e.Command[0], e.Command[1:]...)
	cmd.Dir = t.Workspace()
	cmd.Env = agentEnv(t, "FACTORY_RUN_ID="+t.RunID)
	toAgent, err := cmd.StdinPipe()
	if err != nil {
		return Result{State: factory.StateError, Message: err.Error()}
	}
	proc, err := startAgent(cmd, &t)
	if err != nil {
		return Result{State: factory.StateError, Message: err.Error()}
	}
	defer proc.close()
	var waitErr error
	exited := waitExit(proc, &waitErr)
	return e.Drive(ctx, t, &AgentStream{Stdin: toAgent, Stdout: proc.stdout, Stderr: proc.stderr, Exited: exited,
		ExitErr: func() error { return waitErr }}, events)
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
	s := &acpTurn{ctx: ctx, t: t, agent: agent, grace: e.Grace, initTimeout: e.InitTimeout,
		cl: &acpClient{workspace: t.Workspace(), agentWorkspace: agent.Workspace, ws: ws, events: events, activity: make(chan struct{}, 1),
			allow: e.Permissions != "deny"}}
	if s.grace == 0 {
		s.grace = 10 * time.Second
	}
	if s.initTimeout == 0 {
		s.initTimeout = 30 * time.Second
	}
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

// handshake initializes the agent and opens a session in the workspace.
// ok is false when the turn ended there, with res saying how.
func (s *acpTurn) handshake() (res Result, ok bool) {
	steps := []struct {
		what string // "the agent <what>: <error>"
		call func(context.Context) error
	}{
		{"failed initialize", func(c context.Context) error {
			_, err := s.conn.Initialize(c, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber,
				ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}}})
			return err
		}},
		{"could not open a session", func(c context.Context) error {
			r, err := s.conn.NewSession(c, acp.NewSessionRequest{Cwd: cmp.Or(s.agent.Workspace, s.t.Workspace()), McpServers: mcpServers(s.t.MCPServers)})
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
		case err != nil:
			return s.result(factory.StateError, fmt.Sprintf("the agent %s: %v", step.what, err)), false
		}
	}
	return Result{}, true
}

// prompt sends the turn's prompt (with the follow-up of a continued run)
// and supervises the turn until it ends.
func (s *acpTurn) prompt() Result {
	prompt := s.t.Prompt
	if s.t.FollowUp != "" {
		prompt += "\n\n---\nThe run continues. Follow-up from the user:\n" + s.t.FollowUp
	}
	promptCtx, stopPrompt := context.WithCancel(context.Background())
	defer stopPrompt()
	var resp acp.PromptResponse
	var promptErr error
	answered := make(chan struct{})
	go func() {
		resp, promptErr = s.conn.Prompt(promptCtx, acp.PromptRequest{SessionId: s.session, Prompt: []acp.ContentBlock{acp.TextBlock(prompt)}})
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
		switch resp.StopReason {
		case acp.StopReasonEndTurn:
			return s.result(factory.StateSucceeded, "the agent ended its turn")
		case acp.StopReasonCancelled:
			return s.result(factory.StateCancelled, "cancelled")
		default:
			return s.result(factory.StateFailed, fmt.Sprintf("the agent stopped: %s", resp.StopReason))
		}
	}
	// stop asks the agent to end the turn (session/cancel), then kills it.
	stop := func(state factory.RunState, msg string) Result {
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

// acpClient is the client side of a session: it turns the agent's updates
// into status messages, answers permission requests by the environment's
// policy, and lets the agent read and write files in the workspace only.
type acpClient struct {
	workspace      string
	agentWorkspace string   // the workspace as the agent sees it, if elsewhere
	ws             *os.Root // the workspace, opened once for the turn
	events         func(Event)
	activity       chan struct{}
	allow          bool

	mu       sync.Mutex
	text     strings.Builder    // agent message text not yet ended by a newline
	overlong bool               // the line in progress passed maxLine: its rest is dropped
	links    []factory.Artifact // the resource links the agent sent, as artifacts
}

// maxServedFile bounds a file the agent reads through the client: a named
// pipe or a device is refused, not waited on.
const maxServedFile = 16 << 20

// maxLinks bounds the links kept from one turn's messages.
const maxLinks = 100

// pullRequestURL matches the web address of a GitHub pull request or a
// GitLab merge request.
var pullRequestURL = regexp.MustCompile(`^https://[^/]+/.+/(pull|merge_requests)/[0-9]+/?$`)

// link keeps a resource link the agent sent: a pull request's address is a
// PULL_REQUEST, any other web address an EXTERNAL_REFERENCE. Links to
// files (file://) are not artifacts: files are collected from the output
// folder.
func (c *acpClient) link(l *acp.ContentBlockResourceLink) {
	u, err := url.Parse(l.Uri)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(l.Uri) > 2048 || len(c.links) >= maxLinks {
		return
	}
	a := factory.Artifact{Type: factory.ArtifactExternalReference, Data: factory.ArtifactData{URL: l.Uri, ReferenceType: "link", Title: l.Name}}
	if l.Title != nil {
		a.Data.Title = *l.Title
	}
	if pullRequestURL.MatchString(l.Uri) {
		a = factory.Artifact{Type: factory.ArtifactPullRequest, Data: factory.ArtifactData{URL: l.Uri}}
	}
	for _, have := range c.links {
		if have.Data.URL == a.Data.URL {
			return
		}
	}
	c.links = append(c.links, a)
}

// takeLinks hands over the links of the turn.
func (c *acpClient) takeLinks() []factory.Artifact {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.links
	c.links = nil
	return l
}

func (c *acpClient) touch() {
	select {
	case c.activity <- struct{}{}:
	default:
	}
}

func (c *acpClient) emit(msg string) {
	if msg = strings.TrimSpace(msg); msg != "" {
		c.events(Event{Time: time.Now().UTC(), Message: CutMessage(msg, maxLine)})
	}
}

// addText takes a chunk of the agent's text: each line it ends is a
// status message. What is held for a line's end is bounded: a line longer
// than maxLine is reported cut, and the rest of it, up to its newline,
// dropped (as an exec agent's over-long line is).
func (c *acpClient) addText(chunk string) {
	for chunk != "" {
		line, rest, ended := strings.Cut(chunk, "\n")
		chunk = rest
		if !c.overlong {
			c.text.WriteString(line[:min(len(line), maxLine+1-c.text.Len())])
		}
		switch {
		case ended && c.overlong:
			c.overlong = false
		case ended:
			c.emit(c.text.String())
			c.text.Reset()
		case c.text.Len() > maxLine:
			c.emit(c.text.String())
			c.text.Reset()
			c.overlong = true
		}
	}
}

// flush emits agent text that did not end with a newline.
func (c *acpClient) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.emit(c.text.String())
	c.text.Reset()
}

func (c *acpClient) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	c.touch()
	c.mu.Lock()
	defer c.mu.Unlock()
	u := n.Update
	switch {
	case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
		c.addText(u.AgentMessageChunk.Content.Text.Text)
	case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.ResourceLink != nil:
		c.link(u.AgentMessageChunk.Content.ResourceLink)
	case u.ToolCall != nil:
		c.emit(fmt.Sprintf("[tool] %s (%s)", u.ToolCall.Title, u.ToolCall.Status))
	case u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil:
		c.emit(fmt.Sprintf("[tool] %s: %s", u.ToolCallUpdate.ToolCallId, *u.ToolCallUpdate.Status))
	case u.Plan != nil:
		var steps []string
		for _, e := range u.Plan.Entries {
			steps = append(steps, fmt.Sprintf("%s (%s)", e.Content, e.Status))
		}
		c.emit("[plan] " + strings.Join(steps, "; "))
	}
	return nil
}

func (c *acpClient) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.touch()
	want := map[acp.PermissionOptionKind]bool{acp.PermissionOptionKindAllowOnce: c.allow, acp.PermissionOptionKindAllowAlways: c.allow,
		acp.PermissionOptionKindRejectOnce: !c.allow, acp.PermissionOptionKindRejectAlways: !c.allow}
	title := string(p.ToolCall.ToolCallId)
	if p.ToolCall.Title != nil {
		title = *p.ToolCall.Title
	}
	for _, o := range p.Options {
		if want[o.Kind] {
			c.mu.Lock()
			c.emit(fmt.Sprintf("[permission] %s: %s (%s)", title, o.Name, o.Kind))
			c.mu.Unlock()
			return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}}, nil
		}
	}
	c.mu.Lock()
	c.emit(fmt.Sprintf("[permission] %s: no option fits the environment's policy; cancelled", title))
	c.mu.Unlock()
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}, nil
}

// inside turns a path the agent asks for into one relative to the
// workspace, refusing any that lies outside it lexically. Symlinks are the
// os.Root's to judge: it follows them only while they stay inside.
func (c *acpClient) inside(path string) (string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.workspace, path)
	}
	path = filepath.Clean(path)
	bases := []string{filepath.Clean(c.workspace)}
	if real, err := filepath.EvalSymlinks(c.workspace); err == nil {
		bases = append(bases, real)
	}
	if c.agentWorkspace != "" {
		bases = append(bases, filepath.Clean(c.agentWorkspace))
	}
	for _, base := range bases {
		if rel, err := filepath.Rel(base, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return rel, nil
		}
	}
	return "", fmt.Errorf("%s is outside the run's workspace", path)
}

// root is the workspace as an os.Root: every file operation through it
// stays inside, whatever symlinks the agent made (in the last component
// too, and dangling ones). It is the turn's, opened once; release is a
// no-op then.
func (c *acpClient) root() (root *os.Root, release func(), err error) {
	if c.ws != nil {
		return c.ws, func() {}, nil
	}
	root, err = os.OpenRoot(c.workspace)
	if err != nil {
		return nil, nil, err
	}
	return root, func() { root.Close() }, nil
}

func (c *acpClient) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	c.touch()
	rel, err := c.inside(p.Path)
	if err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	root, release, err := c.root()
	if err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	defer release()
	b, err := ReadRegular(root, rel, maxServedFile, false)
	if err != nil {
		return acp.ReadTextFileResponse{}, fmt.Errorf("%s: %w", p.Path, err)
	}
	return acp.ReadTextFileResponse{Content: string(b)}, nil
}

func (c *acpClient) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	c.touch()
	rel, err := c.inside(p.Path)
	if err != nil {
		return acp.WriteTextFileResponse{}, err
	}
	root, release, err := c.root()
	if err != nil {
		return acp.WriteTextFileResponse{}, err
	}
	defer release()
	if dir := filepath.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return acp.WriteTextFileResponse{}, fmt.Errorf("%s: %w", p.Path, err)
		}
	}
	if err := root.WriteFile(rel, []byte(p.Content), 0o644); err != nil {
		return acp.WriteTextFileResponse{}, fmt.Errorf("%s: %w", p.Path, err)
	}
	return acp.WriteTextFileResponse{}, nil
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
