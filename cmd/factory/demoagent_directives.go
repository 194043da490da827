package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// directives does what the lines of the prompt that start with "demo:"
// say, in order, so that tests (and a curious person) can make the demo
// agent behave as a real agent may:
//
//	demo: ask TITLE          ask permission for a tool call TITLE (a command), and say the answer
//	demo: write outside      ask permission to write ../OUTSIDE.md, and write it when allowed
//	demo: abort when refused end the turn cancelled at a refusal (as Codex's only refusal does)
//	demo: command SECONDS    run a command in a session of its own, and wait for it
//	demo: done               end the turn here (no SUMMARY.md)
//
// done says the turn ended with r.
func (d *demoTurn) directives(text string) (r acp.PromptResponse, done bool) {
	stop := acp.PromptResponse{StopReason: acp.StopReasonCancelled}
	n := 0
	for _, line := range strings.Split(text, "\n") {
		what, ok := strings.CutPrefix(strings.TrimSpace(line), "demo:")
		if !ok {
			continue
		}
		verb, arg, _ := strings.Cut(strings.TrimSpace(what), " ")
		n++
		var keepOn bool
		switch verb {
		case "ask":
			keepOn = d.ask(n, strings.TrimSpace(arg))
		case "write":
			keepOn = d.writeOutside(n)
		case "abort":
			d.abortOnRefusal, keepOn = true, true
		case "command":
			keepOn = d.command(arg)
		case "done":
			d.say("done, as the prompt says")
			return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, true
		default:
			keepOn = d.say("unknown directive %q", line)
		}
		if !keepOn {
			return stop, true
		}
	}
	return acp.PromptResponse{}, false
}

// ask asks permission for a command and says the answer, with this
// process's ID (the same agent process hears every answer of a turn).
func (d *demoTurn) ask(n int, title string) bool {
	opt := d.permission(fmt.Sprintf("ask-%d", n), title, acp.ToolKindExecute, "", map[string]any{"command": title})
	if opt == "" {
		opt = "no answer"
	}
	if opt == "reject" && d.abortOnRefusal {
		return false
	}
	return d.say("pid %d: %s: %s", os.Getpid(), title, opt)
}

// writeOutside asks to write a file beside the workspace, and writes it
// itself (as an agent with tools of its own does) when allowed.
func (d *demoTurn) writeOutside(n int) bool {
	path := filepath.Join(filepath.Dir(d.s.Cwd), "OUTSIDE.md")
	opt := d.permission(fmt.Sprintf("write-%d", n), "Write "+path, acp.ToolKindEdit, path, map[string]any{"file_path": path})
	switch {
	case opt == "reject" && d.abortOnRefusal:
		return false
	case opt == "allow" || opt == "allow_always":
		if err := os.WriteFile(path, []byte("written outside the workspace\n"), 0o644); err != nil {
			return d.say("could not write %s: %v", path, err)
		}
		return d.say("wrote %s", path)
	}
	return d.say("not allowed to write %s (%s)", path, opt)
}

// command runs sleep in a session of its own (as Claude Code runs its
// commands) and waits for it or a cancel.
func (d *demoTurn) command(arg string) bool {
	secs, err := strconv.Atoi(strings.TrimSpace(arg))
	if err != nil || secs <= 0 {
		secs = 60
	}
	cmd := exec.Command("sleep", strconv.Itoa(secs))
	cmd.Dir = d.s.Cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return d.say("could not start a command: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	if !d.say("started a command in a session of its own (pid %d)", cmd.Process.Pid) {
		return false // cancelled: the command is left running, for the server to end
	}
	select {
	case <-exited:
		return d.say("the command ended")
	case <-d.cancelled:
		return false
	case <-time.After(time.Duration(secs) * time.Second):
		return true
	}
}
