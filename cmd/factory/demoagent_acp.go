package main

import (
	"context"
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
// does no AI.
type demoACPAgent struct {
	conn  *acp.AgentSideConnection
	delay time.Duration

	mu       sync.Mutex
	cwd      map[acp.SessionId]string
	mcp      map[acp.SessionId][]string // the MCP servers each session was offered
	cancel   map[acp.SessionId]chan struct{}
	sessions int
}

func runDemoACPAgent(delay time.Duration) error {
	a := &demoACPAgent{delay: delay, cwd: map[acp.SessionId]string{}, mcp: map[acp.SessionId][]string{}, cancel: map[acp.SessionId]chan struct{}{}}
	a.conn = acp.NewAgentSideConnection(a, os.Stdout, os.Stdin)
	a.conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	<-a.conn.Done()
	return nil
}

func (a *demoACPAgent) Initialize(context.Context, acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersionNumber}, nil
}

func (a *demoACPAgent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *demoACPAgent) NewSession(_ context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sessions++
	id := acp.SessionId(fmt.Sprintf("demo-%d", a.sessions))
	a.cwd[id] = p.Cwd
	var names []string
	for _, s := range p.McpServers {
		switch {
		case s.Stdio != nil:
			names = append(names, s.Stdio.Name+" (stdio)")
		case s.Http != nil:
			names = append(names, s.Http.Name+" (http)")
		}
	}
	a.mcp[id] = names
	return acp.NewSessionResponse{SessionId: id}, nil
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

func (a *demoACPAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	cancelled := make(chan struct{})
	a.mu.Lock()
	a.cancel[p.SessionId] = cancelled
	cwd := a.cwd[p.SessionId]
	mcp := a.mcp[p.SessionId]
	a.mu.Unlock()
	text := promptText(p.Prompt)
	// say reports progress, then pauses (so a cancel can come in between).
	say := func(format string, v ...any) bool {
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId,
			Update: acp.UpdateAgentMessageText("[demo agent] " + fmt.Sprintf(format, v...) + "\n")})
		select {
		case <-cancelled:
			return false
		case <-time.After(a.delay):
			return true
		}
	}
	stop := acp.PromptResponse{StopReason: acp.StopReasonCancelled}
	if !say("this is the bundled demo agent: it does no AI") || !say("read a prompt of %d bytes", text.Len()) {
		return stop, nil
	}
	if len(mcp) > 0 && !say("was offered MCP servers: %s", strings.Join(mcp, ", ")) {
		return stop, nil
	}
	prompt, followUp, _ := strings.Cut(text.String(), followUpMarker)
	runMCPScript(ctx, prompt, strings.TrimSpace(followUp), say)
	files := demoAttachments(cwd)
	if !say("found %d attachment(s)", len(files)) {
		return stop, nil
	}
	summary := filepath.Join(cwd, "SUMMARY.md")
	perm, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: p.SessionId,
		ToolCall: acp.ToolCallUpdate{ToolCallId: "write-summary", Title: acp.Ptr("Write SUMMARY.md"), Kind: acp.Ptr(acp.ToolKindEdit)},
		Options: []acp.PermissionOption{
			{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
			{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
		}})
	if err != nil || perm.Outcome.Selected == nil || perm.Outcome.Selected.OptionId != "allow" {
		say("not allowed to write SUMMARY.md; stopping here")
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Summary (demo agent: no AI was used)\n\n## Prompt\n\n%s\n\n## Attachments\n\n", firstLine(text.String()))
	if len(files) == 0 {
		b.WriteString("None.\n")
	}
	for _, f := range files {
		fmt.Fprintf(&b, "- %s\n", f)
	}
	if followUp != "" {
		fmt.Fprintf(&b, "\n## Follow-up\n\n%s\n", strings.TrimSpace(followUp))
	}
	if _, err := a.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: p.SessionId, Path: summary, Content: b.String()}); err != nil {
		say("could not write SUMMARY.md: %v", err)
		return acp.PromptResponse{StopReason: acp.StopReasonRefusal}, nil
	}
	if !say("wrote SUMMARY.md") {
		return stop, nil
	}
	pr, err := reportDemoArtifacts(cwd, b.String(), text.String(), false)
	if err != nil {
		say("could not report the summary as an artifact: %v", err)
	} else if pr != "" {
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId,
			Update: acp.SessionUpdate{AgentMessageChunk: &acp.SessionUpdateAgentMessageChunk{Content: acp.ResourceLinkBlock("pull request", pr)}}})
		say("opened a (pretend) pull request: %s", pr)
	}
	if verdict, ok := demoScore(text.String()); ok { // a judge's answer, its last message
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: acp.UpdateAgentMessageText(verdict + "\n")})
	}
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
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
