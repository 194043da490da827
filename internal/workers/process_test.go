package workers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"factory"
	"factory/client"
	"factory/internal/testbin"
)

// The tests here start real processes: the control plane (factory serve
// --nats-listen) and workers (factory worker), from a binary built once.

func binary(t testing.TB) string { return testbin.Factory(t) }

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a started process whose output is kept.
type proc struct {
	cmd *exec.Cmd
	out *os.File
}

func start(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	return startEnv(t, name, nil, args...)
}

// startEnv is start with more of the environment.
func startEnv(t testing.TB, name string, env []string, args ...string) *proc {
	t.Helper()
	out, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(append(os.Environ(), "FACTORY_API_KEY="), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, out: out}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("%s's output:\n%s", name, b)
		}
	})
	return p
}

func (p *proc) log() string {
	b, _ := os.ReadFile(p.out.Name())
	return string(b)
}

// cluster is a control plane and its client.
type cluster struct {
	url, data, adminKey string
	c                   *client.Client
	lease               time.Duration
	proc                *proc
	args                []string // the control plane's, to start it again
}

// controlPlane serves an exec environment whose agent sleeps a moment
// (30 s when the prompt says "slow"), with workers only elsewhere.
func controlPlane(t testing.TB, lease time.Duration, extra ...string) *cluster {
	t.Helper()
	return controlPlaneWith(t, lease, "", extra...)
}

// controlPlaneWith is controlPlane with more of serve's configuration.
func controlPlaneWith(t testing.TB, lease time.Duration, more string, extra ...string) *cluster {
	t.Helper()
	dir := t.TempDir()
	listen := freeAddr(t)
	config := fmt.Sprintf(`listen: %s
runtime:
  defaultEnvironment: sh
  maxConcurrentRuns: 64
environments:
  sh:
    executor: exec
    command: ["sh", "-c", "case \"$(cat PROMPT.md)\" in instant*) ;; slow*) sleep 30;; big*) head -c 6291456 /dev/urandom > \"$FACTORY_OUTPUT_DIR/big.bin\";; bench*) sleep 1;; pause*) echo working; sleep 3;; *) sleep 0.3;; esac; echo \"$(pwd)\" > \"$FACTORY_OUTPUT_DIR/where.txt\"; echo done"]
`, listen) + more
	if err := os.WriteFile(filepath.Join(dir, "serve.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "cp")
	args := []string{"--data", data, "serve", "--config", filepath.Join(dir, "serve.yaml"), "--no-local-worker", "--lease", lease.String()}
	if !slices.Contains(extra, "--nats") {
		args = append(args, "--nats-listen", freeAddr(t))
	}
	args = append(args, extra...)
	p := start(t, "control-plane", args...)
	url := "http://" + listen
	var key []byte
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if key, _ = os.ReadFile(filepath.Join(data, "admin-api-key")); len(key) > 0 {
			if c := client.New(url, strings.TrimSpace(string(key))); c != nil {
				if _, err := c.ListRuns(context.Background(), nil); err == nil {
					return &cluster{url: url, data: data, adminKey: strings.TrimSpace(string(key)), c: c, lease: lease, proc: p, args: args}
				}
			}
		}
	}
	t.Fatal("the control plane did not start")
	return nil
}

// worker registers a worker and starts it.
func (cl *cluster) worker(t testing.TB, name string, maxRuns int, flags ...string) *proc {
	t.Helper()
	return cl.workerIn(t, name, filepath.Join(t.TempDir(), name), maxRuns, flags...)
}

// workerIn is worker with its data directory.
func (cl *cluster) workerIn(t testing.TB, name, data string, maxRuns int, flags ...string) *proc {
	t.Helper()
	var creds json.RawMessage
	if err := cl.c.Do(context.Background(), "POST", "/v1/admin/workers", strings.NewReader(`{"name":"`+name+`"}`), &creds); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), name+".creds")
	if err := os.WriteFile(file, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return start(t, name, append([]string{"--data", data, "worker", "--creds", file, "--max-runs", fmt.Sprint(maxRuns)}, flags...)...)
}

func (cl *cluster) create(t testing.TB, prompt string) string {
	t.Helper()
	r, err := cl.c.CreateRun(context.Background(), client.RunRequest{Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	return r.RunID
}

// wait waits for a run to satisfy ok.
func (cl *cluster) wait(t testing.TB, id string, within time.Duration, ok func(*client.Run) bool) *client.Run {
	t.Helper()
	var r *client.Run
	var err error
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r, err = cl.c.GetRun(context.Background(), id); err == nil && ok(r) {
			return r
		}
	}
	t.Fatalf("run %s: %+v %v", id, r, err)
	return nil
}

// TestWorkers: two worker processes share 50 runs; each run is executed
// once, by one worker (their own logs say what they started), and comes
// back with its output; a worker killed with SIGKILL mid-run leaves its
// run ERROR and retryable within twice the lease, and the runs queued
// after it go to the other worker.
func TestWorkers(t *testing.T) {
	cl := controlPlane(t, time.Second)
	w1, w2 := cl.worker(t, "w1", 4), cl.worker(t, "w2", 4)
	var ids []string
	for i := range 50 {
		ids = append(ids, cl.create(t, fmt.Sprintf("run %d", i)))
	}
	by := map[string]int{}
	for _, id := range ids {
		r := cl.wait(t, id, 30*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
		if r.State != factory.StateSucceeded || r.Executor.Worker() == "" || len(r.Artifacts) == 0 {
			t.Fatalf("run %s: %s, executor %+v, artifacts %+v", id, r.State, r.Executor, r.Artifacts)
		}
		by[r.Executor.UID]++
	}
	if by["w1"] == 0 || by["w2"] == 0 || by["w1"]+by["w2"] != len(ids) {
		t.Fatalf("the runs went %v", by)
	}
	checkOnce(t, ids, w1.log(), w2.log())
	checkVisible(t, cl)

	slow := cl.create(t, "slow")
	r := cl.wait(t, slow, 10*time.Second, func(r *client.Run) bool { return r.Executor.Worker() != "" })
	victim, other := w1, "w2"
	if r.Executor.UID == "w2" {
		victim, other = w2, "w1"
	}
	time.Sleep(300 * time.Millisecond) // it runs
	killed := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r = cl.wait(t, slow, 10*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
	lost := time.Since(killed)
	if r.State != factory.StateError || r.StatusMessage == nil || !r.StatusMessage.Retryable || lost > 2*cl.lease+500*time.Millisecond {
		t.Fatalf("after its worker died: %s %+v, %v after (lease %v)", r.State, r.StatusMessage, lost, cl.lease)
	}
	t.Logf("the run of the killed worker was ERROR %v after the kill (lease %v)", lost.Round(time.Millisecond), cl.lease)
	for i := range 4 {
		id := cl.create(t, fmt.Sprintf("after %d", i))
		r := cl.wait(t, id, 20*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
		if r.State != factory.StateSucceeded || r.Executor.UID != other {
			t.Fatalf("a run after the kill: %s on %+v", r.State, r.Executor)
		}
	}
}

// checkVisible: the workers' list and the metrics show both workers
// connected, with what they did.
func checkVisible(t *testing.T, cl *cluster) {
	t.Helper()
	var out struct {
		Workers []struct {
			Name          string     `json:"name"`
			Connected     bool       `json:"connected"`
			RunsActive    int        `json:"runs_active"`
			LastHeartbeat *time.Time `json:"last_heartbeat"`
		} `json:"workers"`
	}
	if err := cl.c.Do(context.Background(), "GET", "/v1/admin/workers", nil, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Workers) != 2 {
		t.Fatalf("workers: %+v", out.Workers)
	}
	for _, w := range out.Workers {
		if !w.Connected || w.RunsActive != 0 || w.LastHeartbeat == nil || time.Since(*w.LastHeartbeat) > time.Minute {
			t.Fatalf("worker %+v", w)
		}
	}
	metrics, err := cl.c.DoRaw(context.Background(), "GET", "/metrics", nil)
	if err != nil || !strings.Contains(string(metrics), "factory_workers_connected 2") || !strings.Contains(string(metrics), `factory_worker_runs_active{worker="w1"} 0`) {
		t.Fatalf("metrics: %v\n%s", err, metrics)
	}
}

// checkOnce reads the workers' logs: every run was started exactly once,
// by one worker.
func checkOnce(t *testing.T, ids []string, logs ...string) {
	t.Helper()
	started := startedRuns(logs...)
	for _, id := range ids {
		if started[id] != 1 {
			t.Fatalf("run %s was started %d times by the workers", id, started[id])
		}
	}
}

// startedRuns counts, by run, the turns the workers' logs say they started.
func startedRuns(logs ...string) map[string]int {
	started := map[string]int{}
	for _, l := range logs {
		sc := bufio.NewScanner(strings.NewReader(l))
		for sc.Scan() {
			line := sc.Text()
			if !strings.Contains(line, `msg="run started"`) {
				continue
			}
			_, rest, _ := strings.Cut(line, " run=")
			id, _, _ := strings.Cut(rest, " ")
			started[id]++
		}
	}
	return started
}

// TestWorkersControl: Cancel and Interrupt reach the worker that runs the
// run within a second; a follow-up runs on the same worker, in the same
// workspace.
func TestWorkersControl(t *testing.T) {
	cl := controlPlane(t, 2*time.Second)
	cl.worker(t, "w1", 2)
	w2 := cl.worker(t, "w2", 2)
	ctx := context.Background()
	for _, action := range []string{"cancel", "interrupt"} {
		id := cl.create(t, "slow "+action)
		cl.wait(t, id, 10*time.Second, func(r *client.Run) bool { return r.Executor.Worker() != "" })
		time.Sleep(300 * time.Millisecond)
		asked := time.Now()
		var err error
		if action == "cancel" {
			_, err = cl.c.CancelRun(ctx, id)
		} else {
			err = cl.c.Do(ctx, "POST", "/v1/agent/runs/"+id+"/interrupt", nil, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]factory.RunState{"cancel": factory.StateCancelled, "interrupt": factory.StateBlocked}[action]
		r := cl.wait(t, id, 5*time.Second, func(r *client.Run) bool { return r.State == want })
		if took := time.Since(asked); took > time.Second {
			t.Fatalf("%s took %v", action, took)
		}
		t.Logf("%s: %s in %v", action, r.State, time.Since(asked).Round(time.Millisecond))
	}
	id := cl.create(t, "quick")
	first := cl.wait(t, id, 10*time.Second, func(r *client.Run) bool { return r.State == factory.StateSucceeded })
	if err := cl.c.FollowUp(ctx, id, "again"); err != nil {
		t.Fatal(err)
	}
	second := cl.wait(t, id, 10*time.Second, func(r *client.Run) bool {
		return r.State == factory.StateSucceeded && r.FinishedAt != nil && r.FinishedAt.After(*first.FinishedAt)
	})
	if second.Executor.UID != first.Executor.UID {
		t.Fatalf("the follow-up ran on %s, the run on %s", second.Executor.UID, first.Executor.UID)
	}
	checkRouting(t, cl)
	checkDrain(t, cl, w2)
}

// checkRouting: runs that name a worker (config.worker_host) run there.
func checkRouting(t *testing.T, cl *cluster) {
	t.Helper()
	for i := range 4 {
		created, err := cl.c.CreateRun(context.Background(), client.RunRequest{Prompt: fmt.Sprint("routed ", i), Config: map[string]any{"worker_host": "w2"}})
		if err != nil {
			t.Fatal(err)
		}
		r := cl.wait(t, created.RunID, 10*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
		if r.State != factory.StateSucceeded || r.Executor.UID != "w2" {
			t.Fatalf("a run for w2: %s on %+v", r.State, r.Executor)
		}
	}
}

// checkDrain: SIGTERM drains a worker: the run it holds ends SUCCEEDED,
// then it exits cleanly.
func checkDrain(t *testing.T, cl *cluster, w *proc) {
	t.Helper()
	created, err := cl.c.CreateRun(context.Background(), client.RunRequest{Prompt: "drained", Config: map[string]any{"worker_host": "w2"}})
	if err != nil {
		t.Fatal(err)
	}
	cl.wait(t, created.RunID, 10*time.Second, func(r *client.Run) bool { return r.Executor.Worker() != "" })
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := cl.wait(t, created.RunID, 10*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
	state, err := w.cmd.Process.Wait()
	if r.State != factory.StateSucceeded || err != nil || !state.Success() {
		t.Fatalf("drained: the run %s, the worker %v %v", r.State, state, err)
	}
}

// TestWorkersChaos: three workers, one killed with SIGKILL and started
// again every second while 90 runs go through: every run ends (SUCCEEDED,
// or ERROR and retryable when its worker died under it), none is lost,
// and none was started twice.
func TestWorkersChaos(t *testing.T) {
	cl := controlPlane(t, time.Second)
	names := []string{"w1", "w2", "w3"}
	procs := map[string]*proc{}
	var logs []*proc
	creds := map[string]string{}
	for _, n := range names {
		procs[n] = cl.worker(t, n, 4)
		creds[n] = procs[n].cmd.Args[len(procs[n].cmd.Args)-3]
		logs = append(logs, procs[n])
	}
	var ids []string
	for i := range 90 {
		ids = append(ids, cl.create(t, fmt.Sprintf("run %d", i)))
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			n := names[i%len(names)]
			_ = procs[n].cmd.Process.Signal(syscall.SIGKILL)
			_, _ = procs[n].cmd.Process.Wait()
			procs[n] = start(t, fmt.Sprintf("%s-%d", n, i), "--data", filepath.Join(t.TempDir(), n), "worker", "--creds", creds[n], "--max-runs", "4")
			logs = append(logs, procs[n])
		}
	}()
	states := map[factory.RunState]int{}
	for _, id := range ids {
		r := cl.wait(t, id, time.Minute, func(r *client.Run) bool { return r.State.Terminal() })
		if r.State == factory.StateError && (r.StatusMessage == nil || !r.StatusMessage.Retryable) {
			t.Fatalf("run %s: ERROR, not retryable: %+v", id, r.StatusMessage)
		}
		if r.State != factory.StateError && r.State != factory.StateSucceeded {
			t.Fatalf("run %s: %s", id, r.State)
		}
		states[r.State]++
	}
	close(stop)
	<-done
	var all []string
	for _, p := range logs {
		all = append(all, p.log())
	}
	started := startedRuns(all...)
	for _, id := range ids {
		if started[id] > 1 {
			t.Fatalf("run %s was started %d times", id, started[id])
		}
	}
	t.Logf("90 runs under chaos: %v", states)
}

// TestControlPlaneRestart: the control plane killed with SIGKILL while
// workers run its runs, and started again: the runs go on on their
// workers, and end SUCCEEDED with every event of their timelines, those
// of the time it was down included.
func TestControlPlaneRestart(t *testing.T) {
	cl := controlPlane(t, 2*time.Second)
	cl.worker(t, "w1", 4)
	var ids []string
	for i := range 3 {
		ids = append(ids, cl.create(t, fmt.Sprint("pause ", i)))
	}
	for _, id := range ids {
		cl.wait(t, id, 10*time.Second, func(r *client.Run) bool { return r.Executor.Worker() != "" })
	}
	if err := cl.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = cl.proc.cmd.Process.Wait()
	time.Sleep(4 * time.Second) // the runs end meanwhile: their last events and ends wait in the worker
	cl.proc = start(t, "control-plane-again", cl.args...)
	for _, id := range ids {
		r := cl.wait(t, id, 30*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
		if r.State != factory.StateSucceeded {
			t.Fatalf("run %s after the restart: %s %+v", id, r.State, r.StatusMessage)
		}
		var tl struct {
			Events []struct {
				Type    string         `json:"event_type"`
				Payload map[string]any `json:"payload"`
			} `json:"events"`
		}
		if err := cl.c.Do(context.Background(), "GET", "/v1/agent/runs/"+id+"/timeline", nil, &tl); err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, e := range tl.Events {
			kinds = append(kinds, fmt.Sprint(e.Type, ":", e.Payload["message"]))
		}
		got := strings.Join(kinds, " ")
		for _, want := range []string{"agent_started", "status_message:working", "status_message:done", "oz_run_done"} {
			if !strings.Contains(got, want) {
				t.Fatalf("run %s's timeline lacks %s: %s", id, want, got)
			}
		}
	}
}

// TestLocalWorker: without --no-local-worker the control plane runs its
// runs itself, in its own process (its own host, not through the queue).
func TestLocalWorker(t *testing.T) {
	cl := controlPlane(t, 2*time.Second, "--no-local-worker=false")
	id := cl.create(t, "quick")
	r := cl.wait(t, id, 20*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
	if r.State != factory.StateSucceeded || r.Executor == nil || r.Executor.UID != factory.Executor.UID || len(r.Artifacts) == 0 {
		t.Fatalf("%s on %+v, artifacts %+v", r.State, r.Executor, r.Artifacts)
	}
}

// TestStatusShowsWorkers: factory status, through the server, lists the
// workers, in words and in JSON.
func TestStatusShowsWorkers(t *testing.T) {
	cl := controlPlane(t, 2*time.Second)
	cl.worker(t, "w1", 1)
	cl.wait(t, cl.create(t, "quick"), 20*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
	for _, output := range []string{"text", "json"} {
		cmd := exec.Command(binary(t), "--server", cl.url, "status", "--output", output)
		cmd.Env = append(os.Environ(), "FACTORY_API_KEY="+cl.adminKey)
		out, err := cmd.CombinedOutput()
		want := map[string]string{"text": "w1: connected, 0 runs, heard", "json": `"name": "w1"`}[output]
		nats := map[string]string{"text": "Workers (NATS nats://127.0.0.1:", "json": `"nats_url": "nats://127.0.0.1:`}[output]
		if err != nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), nats) {
			t.Fatalf("status --output %s: %v\n%s", output, err, out)
		}
	}
	info, err := os.ReadFile(filepath.Join(cl.data, "server.json"))
	if err != nil || !strings.Contains(string(info), `"nats_url":"nats://127.0.0.1:`) {
		t.Fatalf("server.json: %s %v", info, err)
	}
}

// TestRunsWaitingForAWorker: with no worker, a run handed to the queue
// stays QUEUED (no executor, not interruptible: 409); cancelling it takes it
// back out of the queue; the others survive the control plane's restart,
// QUEUED, and run once a worker comes.
func TestRunsWaitingForAWorker(t *testing.T) {
	cl := controlPlane(t, 2*time.Second)
	ids := []string{cl.create(t, "quick"), cl.create(t, "quick"), cl.create(t, "quick")}
	time.Sleep(500 * time.Millisecond)
	for _, id := range ids {
		if r, err := cl.c.GetRun(context.Background(), id); err != nil || r.State != factory.StateQueued || r.Executor.Worker() != "" {
			t.Fatalf("run %s without workers: %+v %v", id, r, err)
		}
	}
	err := cl.c.Do(context.Background(), "POST", "/v1/agent/runs/"+ids[0]+"/interrupt", strings.NewReader(`{}`), nil)
	if err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("interrupting a run no worker has: %v", err)
	}
	if err := cl.c.Do(context.Background(), "POST", "/v1/agent/runs/"+ids[0]+"/cancel", strings.NewReader(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	cl.wait(t, ids[0], 10*time.Second, func(r *client.Run) bool { return r.State == factory.StateCancelled })

	if err := cl.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = cl.proc.cmd.Process.Wait()
	cl.proc = start(t, "control-plane-again", cl.args...)
	cl.wait(t, ids[1], 20*time.Second, func(r *client.Run) bool { return r.State == factory.StateQueued })
	w := cl.worker(t, "late", 4)
	for _, id := range ids[1:] {
		if r := cl.wait(t, id, 20*time.Second, func(r *client.Run) bool { return r.State.Terminal() }); r.State != factory.StateSucceeded {
			t.Fatalf("run %s: %s %+v", id, r.State, r.StatusMessage)
		}
	}
	if n := strings.Count(w.log(), "run started"); n != 2 {
		t.Fatalf("the worker started %d runs, not 2 (the cancelled one must not run):\n%s", n, w.log())
	}
}

// TestLargeOutputs: an output file larger than a NATS message comes back
// through the worker's object store, whole, as the run's artifact; the
// worker's own workspace keeps its copy, byte for byte the artifact's.
func TestLargeOutputs(t *testing.T) {
	cl := controlPlane(t, 2*time.Second)
	data := filepath.Join(t.TempDir(), "w1")
	cl.workerIn(t, "w1", data, 1)
	id := cl.create(t, "big")
	r := cl.wait(t, id, 30*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
	if r.State != factory.StateSucceeded {
		t.Fatalf("%s %+v", r.State, r.StatusMessage)
	}
	var big *factory.Artifact
	for i, a := range r.Artifacts {
		if a.Data.Filename == "big.bin" {
			big = &r.Artifacts[i]
		}
	}
	if big == nil || big.Data.SizeBytes != 6<<20 {
		t.Fatalf("artifacts: %+v", r.Artifacts)
	}
	got, err := cl.c.DoRaw(context.Background(), "GET", "/v1/agent/artifacts/"+big.Data.UID+"/download", nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(data, "runs", id, "output", "big.bin"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the artifact's %d bytes are not the worker's %d (%v)", len(got), len(want), err)
	}
}

// TestWorkerReapsItsOrphans: a worker killed with SIGKILL leaves its
// agent running (an orphan); its run ends ERROR once the lease passes,
// and when the worker is back it kills that agent before taking
// anything.
func TestWorkerReapsItsOrphans(t *testing.T) {
	cl := controlPlane(t, time.Second)
	data := filepath.Join(t.TempDir(), "w1")
	w := cl.workerIn(t, "w1", data, 1)
	id := cl.create(t, "slow")
	cl.wait(t, id, 10*time.Second, func(r *client.Run) bool { return r.State == factory.StateInProgress })
	var ref factory.ProcessRef
	b, err := os.ReadFile(filepath.Join(data, "runs", id, "agent-process.json"))
	if err != nil || json.Unmarshal(b, &ref) != nil || ref.PID <= 1 {
		t.Fatalf("the agent's process group is not noted: %s %v", b, err)
	}
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = w.cmd.Process.Wait()
	t.Cleanup(func() { _ = syscall.Kill(-ref.PID, syscall.SIGKILL) })
	if err := syscall.Kill(-ref.PID, 0); err != nil {
		t.Fatalf("the agent died with its worker (%v): nothing to reap", err)
	}
	r := cl.wait(t, id, 10*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
	if r.State != factory.StateError || r.StatusMessage == nil || r.StatusMessage.ErrorCode != "resource_unavailable" || r.StatusMessage.Detail != "worker_lost" {
		t.Fatalf("%s %+v", r.State, r.StatusMessage)
	}
	back := start(t, "w1-again", "--data", data, "worker", "--creds", w.cmd.Args[len(w.cmd.Args)-3], "--max-runs", "1")
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(-ref.PID, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent of the killed worker still runs:\n%s", back.log())
		}
	}
	// The worker logs the reaping after the kill: its line may come a
	// moment after the agent is seen gone.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(back.log(), "killed the processes left by a run"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker's log:\n%s", back.log())
		}
	}
}
