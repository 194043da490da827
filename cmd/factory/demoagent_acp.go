package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// demoACPAgent is the demo agent speaking the Agent Client Protocol, so that
// the ACP executor can be seen (and tested) end to end without an LLM. It
// does no AI. Its sessions are kept in its HOME, so that a later process
// loads them (session/load), as the real agents do; lines of its prompt
// that start with "demo:" make it do what a real agent might
// (demoDirectives).
type demoACPAgent struct {
	conn  *acp.AgentSideConnection
	delay time.Duration

	mu       sync.Mutex
	sessions map[acp.SessionId]*demoSession
	cancel   map[acp.SessionId]chan struct{}
}

// demoSession is a session of the demo agent: its folder, the MCP
// servers it was offered, and its prompts so far.
type demoSession struct {
	ID      acp.SessionId `json:"id"`
	Cwd     string        `json:"cwd"`
	MCP     []string      `json:"mcp,omitempty"`
	Prompts []string      `json:"prompts"`
}

func runDemoACPAgent(delay time.Duration) error {
	a := &demoACPAgent{delay: delay, sessions: map[acp.SessionId]*demoSession{}, cancel: map[acp.SessionId]chan struct{}{}}
	a.conn = acp.NewAgentSideConnection(a, os.Stdout, os.Stdin)
	a.conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	<-a.conn.Done()
	return nil
}

func (a *demoACPAgent) Initialize(context.Context, acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersionNumber, AgentCapabilities: acp.AgentCapabilities{LoadSession: true}}, nil
}

func (a *demoACPAgent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

// sessionFile is where a session is kept: the agent's HOME, or nowhere.
func sessionFile(id acp.SessionId) string {
	home := os.Getenv("HOME")
	if home == "" || strings.ContainsAny(string(id), `/\.`) {
		return ""
	}
	return filepath.Join(home, ".factory-demo-agent", "sessions", string(id)+".json")
}

func (s *demoSession) save() {
	if f := sessionFile(s.ID); f != "" {
		b, _ := json.Marshal(s)
		if os.MkdirAll(filepath.Dir(f), 0o700) == nil {
			_ = os.WriteFile(f, b, 0o600)
		}
	}
}

func (a *demoACPAgent) NewSession(_ context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	s := &demoSession{ID: acp.SessionId("demo-" + hex.EncodeToString(b)), Cwd: p.Cwd, MCP: mcpNames(p.McpServers)}
	s.save()
	a.mu.Lock()
	a.sessions[s.ID] = s
	a.mu.Unlock()
	return acp.NewSessionResponse{SessionId: s.ID}, nil
}

func mcpNames(servers []acp.McpServer) []string {
	var names []string
	for _, s := range servers {
		switch {
		case s.Stdio != nil:
			names = append(names, s.Stdio.Name+" (stdio)")
		case s.Http != nil:
			names = append(names, s.Http.Name+" (http)")
		}
	}
	return names
}

// LoadSession reads a session an earlier process kept and replays its
// history (the prompts, and a line of the agent's for each) before it
// answers, as the protocol says.
func (a *demoACPAgent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	f := sessionFile(p.SessionId)
	b, err := os.ReadFile(f)
	if f == "" || err != nil {
		return acp.LoadSessionResponse{}, acp.NewInvalidParams(map[string]any{"error": "no session " + string(p.SessionId)})
	}
	var s demoSession
	if err := json.Unmarshal(b, &s); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	s.Cwd, s.MCP = p.Cwd, mcpNames(p.McpServers)
	for i, prompt := range s.Prompts {
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s.ID, Update: acp.UpdateUserMessageText(prompt)})
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s.ID,
			Update: acp.UpdateAgentMessageText(fmt.Sprintf("[demo agent] (replayed) turn %d of this session", i+1))})
	}
	a.mu.Lock()
	a.sessions[s.ID] = &s
	a.mu.Unlock()
	return acp.LoadSessionResponse{}, nil
}

func (a *demoACPAgent) Cancel(_ context.Context, p acp.CancelNotification) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.cancel[p.SessionId]; ok {
		close(ch)
		delete(a.cancel, p.SessionId)
	}
	return nil
}

// followUpMarker starts a follow-up in the prompt of a turn that
// continues a run (runtime's ACP executor).
const followUpMarker = "Follow-up from the user:\n"

// promptText is the text of a prompt's blocks, in order.
func promptText(blocks []acp.ContentBlock) *strings.Builder {
	var text strings.Builder
	for _, b := range blocks {
		if b.Text != nil {
			text.WriteString(b.Text.Text)
		}
	}
	return &text
}

// demoAttachments lists the run's attachments with their sizes, by name.
func demoAttachments(cwd string) []string {
	var files []string
	entries, _ := os.ReadDir(filepath.Join(cwd, "attachments"))
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			files = append(files, fmt.Sprintf("%s (%d bytes)", e.Name(), info.Size()))
		}
	}
	sort.Strings(files)
	return files
}

// demoTurn is one prompt of the demo agent in progress.
type demoTurn struct {
	a         *demoACPAgent
	ctx       context.Context
	s         *demoSession
	cancelled chan struct{}
	// abortOnRefusal ends the turn cancelled when a tool call is refused,
	// as an agent whose only refusal aborts the turn (Codex) does.
	abortOnRefusal bool
}

// say reports a line of progress as a message of its own, then pauses
// (so that a cancel can come in between); false when the turn was
// cancelled meanwhile.
func (d *demoTurn) say(format string, v ...any) bool {
	d.message("[demo agent] " + fmt.Sprintf(format, v...))
	select {
	case <-d.cancelled:
		return false
	case <-time.After(d.a.delay):
		return true
	}
}

// message sends a message of its own (an ID of its own).
func (d *demoTurn) message(text string) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	_ = d.a.conn.SessionUpdate(d.ctx, acp.SessionNotification{SessionId: d.s.ID, Update: acp.SessionUpdate{
		AgentMessageChunk: &acp.SessionUpdateAgentMessageChunk{Content: acp.TextBlock(text), MessageId: &id}}})
}

func (a *demoACPAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	cancelled := make(chan struct{})
	a.mu.Lock()
	s := a.sessions[p.SessionId]
	a.cancel[p.SessionId] = cancelled
	a.mu.Unlock()
	if s == nil {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"error": "no session " + string(p.SessionId)})
	}
	text := promptText(p.Prompt).String()
	s.Prompts = append(s.Prompts, text)
	s.save()
	d := &demoTurn{a: a, ctx: ctx, s: s, cancelled: cancelled}
	stop := acp.PromptResponse{StopReason: acp.StopReasonCancelled}
	if !d.say("this is the bundled demo agent: it does no AI") || !d.say("read a prompt of %d bytes", len(text)) {
		return stop, nil
	}
	if len(s.Prompts) > 1 && !d.say("continuing session %s (turn %d)", s.ID, len(s.Prompts)) {
		return stop, nil
	}
	if len(s.MCP) > 0 && !d.say("was offered MCP servers: %s", strings.Join(s.MCP, ", ")) {
		return stop, nil
	}
	prompt, followUp := s.Prompts[0], ""
	if before, after, ok := strings.Cut(text, followUpMarker); ok {
		prompt, followUp = before, after // a new session: the prompt carries the follow-up
	} else if len(s.Prompts) > 1 {
		followUp = text // the session loaded: the follow-up is the prompt
	}
	runMCPScript(ctx, prompt, strings.TrimSpace(followUp), d.say)
	if r, done := d.directives(text); done {
		return r, nil
	}
	return d.summarise()
}

// summarise writes SUMMARY.md (with the agent's permission) and reports
// it as an artifact.
func (d *demoTurn) summarise() (acp.PromptResponse, error) {
	stop := acp.PromptResponse{StopReason: acp.StopReasonCancelled}
	files := demoAttachments(d.s.Cwd)
	if !d.say("found %d attachment(s)", len(files)) {
		return stop, nil
	}
	summary := filepath.Join(d.s.Cwd, "SUMMARY.md")
	if opt := d.permission("write-summary", "Write SUMMARY.md", acp.ToolKindEdit, summary, nil); opt != "allow" {
		if d.abortOnRefusal {
			return stop, nil
		}
		d.say("not allowed to write SUMMARY.md; stopping here")
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	}
	content := d.summary(files)
	if _, err := d.a.conn.WriteTextFile(d.ctx, acp.WriteTextFileRequest{SessionId: d.s.ID, Path: summary, Content: content}); err != nil {
		d.say("could not write SUMMARY.md: %v", err)
		return acp.PromptResponse{StopReason: acp.StopReasonRefusal}, nil
	}
	if !d.say("wrote SUMMARY.md") {
		return stop, nil
	}
	all := strings.Join(d.s.Prompts, "\n")
	pr, err := reportDemoArtifacts(d.s.Cwd, content, all, false)
	if err != nil {
		d.say("could not report the summary as an artifact: %v", err)
	} else if pr != "" {
		_ = d.a.conn.SessionUpdate(d.ctx, acp.SessionNotification{SessionId: d.s.ID,
			Update: acp.SessionUpdate{AgentMessageChunk: &acp.SessionUpdateAgentMessageChunk{Content: acp.ResourceLinkBlock("pull request", pr)}}})
		d.say("opened a (pretend) pull request: %s", pr)
	}
	if verdict, ok := demoScore(d.s.Prompts[len(d.s.Prompts)-1]); ok {
		d.message(verdict) // a judge's answer, its last message
	}
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

// summary is SUMMARY.md: the session's first prompt, the attachments, and
// the latest follow-up (a later prompt of the session, or the follow-up a
// new session's prompt carries).
func (d *demoTurn) summary(files []string) string {
	first := d.s.Prompts[0]
	var b strings.Builder
	fmt.Fprintf(&b, "# Summary (demo agent: no AI was used)\n\n## Prompt\n\n%s\n\n## Attachments\n\n", firstLine(first))
	if len(files) == 0 {
		b.WriteString("None.\n")
	}
	for _, f := range files {
		fmt.Fprintf(&b, "- %s\n", f)
	}
	latest := d.s.Prompts[len(d.s.Prompts)-1]
	followUp := ""
	if i := strings.Index(latest, followUpMarker); i >= 0 {
		followUp = latest[i+len(followUpMarker):]
	} else if len(d.s.Prompts) > 1 {
		followUp = latest
	}
	if followUp = strings.TrimSpace(followUp); followUp != "" {
		fmt.Fprintf(&b, "\n## Follow-up\n\n%s\n", followUp)
	}
	return b.String()
}

// permission asks the client's permission for a tool call and returns
// the option chosen ("" when none: cancelled or failed).
func (d *demoTurn) permission(id, title string, kind acp.ToolKind, path string, input map[string]any) string {
	tc := acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(id), Title: acp.Ptr(title), Kind: acp.Ptr(kind), RawInput: input}
	if path != "" {
		tc.Locations = []acp.ToolCallLocation{{Path: path}}
	}
	perm, err := d.a.conn.RequestPermission(d.ctx, acp.RequestPermissionRequest{SessionId: d.s.ID, ToolCall: tc,
		Options: []acp.PermissionOption{
			{Kind: acp.PermissionOptionKindAllowAlways, Name: "Always allow", OptionId: "allow_always"},
			{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
			{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
		}})
	if err != nil || perm.Outcome.Selected == nil {
		return ""
	}
	return string(perm.Outcome.Selected.OptionId)
}

func (a *demoACPAgent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}
func (a *demoACPAgent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, nil
}
func (a *demoACPAgent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, nil
}
func (a *demoACPAgent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, nil
}
func (a *demoACPAgent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, nil
}
