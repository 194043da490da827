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
	"time"

	"factory"
	"factory/internal/runtime"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Where the run's folders are mounted in its container: the workspace, the
// output folder and the run's own home, read-write; the turn's script and
// environment (the harness), read-only. Nothing else of the worker's: the
// run's folder itself (where the worker writes the harness and keeps its
// notes) is never the agent's.
const (
	RunDir      = "/factory"
	Workspace   = RunDir + "/workspace"
	OutputDir   = RunDir + "/output"
	Home        = RunDir + "/home"
	Harness     = RunDir + "/harness"
	harnessDir  = "harness" // in the run's folder on the worker
	turnScript  = "turn.sh"
	turnEnv     = "turn.env"
	setupLog    = "setup.log"
	homeSetup   = ".factory-setup.log" // the setup's output, in the run's home
	maxSetupLog = 1 << 20              // of it, kept in the run's folder
	// setupFailure is the exit status of a turn whose setup failed.
	setupFailure = 97
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

// turn is a run's turn in its container: the runtime's turn (with this
// machine's paths: Dir is the run's folder, mounted at RunDir), the ACP
// executor when its agent speaks ACP, and the nonce that heads the
// script's own lines (the agent cannot forge them).
type turn struct {
	runtime.Turn
	acp   *runtime.ACPExecutor
	nonce string
	// script is what the turn's script said of itself: a setup command
	// that failed.
	script *scriptState
}

// Run runs one turn, laid out in its folder (runtime.LayOut) already: in
// the run's container, of the turn's image, created on its first turn and
// started again for each follow-up, so that what the setup commands
// installed outside the workspace stays. The setup commands run inside,
// before the agent.
func (b *Backend) Run(ctx context.Context, rt runtime.Turn, events func(runtime.Event)) runtime.Result {
	t := turn{Turn: rt}
	if rt.Executor == runtime.ExecutorACP {
		t.acp = &runtime.ACPExecutor{Command: rt.Command, Permissions: rt.Permissions}
	}
	if t.Image == "" {
		return runtime.Result{State: factory.StateFailed, Code: runtime.CodeEnvironmentSetupFailed,
			Message: fmt.Sprintf("runner %q names no platform.linux.dockerImage: the docker backend runs every run in a container of its runner's image", t.Runner)}
	}
	if len(t.Command) == 0 {
		return runtime.Result{State: factory.StateError, Message: "the environment has no command"}
	}
	t.nonce, t.script = "factory:"+factory.NewUID(""), &scriptState{}
	if err := writeTurn(t); err != nil {
		return runtime.Result{State: factory.StateError, Message: "the turn's script: " + err.Error()}
	}
	defer removeEnv(t) // once the agent starts too: it may hold granted secrets
	id, res, ok := b.container(ctx, t, events)
	if !ok {
		return res
	}
	if t.acp != nil {
		return b.runACP(ctx, t, id, events)
	}
	return b.runExec(ctx, t, id, events)
}

// container is the run's container, created (its image pulled first when
// the daemon lacks it) unless an earlier turn did.
func (b *Backend) container(ctx context.Context, t turn, events func(runtime.Event)) (string, runtime.Result, bool) {
	name := "factory-" + t.RunID
	if c, err := b.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{}); err == nil {
		return c.Container.ID, runtime.Result{}, true
	}
	if err := b.ensureImage(ctx, t.Image, events); err != nil {
		return "", runtime.Result{State: factory.StateFailed, Code: runtime.CodeEnvironmentSetupFailed,
			Message: fmt.Sprintf("image %s of runner %s: %v", t.Image, t.Runner, err)}, false
	}
	hc := &container.HostConfig{
		Binds: []string{filepath.Join(t.Dir, "workspace") + ":" + Workspace, filepath.Join(t.Dir, "output") + ":" + OutputDir,
			filepath.Join(t.Dir, "home") + ":" + Home, filepath.Join(t.Dir, harnessDir) + ":" + Harness + ":ro"},
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
	cfg := &container.Config{Image: t.Image, Cmd: []string{"/bin/sh", Harness + "/" + turnScript}, WorkingDir: Workspace, Env: []string{"HOME=" + Home},
		User:         fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
		AttachStdout: true, AttachStderr: true, Labels: map[string]string{LabelRun: t.RunID, LabelWorker: b.Worker},
		// An ACP agent's protocol comes in on stdin, afresh at each start.
		OpenStdin: t.acp != nil, AttachStdin: t.acp != nil, StdinOnce: t.acp != nil}
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

// launched is a started turn of a container: its demultiplexed output,
// its exit.
type launched struct {
	att    client.ContainerAttachResult
	stdout *io.PipeReader
	copied chan struct{} // the attach stream has been read to its end
	exited chan struct{}
	code   int64 // the exit status, once exited is closed (-1: unknown)
	err    error // why waiting failed, if it did
}

// launch attaches to the container (stdin too for an ACP agent), then
// starts it: stdout comes out of the returned pipe, stderr goes to
// stderr.
func (b *Backend) launch(ctx context.Context, t turn, id string, stderr io.Writer) (*launched, error) {
	bg := context.WithoutCancel(ctx)
	att, err := b.cli.ContainerAttach(bg, id, client.ContainerAttachOptions{Stream: true, Stdin: t.acp != nil, Stdout: true, Stderr: true})
	if err != nil {
		return nil, fmt.Errorf("attaching to the run's container: %w", err)
	}
	stdoutR, stdoutW := io.Pipe()
	l := &launched{att: att, stdout: stdoutR, copied: make(chan struct{}), exited: make(chan struct{}), code: -1}
	go func() {
		defer close(l.copied)
		_, err := stdcopy.StdCopy(stdoutW, stderr, att.Reader)
		stdoutW.CloseWithError(err)
	}()
	wait := b.cli.ContainerWait(bg, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := b.cli.ContainerStart(bg, id, client.ContainerStartOptions{}); err != nil {
		att.Close()
		<-l.copied
		return nil, fmt.Errorf("starting the run's container: %w", err)
	}
	go func() {
		defer close(l.exited)
		select {
		case r := <-wait.Result:
			l.code = r.StatusCode
		case l.err = <-wait.Error:
		}
	}()
	return l, nil
}

// runExec runs a command's turn: stdout lines are status messages, the end
// of stderr is kept, until it exits or the turn is stopped.
func (b *Backend) runExec(ctx context.Context, t turn, id string, events func(runtime.Event)) runtime.Result {
	stderr := &runtime.Tail{Max: runtime.MaxStderr}
	l, err := b.launch(ctx, t, id, stderr)
	if err != nil {
		return runtime.Result{State: factory.StateError, Message: err.Error()}
	}
	defer l.att.Close()
	activity, lines := make(chan struct{}, 1), make(chan struct{})
	go func() { defer close(lines); runtime.StatusLines(l.stdout, scriptNotes(t, events), activity) }()
	drain := func() { <-lines; <-l.copied } // the attach stream ends when the container exits
	finish := func() runtime.Result {
		drain()
		if l.err != nil {
			return runtime.Result{State: factory.StateError, Message: "waiting for the run's container: " + l.err.Error(), Stderr: stderr.String()}
		}
		if r, failed := setupFailed(t, int(l.code)); failed {
			return r
		}
		return runtime.ExitResult(int(l.code), stderr.String())
	}
	stop := func(state factory.RunState, msg string) runtime.Result {
		b.stop(id, l, state)
		drain()
		return runtime.Result{State: state, Message: msg, Stderr: stderr.String()}
	}
	return runtime.Supervise(ctx, t.Turn, activity, l.exited, finish, stop)
}

// stop ends a container's turn: SIGTERM (SIGINT for an interrupt), then
// SIGKILL after the grace period.
func (b *Backend) stop(id string, l *launched, state factory.RunState) {
	b.kill(id, "SIGTERM", state)
	select {
	case <-l.exited:
	case <-time.After(b.grace()):
		b.kill(id, "SIGKILL", state)
		<-l.exited
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
