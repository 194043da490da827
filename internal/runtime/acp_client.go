package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"factory"

	acp "github.com/coder/acp-go-sdk"
)

// acpClient is the client side of a session: it turns the agent's updates
// into the run's messages (each run of message text between other updates
// one message, in stream order), answers permission requests by the
// policy, and lets the agent read and write files in the workspace only.
type acpClient struct {
	workspace      string
	agentWorkspace string   // the workspace as the agent sees it, if elsewhere
	ws             *os.Root // the workspace, opened once for the turn
	events         func(Event)
	activity       chan struct{}
	policy         string
	approve        Approver
	ctx            context.Context // the turn's: an approval waits no longer
	idle           time.Duration   // the turn's idle timeout

	mu        sync.Mutex
	quiet     *time.Timer        // reports the message being streamed when the agent pauses
	text      strings.Builder    // the agent's message being streamed
	overlong  bool               // it passed maxLine: reported cut, its rest dropped
	messageID string             // its ID, when the agent gives one
	replaying bool               // session/load replays the history: not reported
	refused   string             // the last tool call a refusal answered
	asked     int                // approvals asked in this turn
	links     []factory.Artifact // the resource links the agent sent, as artifacts
}

// quietFlush is how long the agent may pause in a message before what it
// said so far is reported: a message followed by a long silence (a
// command running) is seen when it is said, not at the next update.
const quietFlush = time.Second

// maxLinks bounds the links kept from one turn's messages.
const maxLinks = 100

// maxReadFile bounds a file an agent reads through the client.
const maxReadFile = 16 << 20

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

// emit reports a message; the caller holds mu.
func (c *acpClient) emit(msg string) {
	if msg = strings.TrimSpace(msg); msg != "" {
		c.events(Event{Time: time.Now().UTC(), Message: CutMessage(msg, maxLine)})
	}
}

// say reports a message of the server's own, after the agent's text.
func (c *acpClient) say(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked()
	c.emit(msg)
}

// flushLocked ends the agent's message being streamed: it is reported as
// one message. The caller holds mu.
func (c *acpClient) flushLocked() {
	c.emit(c.text.String())
	c.text.Reset()
	c.messageID = ""
	c.overlong = false
	if c.quiet != nil {
		c.quiet.Stop()
	}
}

// waitQuiet reports the message being streamed if the agent says nothing
// more for quietFlush. The caller holds mu.
func (c *acpClient) waitQuiet() {
	if c.quiet == nil {
		c.quiet = time.AfterFunc(quietFlush, c.flush)
		return
	}
	c.quiet.Reset(quietFlush)
}

// flush ends the agent's message being streamed.
func (c *acpClient) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked()
}

func (c *acpClient) setReplaying(on bool) {
	c.mu.Lock()
	c.replaying = on
	c.mu.Unlock()
}

// refusedCall is the last tool call a refusal answered, "" for none.
func (c *acpClient) refusedCall() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

func (c *acpClient) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	c.touch()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.replaying {
		return nil // the history of a loaded session: told before
	}
	u := n.Update
	switch {
	case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
		if id := u.AgentMessageChunk.MessageId; id != nil && *id != c.messageID {
			c.flushLocked() // a new message begins
			c.messageID = *id
		}
		c.addText(u.AgentMessageChunk.Content.Text.Text)
	case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.ResourceLink != nil:
		c.link(u.AgentMessageChunk.Content.ResourceLink)
	case u.ToolCall != nil:
		c.flushLocked()
		c.emit(fmt.Sprintf("[tool] %s (%s)", u.ToolCall.Title, u.ToolCall.Status))
	case u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil:
		c.flushLocked()
		c.emit(fmt.Sprintf("[tool] %s: %s", u.ToolCallUpdate.ToolCallId, *u.ToolCallUpdate.Status))
	case u.Plan != nil:
		c.flushLocked()
		var steps []string
		for _, e := range u.Plan.Entries {
			steps = append(steps, fmt.Sprintf("%s (%s)", e.Content, e.Status))
		}
		c.emit("[plan] " + strings.Join(steps, "; "))
	}
	return nil
}

// addText takes a chunk of the agent's message being streamed. What is
// held is bounded: a message longer than maxLine is reported cut as soon
// as it passes it, and the rest of it dropped (as an exec agent's
// over-long line is). The caller holds mu.
func (c *acpClient) addText(chunk string) {
	if c.overlong {
		return
	}
	if room := maxLine - c.text.Len(); len(chunk) > room {
		c.text.WriteString(chunk[:room])
		c.emit(c.text.String())
		c.text.Reset()
		c.overlong = true
		return
	}
	c.text.WriteString(chunk)
	c.waitQuiet()
}

// titleOf is a tool call's title, else its ID.
func titleOf(tc acp.ToolCallUpdate) string {
	if tc.Title != nil && *tc.Title != "" {
		return *tc.Title
	}
	return string(tc.ToolCallId)
}

func selected(id acp.PermissionOptionId) acp.RequestPermissionResponse {
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: id}}}
}

var cancelledOutcome = acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}

// RequestPermission answers a permission request by the policy, per
// request: allow or deny here (decide), ask through the approver. Every
// decision is a message, with the paths the call names.
func (c *acpClient) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.touch()
	title := titleOf(p.ToolCall)
	if c.policy == PermissionsAsk && c.approve != nil {
		return c.ask(ctx, p, title)
	}
	d := decide(c.policy, p.ToolCall, p.Options, c.isInside)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked()
	c.emit(d.describe(title, c.policy))
	if d.refused {
		c.refused = title
	}
	if d.option == nil {
		return cancelledOutcome, nil
	}
	return selected(d.option.OptionId), nil
}

// ask puts a permission request to a person and answers with their
// choice (or the timeout's). The turn's idle timeout does not run while a
// person is asked: nobody is idle.
func (c *acpClient) ask(ctx context.Context, p acp.RequestPermissionRequest, title string) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.flushLocked()
	c.asked++
	key := strconv.Itoa(c.asked) + ":" + string(p.ToolCall.ToolCallId)
	c.mu.Unlock()
	req := approvalRequest(key, p, toolPaths(p.ToolCall))
	actx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel) // the agent withdrew the request
	defer stop()
	done := c.keepAlive()
	ans, err := c.approve(actx, req)
	done()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.emit(fmt.Sprintf("[permission] %s: no answer (%v); cancelled", title, err))
		return cancelledOutcome, nil
	}
	opt := pick(p.Options) // none yet
	for i := range p.Options {
		if string(p.Options[i].OptionId) == ans.OptionID {
			opt = &p.Options[i]
		}
	}
	if opt == nil {
		c.emit(fmt.Sprintf("[permission] %s: the answer %q is none of the agent's options; cancelled", title, ans.OptionID))
		return cancelledOutcome, nil
	}
	who := "a person's answer"
	if ans.TimedOut {
		who = "the approval timed out"
	}
	msg := fmt.Sprintf("[permission] %s: %s (%s), %s", title, opt.Name, opt.Kind, who)
	if len(req.Paths) > 0 {
		msg += "; paths: " + strings.Join(req.Paths, ", ")
	}
	c.emit(msg)
	if opt.Kind == acp.PermissionOptionKindRejectOnce || opt.Kind == acp.PermissionOptionKindRejectAlways {
		c.refused = title
	}
	return selected(opt.OptionId), nil
}

// keepAlive tells the turn's supervisor the agent is not idle until the
// returned function is called.
func (c *acpClient) keepAlive() func() {
	every := 10 * time.Second
	if c.idle > 0 {
		every = min(every, max(c.idle/3, 10*time.Millisecond))
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				c.touch()
			}
		}
	}()
	return func() { close(stop) }
}

// bases are the workspace as this machine sees it, and as the agent does.
func (c *acpClient) bases() []string {
	b := []string{filepath.Clean(c.workspace)}
	if c.agentWorkspace != "" {
		b = append(b, filepath.Clean(c.agentWorkspace))
	}
	return b
}

// isInside reports whether a path a tool call names is inside the
// workspace.
func (c *acpClient) isInside(path string) bool {
	if c.agentWorkspace != "" && !filepath.IsAbs(path) {
		path = filepath.Join(c.agentWorkspace, path)
	}
	return insideWorkspace(path, c.bases())
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

// ReadTextFile reads a file of the workspace for the agent, whole or the
// lines it asks for (line, 1-based, and limit). A missing file inside the
// workspace reads as empty: Gemini CLI reads a file before it writes it
// and takes no error as "not found" (the ACP connection rejects with the
// error object, whose text it never sees), so that an error would keep
// it from creating files; Claude Code and Codex create them either way.
// One outside is an error.
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
	b, err := ReadRegular(root, rel, maxReadFile, false)
	if errors.Is(err, fs.ErrNotExist) {
		return acp.ReadTextFileResponse{Content: ""}, nil
	}
	if err != nil {
		return acp.ReadTextFileResponse{}, fmt.Errorf("%s: %w", p.Path, err)
	}
	return acp.ReadTextFileResponse{Content: lines(string(b), p.Line, p.Limit)}, nil
}

// lines is the part of a text an agent asked for: from line (1-based; nil
// from the first), at most limit lines (nil: to the end).
func lines(text string, line, limit *int) string {
	if line == nil && limit == nil {
		return text
	}
	start := 0
	if line != nil && *line > 1 {
		for n := 1; n < *line && start < len(text); n++ {
			i := strings.IndexByte(text[start:], '\n')
			if i < 0 {
				return ""
			}
			start += i + 1
		}
	}
	text = text[start:]
	if limit == nil || *limit < 0 {
		return text
	}
	end := 0
	for n := 0; n < *limit && end < len(text); n++ {
		i := strings.IndexByte(text[end:], '\n')
		if i < 0 {
			return text
		}
		end += i + 1
	}
	return text[:end]
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
