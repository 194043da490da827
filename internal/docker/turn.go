package docker

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"factory/internal/runtime"
)

// scriptState is what a turn's script said of itself on its notes
// stream: the setup command that failed, and its exit status.
type scriptState struct {
	mu     sync.Mutex
	failed bool
	index  int
	status int
}

// setupNote parses the script's note of a failed setup command
// ("setup failed <index> <status>").
func (s *scriptState) setupNote(msg string) bool {
	rest, ok := strings.CutPrefix(msg, setupFailedNote)
	if !ok {
		return false
	}
	f := strings.Fields(rest)
	if len(f) != 2 {
		return true
	}
	i, err1 := strconv.Atoi(f[0])
	status, err2 := strconv.Atoi(f[1])
	if err1 == nil && err2 == nil {
		s.mu.Lock()
		s.failed, s.index, s.status = true, i, status
		s.mu.Unlock()
	}
	return true
}

// setupFailedNote heads the script's note of a failed setup command.
const setupFailedNote = "setup failed "

// setupFailed is the result of a turn whose setup command failed, as its
// script said on its notes stream, with the end of the setup's output.
func setupFailed(t turn, code int) (runtime.Result, bool) {
	if code != setupFailure || t.script == nil {
		return runtime.Result{}, false
	}
	s := t.script
	s.mu.Lock()
	failed, i, status := s.failed, s.index, s.status
	s.mu.Unlock()
	if !failed || i < 0 || i >= len(t.Setup) {
		return runtime.Result{}, false
	}
	out := keepSetupLog(t)
	if len(out) > runtime.SetupOutputLimit {
		out = out[len(out)-runtime.SetupOutputLimit:]
	}
	return runtime.SetupFailed(i, t.Setup[i], t.Runner, fmt.Sprintf("exited with status %d", status), string(out)), true
}

// keepSetupLog copies the end of the setup's output from the run's home
// (the agent's: read through its root, a regular file only, bounded) to
// setup.log in the run's folder, and returns it.
func keepSetupLog(t turn) []byte {
	home, err := runtime.OpenRunFolder(t.Dir, "home")
	if err != nil {
		return nil
	}
	defer home.Close()
	b, err := runtime.ReadRegular(home, homeSetup, maxSetupLog, true)
	if err != nil {
		return nil
	}
	_ = runtime.WriteRunFile(t.Dir, setupLog, b)
	return b
}

// removeEnv removes the turn's environment file from the harness.
func removeEnv(t turn) {
	if h, err := runtime.OpenRunFolder(t.Dir, harnessDir); err == nil {
		_ = h.Remove(turnEnv)
		h.Close()
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// writeTurn writes the turn's environment and script into the harness
// folder of the run's folder (the container sees it read-only): the script
// reads the environment, runs the setup commands, then becomes the agent:
// the prompt on its stdin (a command), or the attached stdin (an ACP
// agent). The worker removes the environment once the agent starts (it
// may hold granted secrets). The script's own lines (each setup command's
// start, a setup command's failure, the agent's start) begin with the
// turn's nonce, on stdout for a command, on stderr for an ACP agent (its
// stdout is the protocol's).
func writeTurn(t turn) error {
	var env strings.Builder
	vars := append(append(append([]string{}, t.Env...), runtime.GitEnv(t.Turn)...),
		"FACTORY_RUN_ID="+t.RunID, "FACTORY_PROMPT_FILE="+Workspace+"/PROMPT.md", "FACTORY_ATTACHMENTS_DIR="+Workspace+"/attachments",
		"FACTORY_FOLLOWUP="+t.FollowUp, "FACTORY_OUTPUT_DIR="+OutputDir, "HOME="+Home)
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		if envName.MatchString(k) {
			fmt.Fprintf(&env, "export %s=%s\n", k, Quote(v))
		}
	}
	redirect := ""
	if t.acp != nil {
		redirect = " >&2"
	}
	note := func(sh *strings.Builder, msg string) {
		fmt.Fprintf(sh, "printf '%%s %%s\\n' %s %s%s\n", Quote(t.nonce), Quote(msg), redirect)
	}
	var sh strings.Builder
	fmt.Fprintf(&sh, "# Turn of run %s, written by its worker.\n", t.RunID)
	fmt.Fprintf(&sh, ". %s/%s\n", Harness, turnEnv)
	for i, c := range t.Setup {
		note(&sh, runtime.SetupMessage(i, t.Setup))
		fmt.Fprintf(&sh, "/bin/sh -c %s </dev/null >>%s/%s 2>&1\n", Quote(c), Home, homeSetup)
		fmt.Fprintf(&sh, "s=$?; if [ $s -ne 0 ]; then printf '%%s %%s\\n' %s \"%s%d $s\"%s; exit %d; fi\n",
			Quote(t.nonce), setupFailedNote, i, redirect, setupFailure)
	}
	note(&sh, agentStarting)
	sh.WriteString("exec")
	for _, a := range t.Command {
		sh.WriteString(" " + Quote(a))
	}
	if t.acp == nil {
		fmt.Fprintf(&sh, " <%s/PROMPT.md", Workspace)
	}
	sh.WriteString("\n")
	dir, err := os.OpenRoot(t.Dir)
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := dir.Mkdir(harnessDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	h, err := runtime.OpenFolder(dir, harnessDir)
	if err != nil {
		return err
	}
	defer h.Close()
	if len(t.Setup) > 0 {
		if home, err := runtime.OpenFolder(dir, "home"); err == nil {
			_ = home.Remove(homeSetup)
			home.Close()
		}
	}
	if err := h.WriteFile(turnEnv, []byte(env.String()), 0o600); err != nil {
		return err
	}
	return h.WriteFile(turnScript, []byte(sh.String()), 0o600)
}

// agentStarting is the script's note as it becomes the agent.
const agentStarting = "agent starting"

// scriptNotes passes a container's status lines on, but for the script's
// own (they begin with the turn's nonce): a setup command's start is a
// status message, the agent's start tells the turn's Started, once.
func scriptNotes(t turn, events func(runtime.Event)) func(runtime.Event) {
	told := false
	return func(e runtime.Event) {
		msg, ours := strings.CutPrefix(e.Message, t.nonce+" ")
		switch {
		case !ours:
			events(e)
		case msg == agentStarting:
			if !told {
				removeEnv(t)
				if len(t.Setup) > 0 {
					keepSetupLog(t)
				}
				if t.Started != nil {
					t.Started(0) // the container's process is the daemon's: no PID here
				}
			}
			told = true
		case t.script != nil && t.script.setupNote(msg):
		default:
			events(runtime.Event{Time: e.Time, Message: msg})
		}
	}
}

// Quote makes s one word of a POSIX shell, whatever it holds.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func ptr[T any](v T) *T { return &v }
