package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"factory"
	"factory/internal/store"
)

// CodeEnvironmentSetupFailed is the error code of a run whose runner's
// setup command failed (docs/spec/v1alpha1.md).
const CodeEnvironmentSetupFailed = "environment_setup_failed"

// setupFilePrefix keeps a run's setup files apart from its attachments in
// the store: an attachment's name holds no '/'.
const setupFilePrefix = "setup/"

// putSetupFiles stores the setup's files with the run, refusing a path that
// would leave the skills folder.
func putSetupFiles(b *store.Batch, id string, s *factory.RunSetup, files map[string][]byte) error {
	if s == nil {
		return nil
	}
	for _, p := range s.Files {
		if clean := path.Clean(p); clean != p || !strings.HasPrefix(p, factory.SkillsDirInWorkspace+"/") {
			return fmt.Errorf("setup file %q is not inside %s", p, factory.SkillsDirInWorkspace)
		}
		b.PutRunAttachment(id, setupFilePrefix+p, files[p])
	}
	return nil
}

// layOutSetupFiles writes the setup's files (the agent's skills) into the
// workspace, through a root that keeps every path inside it.
func (m *Manager) layOutSetupFiles(r *factory.Run) error {
	if r.Setup == nil || len(r.Setup.Files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(m.Workspace(r.ID))
	if err != nil {
		return err
	}
	defer root.Close()
	for _, p := range r.Setup.Files {
		data, err := m.cfg.Store.RunAttachment(r.ID, setupFilePrefix+p)
		if err != nil {
			return fmt.Errorf("skill file %s: %w", p, err)
		}
		if err := root.MkdirAll(path.Dir(p), 0o700); err != nil {
			return err
		}
		if err := root.WriteFile(p, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// setupEnv tells the agent which factory agent it is and the harness
// settings it resolved to: model and reasoning level reach the agent
// program this way (docs/definitions.md).
func setupEnv(s *factory.RunSetup) []string {
	if s == nil {
		return nil
	}
	var env []string
	add := func(k, v string) {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	add("FACTORY_AGENT", s.Agent)
	if h := s.Harness; h != nil {
		add("FACTORY_HARNESS", h.Type)
		add("FACTORY_MODEL", h.Model)
		add("FACTORY_REASONING_LEVEL", h.ReasoningLevel)
	}
	add("FACTORY_SKILLS_DIR", strings.TrimSuffix(skillsDirIfAny(s), "/"))
	return env
}

func skillsDirIfAny(s *factory.RunSetup) string {
	if len(s.Files) == 0 {
		return ""
	}
	return factory.SkillsDirInWorkspace
}

// SetupOutputLimit bounds what a setup command's output keeps for the
// run's status message.
const SetupOutputLimit = 2 << 10

// runSetup runs the runner's setup commands before the agent's first turn
// (RunSetup), with their output in setup.log beside the workspace.
func (m *Manager) runSetup(ctx context.Context, r *factory.Run, t Turn, events func(Event)) (Result, bool) {
	if r.Setup == nil || len(r.Setup.SetupCommands) == 0 {
		return Result{}, true
	}
	return RunSetup(ctx, r.Setup.SetupCommands, r.Setup.Runner, t, filepath.Join(filepath.Dir(t.Workspace), "setup.log"), events)
}

// RunSetup runs a runner's setup commands in the turn's workspace, in
// order, each with sh -c, in the agent's environment and as the agent's
// user. The first that fails (or outlives the turn's timeout) ends the run
// FAILED, environment_setup_failed, with the end of its output (SetupFailed).
// Output goes to logPath. ok is true when every command succeeded.
func RunSetup(ctx context.Context, commands []string, runner string, t Turn, logPath string, events func(Event)) (Result, bool) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
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
		cmd.Dir, cmd.Env = t.Workspace, agentEnv(t, "FACTORY_RUN_ID="+t.RunID)
		cmd.Stdout = io.MultiWriter(logFile, out)
		cmd.Stderr = cmd.Stdout
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: t.RunAs}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		fmt.Fprintf(logFile, "$ %s\n", command)
		err := cmd.Run()
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

// CodeSecretUnavailable is the error code of a run whose granted secret
// cannot be read (it does not exist, or does not open).
const CodeSecretUnavailable = "secret_unavailable"

// grants reads the managed secrets granted to a run, as NAME=value for
// the agent's environment (a name that cannot be a variable's is upper
// cased, with other characters as '_'). A secret that cannot be read ends
// the run FAILED, naming it; values are never logged or stored.
func (m *Manager) grants(s *factory.RunSetup) ([]string, Result, bool) {
	if s == nil || len(s.Secrets) == 0 {
		return nil, Result{}, true
	}
	var env []string
	for _, name := range s.Secrets {
		var v []byte
		err := errors.New("this server grants no secrets to runs")
		if m.cfg.SecretValue != nil {
			v, err = m.cfg.SecretValue(name)
		}
		if err == nil && strings.IndexByte(string(v), 0) >= 0 {
			err = errors.New("its value holds a NUL byte, which an environment variable cannot")
		}
		if err != nil {
			return nil, Result{State: factory.StateFailed, Code: CodeSecretUnavailable,
				Message: fmt.Sprintf("secret %s is granted to agent %s but cannot be read: %v (factory secrets create %s)", name, s.Agent, err, name)}, false
		}
		env = append(env, EnvName(name)+"="+string(v))
	}
	return env, Result{}, true
}

// EnvName is the environment variable a granted secret becomes: its own
// name when that is a variable's name, else upper cased with every other
// character as '_' (deploy.key → DEPLOY_KEY).
func EnvName(secret string) string {
	ok := secret != "" && !(secret[0] >= '0' && secret[0] <= '9')
	for _, c := range secret {
		ok = ok && (c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9')
	}
	if ok {
		return secret
	}
	out := []byte(strings.ToUpper(secret))
	for i, c := range out {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			out[i] = '_'
		}
	}
	if len(out) == 0 || out[0] >= '0' && out[0] <= '9' {
		out = append([]byte{'_'}, out...)
	}
	return string(out)
}
