package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"factory"
	"factory/internal/artifacts"
	"factory/internal/docker"
	"factory/internal/harness"
	"factory/internal/runtime"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Worker claims turns and runs them: a process group in a per-run folder
// under Dir (the direct backend), or a container (docker).
type Worker struct {
	ID      string
	NC      *nats.Conn
	JS      jetstream.JetStream
	MaxRuns int
	Dir     string
	Log     *slog.Logger
	// Docker, when set, runs each run in a container (the docker
	// backend); DockerImage is the image of runs whose runner names
	// none.
	Docker      *docker.Backend
	DockerImage string
	// Confine, when set, confines the direct backend's agents to their
	// runs' folders (runtime.Confinement).
	Confine *runtime.Confinement

	outputs jetstream.ObjectStore // this worker's, nil without one
	mu      sync.Mutex
	active  map[string]context.CancelCauseFunc // by attempt
	wg      sync.WaitGroup
}

// maxOutputs bounds the files a turn sends back.
const maxOutputs = 4 << 20

// Connect opens a worker's or the control plane's connection: its own
// inbox prefix, reconnecting for ever (a control plane that restarts
// comes back on the same address).
func Connect(url string, c Credentials, name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	switch {
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	case c.NkeySeed != "":
		kp, err := nkeys.FromSeed([]byte(c.NkeySeed))
		if err != nil {
			return nil, fmt.Errorf("the worker's nkey: %w", err)
		}
		pub, _ := kp.PublicKey()
		opts = append(opts, nats.Nkey(pub, kp.Sign))
	case c.NkeyFile != "":
		o, err := nats.NkeyOptionFromSeed(c.NkeyFile)
		if err != nil {
			return nil, fmt.Errorf("the nkey seed %s: %w", c.NkeyFile, err)
		}
		opts = append(opts, o)
	case c.Password != "":
		user := c.PasswordUser
		if user == "" {
			user = c.User
		}
		opts = append(opts, nats.UserInfo(user, c.Password))
	}
	if c.User != ControlUser {
		opts = append(opts, nats.CustomInboxPrefix(InboxPrefix(c.User)))
	}
	return nats.Connect(url, opts...)
}

// Run claims and runs assignments until ctx ends, then drains: it takes
// nothing new and waits for the turns it holds to end.
func (w *Worker) Run(ctx context.Context) error {
	w.active = map[string]context.CancelCauseFunc{}
	if w.MaxRuns <= 0 {
		w.MaxRuns = 4
	}
	w.reapLeftovers()
	host, err := w.JS.Consumer(ctx, RunsStream, HostConsumer(w.ID))
	if err != nil {
		return fmt.Errorf("this worker's queue: %w (is it created with factory workers create %s?)", err, w.ID)
	}
	shared, err := w.JS.Consumer(ctx, RunsStream, AnyConsumer)
	if err != nil {
		return fmt.Errorf("the shared queue: %w", err)
	}
	if w.outputs, err = w.JS.ObjectStore(ctx, OutputsBucket(w.ID)); err != nil {
		// A worker registered before object stores: its outputs go in
		// its events, as then.
		w.Log.Warn("no object store for this worker's outputs: they go in its events, at most 4 MiB a turn", "err", err)
		w.outputs = nil
	}
	sub, err := w.NC.Subscribe(ControlSubject(w.ID), w.control)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	w.claimLoop(ctx, host, shared, make(chan struct{}, w.MaxRuns))
	w.Log.Info("draining: waiting for the runs this worker holds")
	w.wg.Wait()
	return nil
}

// claimLoop takes one assignment whenever a slot is free: this worker's
// own first (without waiting), else the shared queue's next (waiting up
// to sharedWait for one, then looking at its own queue again: a run routed
// to this worker waits at most that long).
func (w *Worker) claimLoop(ctx context.Context, host, shared jetstream.Consumer, slots chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case slots <- struct{}{}:
		}
		got, err := next(host, shared)
		if got == nil || ctx.Err() != nil {
			if got != nil {
				_ = got.Nak() // drained: another worker takes it
			}
			<-slots
			if err != nil && ctx.Err() == nil {
				time.Sleep(250 * time.Millisecond) // the server is away: do not spin
			}
			continue
		}
		var a Assignment
		if json.Unmarshal(got.Data(), &a) != nil || a.RunID == "" || a.Attempt == "" {
			_ = got.Term()
			<-slots
			continue
		}
		if !w.claim(ctx, got, &a) {
			<-slots
			continue
		}
		w.wg.Add(1)
		go func() {
			defer func() { <-slots; w.wg.Done() }()
			w.runTurn(&a)
		}()
	}
}

// claim asks the control plane for a turn taken from the queue, and takes
// it off the queue once the control plane has recorded the claim: a worker
// that dies between the two leaves a claimed run the lease ends, never one
// waiting for a worker that will not come. A refused claim (the run was
// cancelled, or its turn is another worker's or was offered again) drops
// the turn; no answer (the control plane restarts) leaves it in the queue
// for a moment later.
func (w *Worker) claim(ctx context.Context, m jetstream.Msg, a *Assignment) bool {
	w.mu.Lock()
	_, running := w.active[a.Attempt]
	w.mu.Unlock()
	if running {
		_ = m.Term() // offered twice: this worker runs it already
		return false
	}
	// A claim asked is seen through, even when the worker is told to
	// drain meanwhile: the control plane may have recorded it, and a
	// drain runs what the worker holds.
	ctx = context.WithoutCancel(ctx)
	ans, err := w.askClaim(ctx, a)
	if err != nil || ans.Retry {
		// Offered again in a moment; should the control plane have
		// recorded the claim without its answer reaching here, the claim
		// again is this worker's still (within the lease).
		w.Log.Warn("claiming a run: the control plane cannot answer now; the run stays in the queue", "run", a.RunID, "err", err)
		_ = m.NakWithDelay(claimRetry)
		return false
	}
	if !ans.OK {
		w.Log.Info("a run's turn is not this worker's to run", "run", a.RunID, "attempt", a.Attempt, "reason", ans.Reason)
		_ = m.Term()
		return false
	}
	// Off the queue: no one else is handed it. Should the acknowledgement
	// fail, a copy offered again is refused at its claim.
	if err := m.DoubleAck(ctx); err != nil {
		w.Log.Warn("acknowledging a claimed run", "run", a.RunID, "err", err)
	}
	return true
}

// claimRetry is how long a turn whose claim got no answer waits in the
// queue before it is offered again.
const claimRetry = 250 * time.Millisecond

// claimWait bounds the control plane's answer to a claim: a fraction of
// the lease, so that a claim recorded whose answer was lost is claimed
// again before the lease ends it.
func claimWait(lease time.Duration) time.Duration {
	return min(max(lease/2, 500*time.Millisecond), 5*time.Second)
}

// askClaim sends a claim and reads the control plane's answer; a
// connection that is down answers at once.
func (w *Worker) askClaim(ctx context.Context, a *Assignment) (ClaimAnswer, error) {
	if !w.NC.IsConnected() {
		return ClaimAnswer{}, nats.ErrConnectionClosed
	}
	req, _ := json.Marshal(ClaimRequest{RunID: a.RunID, Attempt: a.Attempt})
	ctx, cancel := context.WithTimeout(ctx, claimWait(a.Lease))
	defer cancel()
	var ans ClaimAnswer
	reply, err := w.NC.RequestWithContext(ctx, ClaimSubject(w.ID), req)
	if err == nil {
		err = json.Unmarshal(reply.Data, &ans)
	}
	return ans, err
}

// sharedWait is how long one look at the shared queue waits for a run: a
// run there is claimed as soon as it comes; an idle worker asks five
// times a second.
const sharedWait = 200 * time.Millisecond

// next is the next assignment of the worker's queue, else of the shared
// one, or nil.
func next(host, shared jetstream.Consumer) (jetstream.Msg, error) {
	if batch, err := host.FetchNoWait(1); err == nil {
		for m := range batch.Messages() {
			return m, nil
		}
	}
	batch, err := shared.Fetch(1, jetstream.FetchMaxWait(sharedWait))
	if err != nil {
		return nil, err
	}
	for m := range batch.Messages() {
		return m, nil
	}
	return nil, batch.Error()
}

// control stops a turn this worker runs, or answers the control plane's
// presence check (ping).
func (w *Worker) control(m *nats.Msg) {
	var c Control
	if json.Unmarshal(m.Data, &c) != nil {
		return
	}
	if c.Action == "ping" {
		_ = m.Respond([]byte(`{}`))
		return
	}
	w.mu.Lock()
	cancel := w.active[c.Attempt]
	w.mu.Unlock()
	if cancel == nil {
		return
	}
	if c.Action == "interrupt" {
		cancel(runtime.ErrInterrupted)
	} else {
		cancel(errors.New("cancelled"))
	}
}

// runTurn runs a claimed turn and reports it, renewing its lease every
// third of it while it runs.
func (w *Worker) runTurn(a *Assignment) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	w.mu.Lock()
	w.active[a.Attempt] = cancel
	w.mu.Unlock()
	defer func() { w.mu.Lock(); delete(w.active, a.Attempt); w.mu.Unlock() }()
	w.Log.Info("run started", "run", a.RunID, "attempt", a.Attempt)
	stop := make(chan struct{})
	go w.heartbeat(a, stop)
	res, outDir := w.execute(ctx, a)
	done := Event{RunID: a.RunID, Attempt: a.Attempt, Kind: "done", Result: &res}
	if outDir != "" {
		w.attachOutputs(&done, outDir)
	}
	close(stop)
	w.Log.Info("run ended", "run", a.RunID, "attempt", a.Attempt, "state", res.State)
	w.publish(done)
}

func (w *Worker) heartbeat(a *Assignment, stop chan struct{}) {
	every := max(a.Lease/3, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			w.publish(Event{RunID: a.RunID, Attempt: a.Attempt, Kind: "heartbeat"})
		}
	}
}

// execute runs the turn in its folder on this machine with the worker's
// backend: a container (docker) or a process group (direct); both lay the
// folder out as every host does (runtime.LayOut).
func (w *Worker) execute(ctx context.Context, a *Assignment) (res runtime.Result, outDir string) {
	t := a.Turn
	t.Dir = filepath.Join(w.Dir, "runs", a.RunID)
	t.Command = ownCommand(t.Command, w.Docker != nil)
	t.RunAs = nil
	t.Approve = w.approver(a)
	// A harness's turn runs this worker's own install of it.
	t.Env = append(t.Env, harness.DirEnv+"="+filepath.Join(w.Dir, "harnesses"))
	// The turn's status messages within its bounds (the agent's flood
	// stops here, not in the events stream); the rest are counted in its
	// result.
	events, dropped := runtime.LimitOutput(func(e runtime.Event) {
		w.publish(Event{RunID: a.RunID, Attempt: a.Attempt, Kind: "message", Time: e.Time, Message: e.Message})
	}, runtime.DefaultOutputLimits)
	defer func() {
		if d := dropped(); d.Messages > 0 {
			res.Dropped = &d
		}
	}()
	// The run is INPROGRESS from its agent's start (its setup is not).
	// The agent's process group is noted beside the workspace until the
	// turn ends: a worker that died under it kills it when it is back.
	defer os.Remove(filepath.Join(t.Dir, agentProcessFile))
	t.Started = func(pid int) {
		if pid > 0 {
			b, _ := json.Marshal(runtime.ProcessOf(pid))
			_ = runtime.WriteRunFile(t.Dir, agentProcessFile, b)
		}
		w.publish(Event{RunID: a.RunID, Attempt: a.Attempt, Kind: "started"})
	}
	if w.Docker == nil {
		if t.Confine = w.Confine; t.Confine != nil {
			// Its harness's programs, installed in the worker's folder.
			t.Confine = &runtime.Confinement{Hidden: w.Confine.Hidden,
				ReadOnly: append(slices.Clone(w.Confine.ReadOnly), filepath.Join(w.Dir, "harnesses"))}
		}
		return runtime.Here(ctx, t, runtime.ExecutorFor(&t), events), t.OutputDir()
	}
	defer t.Release()
	if err := runtime.LayOut(&t); err != nil {
		return runtime.Result{State: factory.StateError, Message: "the worker's workspace: " + err.Error()}, ""
	}
	// The container may have no network: the worker clones first.
	if res, ok := runtime.CheckOut(ctx, t, events); !ok {
		return res, t.OutputDir()
	}
	t.Image = cmp.Or(t.Image, w.DockerImage)
	return w.Docker.Run(ctx, t, events), t.OutputDir()
}

// ownCommand is an assignment's command with SelfCommand as this binary,
// or, in a container, the factory on the image's PATH.
func ownCommand(command []string, inContainer bool) []string {
	if len(command) == 0 || command[0] != SelfCommand {
		return command
	}
	if inContainer {
		return append([]string{"factory"}, command[1:]...)
	}
	self, err := os.Executable()
	if err != nil {
		return command
	}
	return append([]string{self}, command[1:]...)
}

// agentProcessFile holds a running turn's agent process group, beside
// its workspace.
const agentProcessFile = "agent-process.json"

// reapLeftovers kills the agents of turns this worker ran before it died
// (their runs ended ERROR, worker_lost, meanwhile): nothing of them goes
// on working on a workspace.
func (w *Worker) reapLeftovers() {
	files, _ := filepath.Glob(filepath.Join(w.Dir, "runs", "*", agentProcessFile))
	for _, f := range files {
		var ref factory.ProcessRef
		if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &ref) == nil && runtime.Reap(ref) {
			w.Log.Warn("killed the processes left by a run this worker ran before it stopped", "run", filepath.Base(filepath.Dir(f)), "pgid", ref.PID)
		}
		_ = os.Remove(f)
	}
}

// attachOutputs adds the files the agent left in its output folder to a
// turn's end: put in this worker's object store (each up to
// artifacts.MaxFileBytes, artifacts.MaxRunBytes in all), or, without one,
// in the event itself (up to maxOutputs in all). The folder is the agent's:
// it is read through a root of it (the output folder itself, not a link
// the agent put in its place), regular files only, each opened without
// blocking and measured as opened. A file left out is said in the result's
// message.
func (w *Worker) attachOutputs(e *Event, dir string) {
	root, err := runtime.OpenRunFolder(filepath.Dir(dir), filepath.Base(dir))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			e.Result.Message += fmt.Sprintf(" (output files not sent back: %v)", err)
		}
		return
	}
	defer root.Close()
	var skipped []string
	total := 0
	limit := maxOutputs
	if w.outputs != nil {
		limit = artifacts.MaxRunBytes
	}
	_ = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		f, size, err := openRegular(root, rel)
		if err != nil {
			skipped = append(skipped, rel)
			return nil
		}
		defer f.Close()
		if size > artifacts.MaxFileBytes || total+int(size) > limit {
			skipped = append(skipped, rel)
			return nil
		}
		if err := w.attachOutput(e, f, rel); err != nil {
			w.Log.Warn("sending an output file", "run", e.RunID, "file", rel, "err", err)
			skipped = append(skipped, rel)
			return nil
		}
		total += int(size)
		return nil
	})
	if len(skipped) > 0 {
		e.Result.Message += fmt.Sprintf(" (output files not sent back: %s)", strings.Join(skipped, ", "))
	}
}

// openRegular opens a regular file of a root without blocking (a named
// pipe swapped in since the walk is refused), and says its size as opened.
func openRegular(root *os.Root, name string) (*os.File, int64, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s: not a regular file", name)
	}
	return f, fi.Size(), nil
}

func (w *Worker) attachOutput(e *Event, f *os.File, rel string) error {
	// Never more than the limit, whatever the file grew to since.
	r := io.LimitReader(f, artifacts.MaxFileBytes)
	if w.outputs == nil {
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if e.Outputs == nil {
			e.Outputs = map[string][]byte{}
		}
		e.Outputs[rel] = b
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := e.Attempt + "/" + rel
	if _, err := w.outputs.Put(ctx, jetstream.ObjectMeta{Name: name}, r); err != nil {
		return err
	}
	e.OutputObjects = append(e.OutputObjects, name)
	return nil
}

// publish sends an event durably (JetStream acknowledges it), retrying
// while the control plane's server is away (it restarts): nothing but
// heartbeats is given up.
func (w *Worker) publish(e Event) {
	e.Worker = w.ID
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b, _ := json.Marshal(e)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := w.JS.Publish(ctx, EventsSubject(w.ID), b)
		cancel()
		if err == nil || e.Kind == "heartbeat" {
			return // a heartbeat is only worth sending now
		}
		w.Log.Warn("reporting to the control plane", "run", e.RunID, "kind", e.Kind, "err", err)
		time.Sleep(time.Second)
	}
}
