package runtime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// The three agents' permission requests, as they send them (trimmed).
const (
	claudeWrite = `{"options":[{"kind":"allow_always","name":"Always Allow","optionId":"allow_always"},{"kind":"allow_once","name":"Allow","optionId":"allow"},{"kind":"reject_once","name":"Reject","optionId":"reject"}],
		"sessionId":"s","toolCall":{"content":[{"newText":"# Notes\n","path":"%s","type":"diff"}],"kind":"edit","locations":[{"path":"%s"}],"rawInput":{"content":"# Notes\n","file_path":"%s"},"title":"Write","toolCallId":"toolu_1"}}`
	codexPatch = `{"options":[{"kind":"allow_once","name":"Yes","optionId":"approved"},{"kind":"reject_once","name":"No, provide feedback","optionId":"abort"}],
		"sessionId":"s","toolCall":{"kind":"edit","rawInput":{"call_id":"c","changes":{"%s":{"content":"x","type":"add"}}},"title":"Edit","toolCallId":"call_1"}}`
	codexExec = `{"options":[{"kind":"allow_once","name":"Yes, proceed","optionId":"approved"},{"kind":"allow_always","name":"Yes, and don't ask again","optionId":"approved-execpolicy-amendment"},{"kind":"reject_once","name":"No","optionId":"abort"}],
		"sessionId":"s","toolCall":{"kind":"execute","rawInput":{"command":["/bin/bash","-lc","make"],"cwd":"%s"},"title":"make","toolCallId":"call_2"}}`
	geminiShell = `{"options":[{"kind":"allow_always","name":"Allow for this session","optionId":"proceed_always"},{"kind":"allow_once","name":"Allow","optionId":"proceed_once"},{"kind":"reject_once","name":"Reject","optionId":"cancel"}],
		"sessionId":"s","toolCall":{"content":[{"content":{"text":"echo hi","type":"text"},"type":"content"}],"kind":"execute","status":"pending","title":"echo hi","toolCallId":"run_shell_command_1"}}`
	onlyAlways = `{"options":[{"kind":"allow_always","name":"Always","optionId":"always"}],"sessionId":"s","toolCall":{"toolCallId":"t","locations":[{"path":"%s"}]}}`
)

func request(t *testing.T, tmpl string, paths ...any) acp.RequestPermissionRequest {
	t.Helper()
	var p acp.RequestPermissionRequest
	s := tmpl
	for _, v := range paths {
		s = strings.Replace(s, "%s", v.(string), 1)
	}
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	return p
}

func TestDecide(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	os.MkdirAll(ws, 0o755)
	os.Symlink(dir, filepath.Join(ws, "up")) // a link inside the workspace to a folder outside it
	in, out := filepath.Join(ws, "NOTES.md"), filepath.Join(dir, "OUTSIDE.md")
	inside := func(p string) bool { return insideWorkspace(p, []string{ws}) }
	cases := []struct {
		name, policy string
		req          acp.RequestPermissionRequest
		option       string // "" cancelled
		refused      bool
		outside      []string
	}{
		{"claude writes inside: the narrowest allow", PermissionsAllow, request(t, claudeWrite, in, in, in), "allow", false, nil},
		{"claude writes outside", PermissionsAllow, request(t, claudeWrite, out, out, out), "reject", true, []string{out}},
		{"relative, inside", PermissionsAllow, request(t, claudeWrite, "docs/a.md", "docs/a.md", "docs/a.md"), "allow", false, nil},
		{"dot-dot out", PermissionsAllow, request(t, claudeWrite, ws+"/../x", ws+"/../x", ws+"/../x"), "reject", true, []string{ws + "/../x"}},
		{"through a link to outside", PermissionsAllow, request(t, claudeWrite, ws+"/up/x", ws+"/up/x", ws+"/up/x"), "reject", true, []string{ws + "/up/x"}},
		{"codex patches outside", PermissionsAllow, request(t, codexPatch, out), "abort", true, []string{out}},
		{"codex runs a command in the workspace", PermissionsAllow, request(t, codexExec, ws), "approved", false, nil},
		{"codex runs a command elsewhere", PermissionsAllow, request(t, codexExec, "/etc"), "abort", true, []string{"/etc"}},
		{"gemini's shell names no path", PermissionsAllow, request(t, geminiShell), "proceed_once", false, nil},
		{"only allow_always offered", PermissionsAllow, request(t, onlyAlways, in), "always", false, nil},
		{"deny", PermissionsDeny, request(t, claudeWrite, in, in, in), "reject", true, nil},
		{"deny with no reject option", PermissionsDeny, request(t, onlyAlways, in), "", true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decide(c.policy, c.req.ToolCall, c.req.Options, inside)
			got := ""
			if d.option != nil {
				got = string(d.option.OptionId)
			}
			if got != c.option || d.refused != c.refused || !slices.Equal(d.outside, c.outside) {
				t.Fatalf("got %q refused=%v outside=%q, want %q %v %q", got, d.refused, d.outside, c.option, c.refused, c.outside)
			}
		})
	}
}

func TestToolPaths(t *testing.T) {
	var tc acp.ToolCallUpdate
	json.Unmarshal([]byte(`{"toolCallId":"t","locations":[{"path":"/w/a"},{"path":"/w/a"}],"content":[{"type":"diff","path":"/w/b","newText":""}],
		"rawInput":{"file_path":"/w/c","cwd":"/w","paths":["/w/d",3],"changes":{"/w/f":{},"/w/e":{}},"other":"/nope"}}`), &tc)
	if got := toolPaths(tc); !slices.Equal(got, []string{"/w/a", "/w/b", "/w/c", "/w/d", "/w", "/w/e", "/w/f"}) {
		t.Fatalf("%q", got)
	}
	many := map[string]any{}
	for i := range 100 {
		many[strings.Repeat("p", i+1)] = map[string]any{}
	}
	if got := toolPaths(acp.ToolCallUpdate{RawInput: map[string]any{"changes": many}}); len(got) != maxToolPaths {
		t.Fatalf("bounded: %d", len(got))
	}
}

// TestMessagesSplit: each run of message text between other updates is
// one message, in stream order; a new message ID starts a new message; a
// loaded session's replay is not reported.
func TestMessagesSplit(t *testing.T) {
	var got []string
	c := &acpClient{events: func(e Event) { got = append(got, e.Message) }, activity: make(chan struct{}, 1)}
	text := func(s string, id ...string) acp.SessionNotification {
		u := acp.UpdateAgentMessageText(s)
		if len(id) > 0 {
			u.AgentMessageChunk.MessageId = &id[0]
		}
		return acp.SessionNotification{Update: u}
	}
	ctx := context.Background()
	c.setReplaying(true)
	c.SessionUpdate(ctx, text("told before\n"))
	c.setReplaying(false)
	for _, n := range []acp.SessionNotification{text("I will "), text("write NOTES.md."),
		{Update: acp.StartToolCall("t1", "Write NOTES.md")}, text("Now I run\n"), text("a shell command."),
		{Update: acp.UpdateToolCall("t1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted))},
		text("First.", "m1"), text(" Still first.", "m1"), text("Second.", "m2"), {Update: acp.UpdatePlan(acp.PlanEntry{Content: "test", Status: "pending"})},
		text("The answer.")} {
		c.SessionUpdate(ctx, n)
	}
	c.flush()
	want := []string{"I will write NOTES.md.", "[tool] Write NOTES.md ()", "Now I run\na shell command.", "[tool] t1: completed",
		"First. Still first.", "Second.", "[plan] test (pending)", "The answer."}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// TestReadMissingFile: a missing file inside the workspace reads as empty
// (what the three agents write to as a new file); one outside is
// refused; lines and limit are honoured.
func TestReadMissingFile(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("1\n2\n3\n"), 0o644)
	c := &acpClient{workspace: ws, activity: make(chan struct{}, 1)}
	if r, err := c.ReadTextFile(context.Background(), acp.ReadTextFileRequest{Path: filepath.Join(ws, "new.md")}); err != nil || r.Content != "" {
		t.Fatalf("missing inside: %q %v", r.Content, err)
	}
	if _, err := c.ReadTextFile(context.Background(), acp.ReadTextFileRequest{Path: "/etc/passwd"}); err == nil {
		t.Fatalf("outside: %v", err)
	}
	two, one := 2, 1
	r, err := c.ReadTextFile(context.Background(), acp.ReadTextFileRequest{Path: "a.txt", Line: &two, Limit: &one})
	if err != nil || r.Content != "2\n" {
		t.Fatalf("line 2, one line: %q %v", r.Content, err)
	}
}

func TestLines(t *testing.T) {
	p := func(i int) *int { return &i }
	cases := []struct {
		text        string
		line, limit *int
		want        string
	}{
		{"a\nb\nc", nil, nil, "a\nb\nc"},
		{"a\nb\nc", p(1), p(1), "a\n"},
		{"a\nb\nc", p(3), nil, "c"},
		{"a\nb\nc", p(4), nil, ""},
		{"a\nb\nc", p(2), p(10), "b\nc"},
		{"a\nb\nc", p(0), p(0), ""},
		{"", p(5), p(5), ""},
	}
	for _, c := range cases {
		if got := lines(c.text, c.line, c.limit); got != c.want {
			t.Errorf("lines(%q, %v, %v) = %q, want %q", c.text, c.line, c.limit, got, c.want)
		}
	}
}

// FuzzDecide: whatever an agent sends, a decision refuses any tool call
// that names a path outside the workspace, and picks only an option the
// agent offered.
func FuzzDecide(f *testing.F) {
	for _, s := range []string{claudeWrite, codexPatch, codexExec, geminiShell, onlyAlways} {
		f.Add(strings.ReplaceAll(s, "%s", "/ws/x"), "allow")
	}
	f.Add(`{"toolCall":{"toolCallId":"t","rawInput":{"changes":{"../../x":{}}}},"options":[{"kind":"allow_once","optionId":"a"}]}`, "deny")
	f.Fuzz(func(t *testing.T, body, policy string) {
		var p acp.RequestPermissionRequest
		if json.Unmarshal([]byte(body), &p) != nil {
			return
		}
		d := decide(policy, p.ToolCall, p.Options, func(s string) bool { return insideWorkspace(s, []string{"/ws"}) })
		if len(d.outside) > 0 && !d.refused {
			t.Fatalf("a path outside, allowed: %+v", d)
		}
		if d.option != nil && !slices.ContainsFunc(p.Options, func(o acp.PermissionOption) bool { return o.OptionId == d.option.OptionId }) {
			t.Fatalf("an option the agent did not offer: %+v", d.option)
		}
		if d.refused && d.option != nil && d.option.Kind != acp.PermissionOptionKindRejectOnce && d.option.Kind != acp.PermissionOptionKindRejectAlways {
			t.Fatalf("a refusal with an allow option: %+v", d.option)
		}
		_ = approvalRequest("k", p, d.paths)
	})
}

func FuzzLines(f *testing.F) {
	f.Add("a\nb\nc", 2, 1)
	f.Fuzz(func(t *testing.T, text string, line, limit int) {
		got := lines(text, &line, &limit)
		if !strings.Contains(text, got) {
			t.Fatalf("lines(%q, %d, %d) = %q: not part of the text", text, line, limit, got)
		}
	})
}
