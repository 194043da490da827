// Package docker runs a worker's turns in containers, through the Docker
// Engine API (the moby client; nothing shells out to a docker command):
// one container per run, of its runner's image, with the runner's instance
// shape as CPU and memory limits, the run's folder mounted, and the
// agent's environment only. It is the only importer of the Docker client.
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"factory"
	"factory/internal/runtime"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Where the run's folder is mounted in its container, and what it holds.
const (
	RunDir       = "/factory"
	Workspace    = RunDir + "/workspace"
	OutputDir    = RunDir + "/output"
	turnScript   = "turn.sh"
	turnEnv      = "turn.env"
	setupLog     = "setup.log"
	setupStatus  = "setup.status"
	setupFailure = 97 // the exit status of a turn whose setup failed
)

// Labels on the containers of runs: which run, which worker.
const (
	LabelRun    = "dev.factory.run"
	LabelWorker = "dev.factory.worker"
)

// Backend runs turns in containers.
type Backend struct {
	cli *client.Client
	// Worker names the containers' owner (a label), so that a worker
	// removes its own leftovers and no one else's.
	Worker string
	// Network is the containers' network mode: "" the daemon's default
	// (its bridge), none, or a network's name; never the host's.
	Network string
	// Grace is how long a stopped agent has between SIGTERM and SIGKILL
	// (default 10 s).
	Grace time.Duration
	Log   *slog.Logger
}

// ErrHostNetwork refuses to give runs the host's network: an agent would
// reach every service of the worker's machine on loopback.
var ErrHostNetwork = errors.New("the host network is not offered to runs (use the daemon's bridge, none, or a network of its own)")

// Open connects to the Docker daemon of the environment (DOCKER_HOST, else
// its default socket), checks that it answers, and removes the containers
// this worker left behind.
func Open(ctx context.Context, worker, network string, log *slog.Logger) (*Backend, error) {
	if network == "host" {
		return nil, ErrHostNetwork
	}
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("the Docker client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("no Docker daemon answers at %s: %w", cli.DaemonHost(), err)
	}
	b := &Backend{cli: cli, Worker: worker, Network: network, Log: log}
	b.removeAll(ctx)
	return b, nil
}

// Close removes this worker's containers (their runs' workspaces stay on
// the machine) and closes the client.
func (b *Backend) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.removeAll(ctx)
	return b.cli.Close()
}

func (b *Backend) removeAll(ctx context.Context) {
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelWorker+"="+b.Worker)})
	if err != nil {
		b.Log.Warn("listing this worker's containers", "err", err)
		return
	}
	for _, c := range list.Items {
		if _, err := b.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			b.Log.Warn("removing a container", "container", c.ID, "err", err)
		}
	}
}

// Turn is one turn of a run in its container.
type Turn struct {
	// Turn is the turn as the direct backend has it, with this machine's
	// paths: Workspace and OutputDir must be Dir's workspace and output.
	runtime.Turn
	Dir     string // the run's folder on this machine, mounted at RunDir
	Command []string
	Image   string
	Shape   *factory.InstanceShape
	// Setup are the runner's setup commands, run first inside the
	// container (a run's first turn only), Runner its name.
	Setup  []string
	Runner string

	marker string // the line the script prints as the agent starts
}

// Run runs one turn: in the run's container, created on its first turn
// and started again for each follow-up, so that what the setup commands
// installed outside the workspace stays.
func (b *Backend) Run(ctx context.Context, t Turn, events func(runtime.Event)) runtime.Result {
	if t.Image == "" {
		return runtime.Result{State: factory.StateFailed, Code: runtime.CodeEnvironmentSetupFailed,
			Message: fmt.Sprintf("runner %q names no platform.linux.dockerImage: the docker backend runs every run in a container of its runner's image", t.Runner)}
	}
	if len(t.Command) == 0 {
		return runtime.Result{State: factory.StateError, Message: "the environment has no command"}
	}
	t.marker = "factory: agent starting " + factory.NewUID("") // unguessable: the agent cannot print it first
	if err := b.writeTurn(t); err != nil {
		return runtime.Result{State: factory.StateError, Message: "the turn's script: " + err.Error()}
	}
	defer os.Remove(filepath.Join(t.Dir, turnEnv)) // the script removes it too, once read
	id, res, ok := b.container(ctx, t, events)
	if !ok {
		return res
	}
	return b.start(ctx, t, id, events)
}

// container is the run's container, created (its image pulled first when
// the daemon lacks it) unless an earlier turn did.
func (b *Backend) container(ctx context.Context, t Turn, events func(runtime.Event)) (string, runtime.Result, bool) {
	name := "factory-" + t.RunID
	if c, err := b.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{}); err == nil {
		return c.Container.ID, runtime.Result{}, true
	}
	if err := b.ensureImage(ctx, t.Image, events); err != nil {
		return "", runtime.Result{State: factory.StateFailed, Code: runtime.CodeEnvironmentSetupFailed,
			Message: fmt.Sprintf("image %s of runner %s: %v", t.Image, t.Runner, err)}, false
	}
	hc := &container.HostConfig{
		Binds:       []string{t.Dir + ":" + RunDir},
		NetworkMode: container.NetworkMode(b.Network),
		Init:        ptr(true), // signals reach the agent; its orphans are reaped
		SecurityOpt: []string{"no-new-privileges"},
	}
	if s := t.Shape; s != nil {
		hc.NanoCPUs = int64(s.VCPUs) * 1e9
		hc.Memory = int64(s.MemoryGB * (1 << 30))
	}
	// The agent runs as the worker's own user: what it leaves in the
	// run's folder is the worker's to read, send and remove.
	cfg := &container.Config{Image: t.Image, Cmd: []string{"/bin/sh", RunDir + "/" + turnScript}, WorkingDir: Workspace,
		User:         fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
		AttachStdout: true, AttachStderr: true, Labels: map[string]string{LabelRun: t.RunID, LabelWorker: b.Worker}}
	c, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	if err != nil {
		return "", runtime.Result{State: factory.StateError, Message: "creating the run's container: " + err.Error()}, false
	}
	return c.ID, runtime.Result{}, true
}

// ensureImage pulls image unless the daemon has it.
func (b *Backend) ensureImage(ctx context.Context, image string, events func(runtime.Event)) error {
	if _, err := b.cli.ImageInspect(ctx, image); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return err
	}
	events(runtime.Event{Time: time.Now().UTC(), Message: "pulling image " + image})
	resp, err := b.cli.ImagePull(ctx, image, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("pulling: %w", err)
	}
	defer resp.Close()
	if err := resp.Wait(ctx); err != nil {
		return fmt.Errorf("pulling: %w", err)
	}
	return nil
}

// start runs the container once: its output read as the agent's (stdout
// lines status messages, the end of stderr kept), until it exits or the
// turn is stopped.
func (b *Backend) start(ctx context.Context, t Turn, id string, events func(runtime.Event)) runtime.Result {
	bg := context.WithoutCancel(ctx)
	att, err := b.cli.ContainerAttach(bg, id, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return runtime.Result{State: factory.StateError, Message: "attaching to the run's container: " + err.Error()}
	}
	defer att.Close()
	stdoutR, stdoutW := io.Pipe()
	stderr := &runtime.Tail{Max: runtime.MaxStderr}
	activity, lines := make(chan struct{}, 1), make(chan struct{})
	go func() { defer close(lines); runtime.StatusLines(stdoutR, startedBy(t, events), activity) }()
	go func() { _, err := stdcopy.StdCopy(stdoutW, stderr, att.Reader); stdoutW.CloseWithError(err) }()
	wait := b.cli.ContainerWait(bg, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := b.cli.ContainerStart(bg, id, client.ContainerStartOptions{}); err != nil {
		att.Close()
		<-lines
		return runtime.Result{State: factory.StateError, Message: "starting the run's container: " + err.Error()}
	}
	var code int64 = -1
	var waitErr error
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case r := <-wait.Result:
			code = r.StatusCode
		case waitErr = <-wait.Error:
		}
	}()
	drain := func() { <-lines } // the attach stream ends when the container exits
	finish := func() runtime.Result {
		drain()
		if waitErr != nil {
			return runtime.Result{State: factory.StateError, Message: "waiting for the run's container: " + waitErr.Error(), Stderr: stderr.String()}
		}
		if r, failed := setupFailed(t, int(code)); failed {
			return r
		}
		return runtime.ExitResult(int(code), stderr.String())
	}
	stop := func(state factory.RunState, msg string) runtime.Result {
		b.kill(id, "SIGTERM", state)
		select {
		case <-exited:
		case <-time.After(b.grace()):
			b.kill(id, "SIGKILL", state)
			<-exited
		}
		drain()
		return runtime.Result{State: state, Message: msg, Stderr: stderr.String()}
	}
	return runtime.Supervise(ctx, t.Turn, activity, exited, finish, stop)
}

// startedBy passes the container's status lines on, but for the line the
// turn's script prints as the agent starts (after the setup): that one
// tells the turn's Started, once.
func startedBy(t Turn, events func(runtime.Event)) func(runtime.Event) {
	told := false
	return func(e runtime.Event) {
		if !told && e.Message == t.marker {
			told = true
			if t.Started != nil {
				t.Started(0) // the container's process is the daemon's: no PID here
			}
			return
		}
		events(e)
	}
}

// kill signals the agent: SIGINT for an interrupt (as a terminal's
// Ctrl-C), else sig.
func (b *Backend) kill(id, sig string, state factory.RunState) {
	if state == factory.StateBlocked && sig == "SIGTERM" {
		sig = "SIGINT"
	}
	if _, err := b.cli.ContainerKill(context.Background(), id, client.ContainerKillOptions{Signal: sig}); err != nil && !cerrdefs.IsConflict(err) {
		b.Log.Warn("signalling a run's container", "container", id, "signal", sig, "err", err)
	}
}

func (b *Backend) grace() time.Duration {
	if b.Grace > 0 {
		return b.Grace
	}
	return 10 * time.Second
}

// setupFailed reads the status the turn's script left when a setup
// command failed: which one, and its exit status.
func setupFailed(t Turn, code int) (runtime.Result, bool) {
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
// granted secrets), runs the setup commands, then becomes the agent, the
// prompt on its stdin.
func (b *Backend) writeTurn(t Turn) error {
	var env strings.Builder
	vars := append(append([]string{}, t.Env...),
		"FACTORY_RUN_ID="+t.RunID, "FACTORY_PROMPT_FILE="+Workspace+"/PROMPT.md", "FACTORY_ATTACHMENTS_DIR="+Workspace+"/attachments",
		"FACTORY_FOLLOWUP="+t.FollowUp, "FACTORY_OUTPUT_DIR="+OutputDir)
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		if envName.MatchString(k) {
			fmt.Fprintf(&env, "export %s=%s\n", k, Quote(v))
		}
	}
	var sh strings.Builder
	fmt.Fprintf(&sh, "# Turn of run %s, written by its worker.\n", t.RunID)
	fmt.Fprintf(&sh, ". %s/%s && rm -f %s/%s\n", RunDir, turnEnv, RunDir, turnEnv)
	for i, c := range t.Setup {
		fmt.Fprintf(&sh, "printf '%%s\\n' %s\n", Quote(runtime.SetupMessage(i, t.Setup)))
		fmt.Fprintf(&sh, "/bin/sh -c %s </dev/null >>%s/%s 2>&1\n", Quote(c), RunDir, setupLog)
		fmt.Fprintf(&sh, "s=$?; if [ $s -ne 0 ]; then echo \"%d $s\" >%s/%s; exit %d; fi\n", i, RunDir, setupStatus, setupFailure)
	}
	fmt.Fprintf(&sh, "printf '%%s\\n' %s\n", Quote(t.marker))
	sh.WriteString("exec")
	for _, a := range t.Command {
		sh.WriteString(" " + Quote(a))
	}
	fmt.Fprintf(&sh, " <%s/PROMPT.md\n", Workspace)
	_ = os.Remove(filepath.Join(t.Dir, setupStatus))
	if len(t.Setup) > 0 {
		_ = os.Remove(filepath.Join(t.Dir, setupLog))
	}
	if err := os.WriteFile(filepath.Join(t.Dir, turnEnv), []byte(env.String()), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(t.Dir, turnScript), []byte(sh.String()), 0o600)
}

// Quote makes s one word of a POSIX shell, whatever it holds.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func ptr[T any](v T) *T { return &v }
