package runtime

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// inheritedEnv are the variables of the server's environment that an agent
// inherits: what programs need to run at all, nothing else. The server's
// environment holds its own secrets (FACTORY_SECRETS_KEY, API keys of its
// operators), and an agent acts on untrusted input (webhook payloads are
// prompt injection waiting to happen), so anything else an agent needs,
// its model's API key included, is granted by its environment's env
// setting, by name (docs/agents-api.md).
var inheritedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
	"LC_MESSAGES", "TZ", "TMPDIR", "TERM"}

// agentEnv is an agent's environment: the inherited variables, then what
// its environment grants, then the run's own (later ones win).
func agentEnv(t Turn, run ...string) []string {
	var env []string
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	switch {
	case t.Confine != nil:
		// The server's HOME is out of a confined agent's reach: its run
		// has a home and a temporary folder of its own (Claude Code keeps
		// its commands' output under /tmp unless told otherwise).
		env = append(env, "HOME="+t.Home(), "TMPDIR="+t.TmpDir(), "CLAUDE_CODE_TMPDIR="+t.TmpDir())
	case t.Dir != "":
		// A HOME of the run's own: the agent's settings and sessions stay
		// with the run, and nothing of the server's user's home is seen.
		env = append(env, "HOME="+t.Home())
	}
	env = append(env, t.Env...)
	env = append(env, gitEnv(t)...)
	if t.Dir != "" {
		env = append(env, "FACTORY_OUTPUT_DIR="+t.OutputDir())
	}
	return append(env, run...)
}

// agentProcess is a started agent in its own process group. Its stdout and
// stderr are plain pipes, not StdoutPipe: Wait then waits for the process
// only, and output left by a process that outlives it is still read.
type agentProcess struct {
	cmd        *exec.Cmd
	stdout     *os.File
	stderrR    *os.File
	stderr     *Tail         // the end of stderr, kept for the run's result
	stderrDone chan struct{} // closed when stderr has been read to its end
	exited     chan struct{} // closed when the process has exited
	waitErr    error         // its exit error, once exited is closed
	// marker is the environment entry of the turn's processes
	// (RunMarker), "" when the turn names no run.
	marker string
	// since is when it started, less a margin (bootTicks): only processes
	// started since can be the turn's.
	since uint64
}

// startAgent starts cmd in a new process group and tells onStart (when
// set) its PID. The caller defers close, which kills whatever is left of
// the group.
//
// The agent dies with the server: it gets SIGKILL when the thread that
// started it ends (Pdeathsig), and that thread is locked to the goroutine
// that waits for the agent, so it lives exactly as long as the agent does
// and ends early only with the server's process. (What the agent started
// in its group is killed at the server's next start: see reap.)
func startAgent(cmd *exec.Cmd, t *Turn) (*agentProcess, error) {
	runAs, onStart, policy := t.RunAs, t.Started, t.policy(append([]string{cmd.Path}, cmd.Args...))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: runAs}
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		stdout.Close()
		w.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, errW
	p := &agentProcess{cmd: cmd, stdout: stdout, stderrR: errR, stderr: &Tail{Max: maxStderr},
		stderrDone: make(chan struct{}), exited: make(chan struct{}), since: bootTicks()}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var err error
		if policy != nil {
			// Confined from this thread on: what it starts is too.
			if err = policy.Restrict(); err != nil {
				err = fmt.Errorf("confining it: %w", err)
			}
		}
		if err == nil {
			err = cmd.Start()
		}
		started <- err
		if err == nil {
			p.waitErr = cmd.Wait()
		}
		close(p.exited)
	}()
	err = <-started
	if err == nil && onStart != nil {
		onStart(cmd.Process.Pid)
	}
	w.Close() // the child has its copies
	errW.Close()
	if err != nil {
		stdout.Close()
		errR.Close()
		return nil, fmt.Errorf("the agent could not start: %w", err)
	}
	go func() {
		defer close(p.stderrDone)
		io.Copy(p.stderr, errR)
	}()
	return p, nil
}

// signal sends sig to every process of the agent's group.
func (p *agentProcess) signal(sig syscall.Signal) {
	syscall.Kill(-p.cmd.Process.Pid, sig)
}

// close makes sure no process of the turn outlives it (its group, and
// every process of its tree: killTree) and releases the pipes.
func (p *agentProcess) close() {
	killTree(p.cmd.Process.Pid, p.marker, p.since)
	p.stdout.Close()
	p.stderrR.Close()
}

// end ends the agent gracefully (docs/spec/harnesses.md): its stdin is
// closed, it has exitGrace to exit by itself, then what is left of the
// turn gets SIGTERM and, after killGrace, SIGKILL (endTree).
func (p *agentProcess) end(stdin io.Closer, exitGrace, killGrace time.Duration) {
	if stdin != nil {
		_ = stdin.Close()
	}
	select {
	case <-p.exited:
	case <-time.After(exitGrace):
	}
	endTree(p.cmd.Process.Pid, p.marker, p.since, killGrace)
}
