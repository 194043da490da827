package runtime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"factory"

	"factory/internal/runtime"
	"factory/internal/testproc"
)

func alive(pid int) bool { return testproc.Alive(pid) }

func noneLeft(t *testing.T, dir string) { testproc.NoneLeft(t, dir) }

// execRunID names the exec tests' runs: a run's ID of its own, as the
// end of a turn kills every process that carries it.
var execRunID = factory.NewUID("run_")

type run struct {
	mu     sync.Mutex
	events []string
}

func (r *run) add(e runtime.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e.Message)
}

func (r *run) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func turn(t *testing.T, script string, mod func(*runtime.Turn)) (runtime.Result, *run, string) {
	t.Helper()
	dir := t.TempDir()
	tn := runtime.Turn{RunID: execRunID, Prompt: "Fix the build.\n", Dir: dir}
	if err := os.MkdirAll(tn.Workspace(), 0o700); err != nil {
		t.Fatal(err)
	}
	dir = tn.Workspace()
	if mod != nil {
		mod(&tn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if strings.Contains(script, "#cancel-after-ready") {
		go func() {
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
					cancel()
					return
				}
			}
		}()
	}
	e := &runtime.ExecExecutor{Command: []string{"sh", "-c", script}, Grace: 300 * time.Millisecond}
	r := &run{}
	res := e.Run(ctx, tn, r.add)
	return res, r, dir
}

func TestExecSuccess(t *testing.T) {
	res, r, dir := turn(t, `echo $$ > pid; read line; echo "got: $line"; echo "id=$FACTORY_RUN_ID"; echo "followup=$FACTORY_FOLLOWUP"; printf 'no newline at the end'`,
		func(tn *runtime.Turn) { tn.FollowUp = "also run the tests" })
	if res.State != factory.StateSucceeded {
		t.Fatalf("%+v", res)
	}
	want := []string{"got: Fix the build.", "id=" + execRunID, "followup=also run the tests", "no newline at the end"}
	if fmt.Sprint(r.list()) != fmt.Sprint(want) {
		t.Fatalf("events %q", r.list())
	}
	noneLeft(t, dir)
}

func TestExecFailureKeepsStderr(t *testing.T) {
	res, _, _ := turn(t, `echo working; echo "fatal: no such branch" >&2; exit 3`, nil)
	if res.State != factory.StateFailed || res.Message != "the agent exited with status 3: fatal: no such branch" || !strings.Contains(res.Stderr, "fatal") {
		t.Fatalf("%+v", res)
	}
}

func TestExecCancelStopsTheGroup(t *testing.T) {
	start := time.Now()
	res, _, dir := turn(t, `echo $$ > pid; sleep 30 & echo $! > child; touch ready; wait #cancel-after-ready`, nil)
	if res.State != factory.StateCancelled || time.Since(start) > 5*time.Second {
		t.Fatalf("%+v after %v", res, time.Since(start))
	}
	noneLeft(t, dir)
}

func TestExecCancelKillsWhatIgnoresSIGTERM(t *testing.T) {
	start := time.Now()
	res, _, dir := turn(t, `trap '' TERM; echo $$ > pid; touch ready; while :; do sleep 0.05; done #cancel-after-ready`, nil)
	if res.State != factory.StateCancelled {
		t.Fatalf("%+v", res)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Fatalf("SIGKILL came after %v, want the grace period (300ms) and not much more", d)
	}
	noneLeft(t, dir)
}

func TestExecBackgroundChildIsNotLeftBehind(t *testing.T) {
	res, r, dir := turn(t, `echo $$ > pid; (sleep 30; echo late) & echo $! > child; echo done`, nil)
	if res.State != factory.StateSucceeded || fmt.Sprint(r.list()) != "[done]" {
		t.Fatalf("%+v %q", res, r.list())
	}
	noneLeft(t, dir)
}

func TestExecTimeouts(t *testing.T) {
	res, _, dir := turn(t, `echo $$ > pid; echo started; sleep 30`, func(tn *runtime.Turn) { tn.IdleTimeout = 300 * time.Millisecond })
	if res.State != factory.StateFailed || !strings.Contains(res.Message, "idle timeout") {
		t.Fatalf("idle: %+v", res)
	}
	noneLeft(t, dir)
	// Output keeps an idle timer from firing, but not the total timeout.
	res, r, dir := turn(t, `echo $$ > pid; while :; do echo tick; sleep 0.05; done`, func(tn *runtime.Turn) {
		tn.IdleTimeout = 200 * time.Millisecond
		tn.Timeout = 600 * time.Millisecond
	})
	if res.State != factory.StateFailed || !strings.Contains(res.Message, "timeout (600ms)") || len(r.list()) < 5 {
		t.Fatalf("total: %+v, %d events", res, len(r.list()))
	}
	noneLeft(t, dir)
}

func TestExecFloodIsBounded(t *testing.T) {
	// 20,000 lines, and one line of 1 MiB: every short line arrives (the
	// turn's and the run's bounds are its host's), the long one is cut at
	// factory.MaxMessageBytes, and stderr is kept to its end.
	res, r, _ := turn(t, `i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done; head -c 1048576 /dev/zero | tr '\0' x; echo; head -c 200000 /dev/zero | tr '\0' e >&2`, nil)
	if res.State != factory.StateSucceeded {
		t.Fatalf("%+v", res.Message)
	}
	ev := r.list()
	if len(ev) != 20001 || ev[19999] != "line 19999" || len(ev[20000]) != factory.MaxMessageBytes || !strings.HasSuffix(ev[20000], "…") {
		t.Fatalf("%d events, last of %d bytes", len(ev), len(ev[len(ev)-1]))
	}
	if len(res.Stderr) != 64<<10 {
		t.Fatalf("stderr kept: %d bytes", len(res.Stderr))
	}
}

func TestExecCannotStart(t *testing.T) {
	e := &runtime.ExecExecutor{Command: []string{"/nonexistent/agent"}}
	res := e.Run(context.Background(), runtime.Turn{Dir: t.TempDir()}, func(runtime.Event) {})
	if res.State != factory.StateError || !strings.Contains(res.Message, "could not start") {
		t.Fatalf("%+v", res)
	}
}

// TestAgentEnvironment: an agent gets PATH and the like, what its
// environment grants, and its run's variables; never the rest of the
// server's environment (the secrets key, operators' tokens). The attack:
// a webhook-started run wrote FACTORY_SECRETS_KEY to a file.
func TestAgentEnvironment(t *testing.T) {
	t.Setenv("FACTORY_SECRETS_KEY", "the-master-key")
	t.Setenv("SOME_OPERATOR_TOKEN", "ghp_secret")
	t.Setenv("LANG", "C.UTF-8")
	res, r, _ := turn(t, `env | sort`, func(tn *runtime.Turn) { tn.Env = []string{"GEMINI_API_KEY=granted"} })
	if res.State != factory.StateSucceeded {
		t.Fatalf("%+v", res)
	}
	got := strings.Join(r.list(), "\n")
	for _, leak := range []string{"the-master-key", "FACTORY_SECRETS_KEY", "ghp_secret"} {
		if strings.Contains(got, leak) {
			t.Errorf("the agent's environment has %q:\n%s", leak, got)
		}
	}
	for _, want := range []string{"GEMINI_API_KEY=granted", "FACTORY_RUN_ID=" + execRunID, "LANG=C.UTF-8", "PATH="} {
		if !strings.Contains(got, want) {
			t.Errorf("the agent's environment lacks %q:\n%s", want, got)
		}
	}
}
