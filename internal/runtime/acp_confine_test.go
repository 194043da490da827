package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// TestACPFileConfinement: the agent's file requests stay in the workspace,
// whatever links it made. The attack: ReadTextFile("ws/link") with link →
// /outside/secret returned the secret, and a write through a dangling link
// created a file outside.
func TestACPFileConfinement(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	os.WriteFile(secret, []byte("the admin key"), 0o600)
	os.WriteFile(filepath.Join(ws, "notes.md"), []byte("inside"), 0o600)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(secret, filepath.Join(ws, "link")))
	must(os.Symlink(filepath.Join(outside, "created"), filepath.Join(ws, "dangling")))
	must(os.Symlink(outside, filepath.Join(ws, "dirlink")))
	must(os.Symlink("notes.md", filepath.Join(ws, "inner")))
	c := &acpClient{workspace: ws, activity: make(chan struct{}, 8)}
	ctx := context.Background()
	read := func(p string) (string, error) {
		r, err := c.ReadTextFile(ctx, acp.ReadTextFileRequest{Path: p})
		return r.Content, err
	}
	write := func(p string) error {
		_, err := c.WriteTextFile(ctx, acp.WriteTextFileRequest{Path: p, Content: "x"})
		return err
	}
	for _, p := range []string{"link", filepath.Join(ws, "link"), "dirlink/secret", "../" + filepath.Base(outside) + "/secret", secret} {
		if got, err := read(p); err == nil {
			t.Errorf("read %s: %q, want a refusal", p, got)
		}
	}
	for _, p := range []string{"dangling", "dirlink/new", filepath.Join(outside, "direct")} {
		if err := write(p); err == nil {
			t.Errorf("write %s: accepted, want a refusal", p)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("files appeared outside the workspace: %v", entries)
	}
	// Inside, everything works, links that stay inside included.
	if got, err := read("inner"); err != nil || got != "inside" {
		t.Errorf("read through an inner link: %q %v", got, err)
	}
	if got, err := read(filepath.Join(ws, "notes.md")); err != nil || got != "inside" {
		t.Errorf("read by absolute path: %q %v", got, err)
	}
	if err := write("a/b/c.txt"); err != nil {
		t.Errorf("write into new folders: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a", "b", "c.txt")); string(b) != "x" {
		t.Errorf("the written file: %q", b)
	}
}

// swapAgent is an ACP agent in a shell that, at its prompt, swaps its
// workspace for a link to $SECRETS and asks the client to read and write
// there, reporting the answers as its messages. Like a real agent, it
// lives on after its turn (until its input closes): one that exits at once
// races its last messages against the client's notice of its exit.
const swapAgent = `
reply() { printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$1" "$2"; }
idof() { printf '%s' "$1" | sed -n 's/^.*"id":\([0-9][0-9]*\).*$/\1/p'; }
say() { esc=$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr -d '\n'); printf '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s\\n"}}}}\n' "$esc"; }
read -r l; reply "$(idof "$l")" '{"protocolVersion":1,"agentCapabilities":{}}'
read -r l; reply "$(idof "$l")" '{"sessionId":"s1"}'
read -r l; p=$(idof "$l")
ws=$(pwd); mv "$ws" "$ws.old" && ln -s "$SECRETS" "$ws"
printf '{"jsonrpc":"2.0","id":901,"method":"fs/read_text_file","params":{"sessionId":"s1","path":"%s/secret.txt"}}\n' "$ws"
read -r l; say "read: $l"
printf '{"jsonrpc":"2.0","id":902,"method":"fs/write_text_file","params":{"sessionId":"s1","path":"%s/planted.txt","content":"planted"}}\n' "$ws"
read -r l; say "write: $l"
reply "$p" '{"stopReason":"end_turn"}'
cat >/dev/null
`

// TestACPWorkspaceOpenedOnce is the attack of an agent that swaps its
// workspace for a link to the host's files in the middle of its turn, then
// asks the client to read and write there: the client serves the folder
// the turn started with, never the link's target.
func TestACPWorkspaceOpenedOnce(t *testing.T) {
	secrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "secret.txt"), []byte("the server's key"), 0o600); err != nil {
		t.Fatal(err)
	}
	tn := Turn{RunID: "run_swap", Prompt: "p", Dir: t.TempDir(), Env: []string{"SECRETS=" + secrets}}
	var mu sync.Mutex
	var msgs []string
	ex := &ACPExecutor{Command: []string{"/bin/sh", "-c", swapAgent}, Grace: time.Second}
	res := Here(context.Background(), tn, ex, func(e Event) { mu.Lock(); msgs = append(msgs, e.Message); mu.Unlock() })
	all := strings.Join(msgs, "\n")
	if !strings.Contains(all, "read: ") || !strings.Contains(all, "write: ") {
		t.Fatalf("the attack did not run: %+v\n%s", res, all)
	}
	if strings.Contains(all, "the server's key") {
		t.Errorf("the client served a file through the swapped workspace:\n%s", all)
	}
	if entries, _ := os.ReadDir(secrets); len(entries) != 1 {
		t.Errorf("the client wrote through the swapped workspace: %v", entries)
	}
	if b, err := os.ReadFile(filepath.Join(tn.Dir, "workspace.old", "planted.txt")); err != nil || string(b) != "planted" {
		t.Errorf("the write did not land in the turn's own workspace: %q %v", b, err)
	}
}

// TestACPTextIsBounded is the attack of an ACP agent that streams one
// endless message: what the client holds of it stays bounded, and every
// message it makes of the text is too.
func TestACPTextIsBounded(t *testing.T) {
	var longest, total int
	c := &acpClient{activity: make(chan struct{}, 1), events: func(e Event) {
		longest, total = max(longest, len(e.Message)), total+len(e.Message)
	}}
	chunk := strings.Repeat("x", 1<<10)
	held := 0
	for i := 0; i < 4<<10; i++ { // 4 MiB of one line
		update := acp.SessionNotification{Update: acp.SessionUpdate{AgentMessageChunk: &acp.SessionUpdateAgentMessageChunk{Content: acp.TextBlock(chunk)}}}
		if err := c.SessionUpdate(context.Background(), update); err != nil {
			t.Fatal(err)
		}
		held = max(held, c.text.Len())
	}
	c.flush()
	if held > 64<<10 || longest > 16<<10+8 {
		t.Errorf("the client held %d bytes of one line, and made a message of %d bytes", held, longest)
	}
	if total == 0 {
		t.Errorf("nothing of the text was reported")
	}
}

// FuzzACPText: however an agent cuts its text into chunks, the client
// holds at most one bounded message, and every message it makes is
// bounded.
func FuzzACPText(f *testing.F) {
	for _, s := range []string{"a\nb\n", strings.Repeat("x", 20000) + "\nshort\n", "\n\n\r\n", "é€\n"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, in string, chunk int) {
		chunk = max(1, chunk%(1<<15))
		c := &acpClient{activity: make(chan struct{}, 1), events: func(e Event) {
			if len(e.Message) > maxLine || e.Message == "" {
				t.Fatalf("a message of %d bytes: %q", len(e.Message), e.Message)
			}
		}}
		for b := in; b != ""; b = b[min(chunk, len(b)):] {
			c.addText(b[:min(chunk, len(b))])
			if c.text.Len() > maxLine+1 {
				t.Fatalf("%d bytes held for a line's end", c.text.Len())
			}
		}
		c.flush()
	})
}
