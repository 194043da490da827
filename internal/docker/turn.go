package docker

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"factory/internal/runtime"
)

// setupFailed reads the status the turn's script left when a setup
// command failed: which one, and its exit status.
func setupFailed(t turn, code int) (runtime.Result, bool) {
	if code != setupFailure {
		return runtime.Result{}, false
	}
	b, err := os.ReadFile(filepath.Join(t.Dir, setupStatus))
	if err != nil {
		return runtime.Result{}, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return runtime.Result{}, false
	}
	i, err1 := strconv.Atoi(f[0])
	status, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || i < 0 || i >= len(t.Setup) {
		return runtime.Result{}, false
	}
	return runtime.SetupFailed(i, t.Setup[i], t.Runner, fmt.Sprintf("exited with status %d", status), logTail(filepath.Join(t.Dir, setupLog))), true
}

func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > runtime.SetupOutputLimit {
		b = b[len(b)-runtime.SetupOutputLimit:]
	}
	return string(b)
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// writeTurn writes the turn's environment and script into the run's
// folder: the script reads the environment (and removes it: it may hold
// granted secrets), runs the setup commands, then becomes the agent: the
// prompt on its stdin (a command), or the attached stdin (an ACP agent).
// The script's own lines (each setup command's start, the agent's start)
// begin with the turn's nonce, on stdout for a command, on stderr for an
// ACP agent (its stdout is the protocol's).
func writeTurn(t turn) error {
	var env strings.Builder
	vars := append(append(append([]string{}, t.Env...), runtime.GitEnv(t.Turn)...),
		"FACTORY_RUN_ID="+t.RunID, "FACTORY_PROMPT_FILE="+Workspace+"/PROMPT.md", "FACTORY_ATTACHMENTS_DIR="+Workspace+"/attachments",
		"FACTORY_FOLLOWUP="+t.FollowUp, "FACTORY_OUTPUT_DIR="+OutputDir)
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		if envName.MatchString(k) {
			fmt.Fprintf(&env, "export %s=%s\n", k, Quote(v))
		}
	}
	note := func(sh *strings.Builder, msg string) {
		redirect := ""
		if t.acp != nil {
			redirect = " >&2"
		}
		fmt.Fprintf(sh, "printf '%%s %%s\\n' %s %s%s\n", Quote(t.nonce), Quote(msg), redirect)
	}
	var sh strings.Builder
	fmt.Fprintf(&sh, "# Turn of run %s, written by its worker.\n", t.RunID)
	fmt.Fprintf(&sh, ". %s/%s && rm -f %s/%s\n", RunDir, turnEnv, RunDir, turnEnv)
	for i, c := range t.Setup {
		note(&sh, runtime.SetupMessage(i, t.Setup))
		fmt.Fprintf(&sh, "/bin/sh -c %s </dev/null >>%s/%s 2>&1\n", Quote(c), RunDir, setupLog)
		fmt.Fprintf(&sh, "s=$?; if [ $s -ne 0 ]; then echo \"%d $s\" >%s/%s; exit %d; fi\n", i, RunDir, setupStatus, setupFailure)
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
	_ = os.Remove(filepath.Join(t.Dir, setupStatus))
	if len(t.Setup) > 0 {
		_ = os.Remove(filepath.Join(t.Dir, setupLog))
	}
	if err := os.WriteFile(filepath.Join(t.Dir, turnEnv), []byte(env.String()), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(t.Dir, turnScript), []byte(sh.String()), 0o600)
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
			if !told && t.Started != nil {
				t.Started(0) // the container's process is the daemon's: no PID here
			}
			told = true
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
