package docker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"factory"
	"factory/internal/docker/dockertest"
	"factory/internal/runtime"

	"github.com/moby/moby/client"
)

// Daemon opens the backend on the environment's Docker daemon, or skips
// the test saying why it cannot.
func Daemon(t testing.TB, worker string) *Backend {
	t.Helper()
	dockertest.Need(t)
	b, err := Open(context.Background(), worker, "none", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// runDir lays a run's folder out as a worker does.
func runDir(t *testing.T, prompt string) (string, runtime.Turn) {
	dir := t.TempDir()
	turn := runtime.Turn{RunID: factory.NewUID("run_"), Prompt: prompt, Timeout: time.Minute, Dir: dir}
	if err := runtime.LayOut(&turn); err != nil {
		t.Fatal(err)
	}
	return dir, turn
}

// withCommand is a turn running command in image.
func withCommand(t runtime.Turn, image string, command ...string) runtime.Turn {
	t.Command, t.Image = command, image
	return t
}

type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) event(e runtime.Event) {
	r.mu.Lock()
	r.msgs = append(r.msgs, e.Message)
	r.mu.Unlock()
}
func (r *recorder) all() string { r.mu.Lock(); defer r.mu.Unlock(); return strings.Join(r.msgs, "\n") }

// TestContainerTurns runs a run's turns in its container: the setup
// commands inside it, then the agent, with the runner's limits, the
// prompt on stdin, the agent's environment and nothing of the worker's;
// a follow-up starts the same container again.
func TestContainerTurns(t *testing.T) {
	b := Daemon(t, "test-turns")
	t.Setenv("FACTORY_TEST_WORKER_SECRET", "not-for-agents")
	dir, turn := runDir(t, "the prompt, with 'quotes' and $dollars")
	turn.Env = []string{"GRANTED=it's granted", "bad name=skipped"}
	agent := []string{"/bin/sh", "-c", `cat; echo; echo "marker: $(cat /opt/marker)"; echo "followup: $FACTORY_FOLLOWUP"; env > "$FACTORY_OUTPUT_DIR/env.txt"; cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max 2>/dev/null; echo to-stderr >&2`}
	ct := turn
	ct.Command, ct.Image, ct.Shape = agent, dockertest.Image, &factory.InstanceShape{VCPUs: 1, MemoryGB: 1}
	ct.Setup, ct.Runner = []string{"mkdir -p /opt && echo installed > /opt/marker", "echo setup output; true"}, "linux"
	var rec recorder
	started := 0
	ct.Started = func(int) {
		if ct.Setup != nil && !strings.Contains(rec.all(), "setup 2/2") {
			t.Errorf("the agent started before the setup ended: %q", rec.all())
		}
		started++
	}
	res := b.Run(context.Background(), ct, rec.event)
	if res.State != factory.StateSucceeded {
		t.Fatalf("first turn: %+v", res)
	}
	msgs := rec.all()
	for _, want := range []string{"setup 1/2: mkdir -p /opt && echo installed > /opt/marker", "setup 2/2: echo setup output; true",
		"the prompt, with 'quotes' and $dollars", "marker: installed", "followup: ", "1073741824"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("the turn's messages lack %q:\n%s", want, msgs)
		}
	}
	if started != 1 || strings.Contains(msgs, "agent starting") {
		t.Errorf("the agent's start was told %d times; messages %q", started, msgs)
	}
	if !strings.Contains(res.Stderr, "to-stderr") || strings.Contains(msgs, "to-stderr") {
		t.Errorf("stderr %q; messages %q", res.Stderr, msgs)
	}
	env, err := os.ReadFile(filepath.Join(dir, "output", "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GRANTED=it's granted", "FACTORY_RUN_ID=" + turn.RunID, "FACTORY_OUTPUT_DIR=/factory/output", "FACTORY_PROMPT_FILE=/factory/workspace/PROMPT.md"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("the agent's environment lacks %q:\n%s", want, env)
		}
	}
	if strings.Contains(string(env), "not-for-agents") || strings.Contains(string(env), "bad name") {
		t.Errorf("the agent's environment holds what is not the agent's:\n%s", env)
	}
	if _, err := os.Stat(filepath.Join(dir, harnessDir, turnEnv)); !os.IsNotExist(err) {
		t.Errorf("the turn's environment file is left on disk: %v", err)
	}
	c, err := b.cli.ContainerInspect(context.Background(), "factory-"+turn.RunID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := c.Container.HostConfig
	if hc.NanoCPUs != 1e9 || hc.Memory != 1<<30 || hc.NetworkMode != "none" || c.Container.Config.Labels[LabelWorker] != "test-turns" {
		t.Errorf("container limits %d CPUs, %d bytes, network %q, labels %v", hc.NanoCPUs, hc.Memory, hc.NetworkMode, c.Container.Config.Labels)
	}

	// A follow-up: the same container, the setup's work still there,
	// the setup not run again.
	ct.FollowUp, ct.Setup = "and then?", nil
	rec = recorder{}
	if res := b.Run(context.Background(), ct, rec.event); res.State != factory.StateSucceeded {
		t.Fatalf("follow-up: %+v", res)
	}
	if msgs := rec.all(); !strings.Contains(msgs, "marker: installed") || !strings.Contains(msgs, "followup: and then?") || strings.Contains(msgs, "setup 1/") {
		t.Errorf("follow-up's messages:\n%s", msgs)
	}
}

// TestContainerEnds: a failing setup command, a failing agent, cancel,
// interrupt, the environment's timeout, no image, and an image no
// registry has.
func TestContainerEnds(t *testing.T) {
	b := Daemon(t, "test-ends")
	b.Grace = 2 * time.Second
	cases := []struct {
		name    string
		setup   []string
		command string
		image   string
		stop    error // cancel the turn with this cause once it printed
		timeout time.Duration
		state   factory.RunState
		code    string
		message string
	}{
		{name: "setup fails", setup: []string{"true", "echo broken; exit 3", "echo never"}, command: "echo never",
			state: factory.StateFailed, code: runtime.CodeEnvironmentSetupFailed, message: "setup command 2 of runner linux (echo broken; exit 3) exited with status 3: broken"},
		{name: "agent fails", command: "echo working; echo the reason >&2; exit 4", state: factory.StateFailed, message: "the agent exited with status 4: the reason"},
		{name: "agent exits 97 without a setup", command: "exit 97", state: factory.StateFailed, message: "the agent exited with status 97"},
		{name: "cancelled", command: "echo started; sleep 60", stop: errors.New("cancelled"), state: factory.StateCancelled, message: "cancelled"},
		{name: "interrupted", command: "trap 'echo got SIGINT; exit 130' INT; echo started; while true; do sleep 0.1; done", stop: runtime.ErrInterrupted,
			state: factory.StateBlocked, message: "interrupted"},
		{name: "timeout", command: "echo started; sleep 60", timeout: 1500 * time.Millisecond, state: factory.StateFailed, code: runtime.CodeInfrastructureTimeout},
		{name: "no image", command: "true", image: "-", state: factory.StateFailed, code: runtime.CodeEnvironmentSetupFailed, message: "names no platform.linux.dockerImage"},
		{name: "image nowhere", command: "true", image: "127.0.0.1:1/nowhere:1", state: factory.StateFailed, code: runtime.CodeEnvironmentSetupFailed,
			message: "image 127.0.0.1:1/nowhere:1 of runner linux"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, turn := runDir(t, "p")
			if tc.timeout > 0 {
				turn.Timeout = tc.timeout
			}
			ct := turn
			ct.Command, ct.Image, ct.Setup, ct.Runner = []string{"/bin/sh", "-c", tc.command}, dockertest.Image, tc.setup, "linux"
			switch tc.image {
			case "-":
				ct.Image = ""
			case "":
			default:
				ct.Image = tc.image
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			started := time.Now()
			res := b.Run(ctx, ct, func(e runtime.Event) {
				if e.Message == "started" && tc.stop != nil {
					cancel(tc.stop)
				}
			})
			if res.State != tc.state || res.Code != tc.code || !strings.Contains(res.Message, tc.message) {
				t.Errorf("got %s %q %q; want %s %q, a message with %q", res.State, res.Code, res.Message, tc.state, tc.code, tc.message)
			}
			if took := time.Since(started); tc.stop != nil && took > b.Grace+5*time.Second {
				t.Errorf("stopping took %s", took)
			}
		})
	}
}

// TestOpen: the host network is refused; a worker's containers go when it
// closes.
func TestOpen(t *testing.T) {
	if _, err := Open(context.Background(), "w", "host", slog.Default()); !errors.Is(err, ErrHostNetwork) {
		t.Fatalf("host network: %v", err)
	}
	b := Daemon(t, "test-open")
	_, turn := runDir(t, "p")
	if res := b.Run(context.Background(), withCommand(turn, dockertest.Image, "true"), func(runtime.Event) {}); res.State != factory.StateSucceeded {
		t.Fatalf("%+v", res)
	}
	b.Close()
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelWorker+"=test-open")})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("the worker's containers after Close: %v, %v", list.Items, err)
	}
}

// TestQuote: any string is one shell word that the shell gives back as it
// was.
func TestQuote(t *testing.T) {
	for _, s := range []string{"", "plain", "it's", "'", "''", `"double"`, "$HOME `id` $(id)", "new\nline", "\\", "* ? [a]", "; rm -rf /", "é ünï"} {
		checkQuote(t, s)
	}
}

func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "it's", "$(id)", "a\nb", "\\'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			t.Skip("an argument holds no NUL")
		}
		checkQuote(t, s)
	})
}

func checkQuote(t *testing.T, s string) {
	t.Helper()
	out, err := exec.Command("/bin/sh", "-c", "printf '%s' "+Quote(s)).Output()
	if err != nil || string(out) != s {
		t.Errorf("Quote(%q): the shell gives %q (%v)", s, out, err)
	}
}
