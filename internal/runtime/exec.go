package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"factory"
)

// Bounds of what an agent can make the server hold.
const (
	maxLine   = factory.MaxMessageBytes // a longer stdout line is cut
	maxStderr = 64 << 10                // the end of stderr that is kept
)

// MaxStderr is how much of the end of an agent's stderr a turn keeps.
const MaxStderr = maxStderr

// ExecExecutor runs a command in the workspace (docs/spec/runtime.md's exec
// executor): the prompt on stdin, FACTORY_RUN_ID, FACTORY_PROMPT_FILE,
// FACTORY_ATTACHMENTS_DIR and FACTORY_FOLLOWUP in the environment, each
// stdout line a status message, exit 0 SUCCEEDED and anything else FAILED.
// The command runs in a process group of its own, so that cancelling,
// timing out or finishing leaves none of its processes behind.
type ExecExecutor struct {
	Command []string
	// Grace is how long a cancelled command has between SIGTERM and
	// SIGKILL (default 10 s).
	Grace time.Duration
}

// Run runs one turn.
func (e *ExecExecutor) Run(ctx context.Context, t Turn, events func(Event)) Result {
	if len(e.Command) == 0 {
		return Result{State: factory.StateError, Message: "the environment has no command"}
	}
	grace := e.Grace
	if grace == 0 {
		grace = 10 * time.Second
	}
	cmd := exec.Command(e.Command[0], e.Command[1:]...)
	cmd.Dir = t.Workspace()
	cmd.Stdin = strings.NewReader(t.Prompt)
	cmd.Env = agentEnv(t,
		"FACTORY_RUN_ID="+t.RunID,
		"FACTORY_PROMPT_FILE="+t.PromptFile(),
		"FACTORY_ATTACHMENTS_DIR="+t.AttachmentsDir(),
		"FACTORY_FOLLOWUP="+t.FollowUp)
	proc, err := startAgent(cmd, &t)
	if err != nil {
		return Result{State: factory.StateError, Message: err.Error()}
	}
	if t.RunID != "" {
		proc.marker = RunMarker(t.RunID)
	}
	defer proc.close()
	stdout, stderr := proc.stdout, proc.stderr

	activity := make(chan struct{}, 1)
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		StatusLines(stdout, events, activity)
	}()
	var waitErr error
	exited := waitExit(proc, &waitErr)
	// end kills what is left of the group (background children holding
	// stdout) and reads the output to its end.
	end := func() {
		proc.signal(syscall.SIGKILL)
		<-lines
		<-proc.stderrDone
	}
	finish := func() Result {
		end()
		return finished(waitErr, stderr.String())
	}
	// stop: SIGTERM (SIGINT for an interrupt, as a terminal's Ctrl-C),
	// then SIGKILL after the grace period.
	stop := func(state factory.RunState, msg string) Result {
		sig := syscall.SIGTERM
		if state == factory.StateBlocked {
			sig = syscall.SIGINT
		}
		proc.signal(sig)
		select {
		case <-exited:
		case <-time.After(grace):
			proc.signal(syscall.SIGKILL)
			<-exited
		}
		end()
		return Result{State: state, Message: msg, Stderr: stderr.String()}
	}
	return Supervise(ctx, t, activity, exited, finish, stop)
}

func finished(err error, stderr string) Result {
	if err == nil {
		return Result{State: factory.StateSucceeded, Message: "the agent exited with status 0", Stderr: stderr}
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		msg := fmt.Sprintf("the agent exited with status %d", exit.ExitCode())
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			msg = fmt.Sprintf("the agent was killed by %s", ws.Signal())
		}
		return agentFailed(msg, stderr)
	}
	return Result{State: factory.StateError, Message: err.Error(), Stderr: stderr}
}

// ExitResult is how a turn ends when its agent exited with code (a
// container's, say): SUCCEEDED on 0, else FAILED with stderr's last line.
func ExitResult(code int, stderr string) Result {
	if code == 0 {
		return Result{State: factory.StateSucceeded, Message: "the agent exited with status 0", Stderr: stderr}
	}
	return agentFailed(fmt.Sprintf("the agent exited with status %d", code), stderr)
}

func agentFailed(msg, stderr string) Result {
	if last := lastLine(stderr); last != "" {
		msg += ": " + last
	}
	return Result{State: factory.StateFailed, Message: msg, Stderr: stderr}
}

// StatusLines reads an agent's stdout to its end: each non-empty line is
// a status message, and a tick on activity (which never blocks).
func StatusLines(stdout io.Reader, events func(Event), activity chan<- struct{}) {
	r := bufio.NewReaderSize(stdout, maxLine)
	for {
		line, err := readLine(r)
		if line != "" {
			events(Event{Time: time.Now().UTC(), Message: line})
			select {
			case activity <- struct{}{}:
			default:
			}
		}
		if err != nil {
			return
		}
	}
}

// readLine reads one line, cutting lines longer than the buffer: an agent
// that floods one endless line cannot make the server hold it.
func readLine(r *bufio.Reader) (string, error) {
	line, isPrefix, err := r.ReadLine()
	s := string(line)
	if isPrefix {
		s = CutMessage(s+"…", maxLine) // marked as cut
	}
	for isPrefix && err == nil {
		_, isPrefix, err = r.ReadLine() // drop the rest of an over-long line
	}
	if errors.Is(err, io.EOF) && s != "" {
		err = io.EOF
	}
	return strings.TrimRight(s, "\r"), err
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// Tail keeps the last Max bytes written to it.
type Tail struct {
	mu  sync.Mutex
	Max int
	buf []byte
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.Max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// timer is an optional, resettable timeout.
type timer struct {
	d time.Duration
	t *time.Timer
}

func newTimer(d time.Duration) *timer {
	tm := &timer{d: d}
	if d > 0 {
		tm.t = time.NewTimer(d)
	}
	return tm
}

func (tm *timer) C() <-chan time.Time {
	if tm.t == nil {
		return nil
	}
	return tm.t.C
}

// Stop releases the timer.
func (tm *timer) Stop() {
	if tm.t != nil {
		tm.t.Stop()
	}
}

func (tm *timer) Reset() {
	if tm.t != nil {
		tm.t.Stop()
		tm.t = time.NewTimer(tm.d)
	}
}
