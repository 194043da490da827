package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"factory"
)

// CodeEnvironmentSetupFailed is the error code of a run whose runner's
// setup command failed (docs/spec/v1alpha1.md).
const CodeEnvironmentSetupFailed = "environment_setup_failed"

// SetupOutputLimit bounds what a setup command's output keeps for the
// run's status message.
const SetupOutputLimit = 2 << 10

// SetupLog is the file beside a run's workspace that its setup commands'
// output goes to.
const SetupLog = "setup.log"

// RunSetup runs the turn's setup commands (its runner's) in its workspace,
// in order, each with sh -c, in the agent's environment and as the agent's
// user. The first that fails (or outlives the turn's timeout) ends the run
// FAILED, environment_setup_failed, with the end of its output (SetupFailed).
// Output goes to SetupLog in the run's folder. ok is true when every
// command succeeded.
func RunSetup(ctx context.Context, t Turn, events func(Event)) (Result, bool) {
	commands, runner := t.Setup, t.Runner
	logFile, err := os.OpenFile(filepath.Join(t.Dir, SetupLog), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return Result{State: factory.StateError, Message: "setup log: " + err.Error()}, false
	}
	defer logFile.Close()
	if t.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.Timeout)
		defer cancel()
	}
	for i, command := range commands {
		events(Event{Time: time.Now().UTC(), Message: SetupMessage(i, commands)})
		out := &Tail{Max: SetupOutputLimit}
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
		cmd.Dir, cmd.Env = t.Workspace(), agentEnv(t, "FACTORY_RUN_ID="+t.RunID)
		cmd.Stdout = io.MultiWriter(logFile, out)
		cmd.Stderr = cmd.Stdout
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: t.RunAs}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		fmt.Fprintf(logFile, "$ %s\n", command)
		err := startConfined(cmd, t.policy(nil))
		if err == nil {
			err = cmd.Wait()
		}
		if err == nil {
			continue
		}
		why := err.Error()
		var exit *exec.ExitError
		switch {
		case ctx.Err() != nil && errors.Is(context.Cause(ctx), errShutdown):
			return Result{State: factory.StateError, Message: errShutdown.Error() + " during setup; send a follow-up to continue it"}, false
		case ctx.Err() != nil:
			why = "timed out"
		case errors.As(err, &exit):
			why = fmt.Sprintf("exited with status %d", exit.ExitCode())
		}
		return SetupFailed(i, command, runner, why, out.String()), false
	}
	return Result{}, true
}

// SetupMessage is the status message of a run's setup command i.
func SetupMessage(i int, commands []string) string {
	return fmt.Sprintf("setup %d/%d: %s", i+1, len(commands), commands[i])
}

// SetupFailed is how a run ends when its runner's setup command i failed:
// why, and the end of what it printed.
func SetupFailed(i int, command, runner, why, output string) Result {
	msg := fmt.Sprintf("setup command %d of runner %s (%s) %s", i+1, runner, command, why)
	if o := strings.TrimSpace(output); o != "" {
		msg += ": " + o
	}
	return Result{State: factory.StateFailed, Message: msg, Code: CodeEnvironmentSetupFailed}
}
