package workers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"factory"
	"factory/internal/artifacts"
	"factory/internal/runtime"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Assignment is one turn of a run, as a worker gets it: what to run, the
// prompt and attachments to lay out, and the agent's environment (only
// it: the control plane's own environment never travels).
type Assignment struct {
	RunID       string            `json:"run_id"`
	Attempt     string            `json:"attempt"` // unique per turn: events name it
	Command     []string          `json:"command"`
	Prompt      []byte            `json:"prompt"`
	FollowUp    string            `json:"follow_up,omitempty"`
	Env         []string          `json:"env,omitempty"`
	IdleTimeout time.Duration     `json:"idle_timeout,omitempty"`
	Timeout     time.Duration     `json:"timeout,omitempty"`
	Attachments map[string][]byte `json:"attachments,omitempty"`
	Lease       time.Duration     `json:"lease"`
	// Files are the run's skills' files, by path in the workspace.
	Files map[string][]byte `json:"files,omitempty"`
	// Setup are the runner's setup commands, run on the worker before the
	// run's first turn; Runner names the runner, Image and Shape are its
	// container's (the docker backend's).
	Setup  []string               `json:"setup,omitempty"`
	Runner string                 `json:"runner,omitempty"`
	Image  string                 `json:"image,omitempty"`
	Shape  *factory.InstanceShape `json:"shape,omitempty"`
	// Executor is how the command runs: exec ("", a plain command) or
	// acp (an agent over the Agent Client Protocol, with Permissions and
	// the MCP servers offered to its session).
	Executor    string                     `json:"executor,omitempty"`
	Permissions string                     `json:"permissions,omitempty"`
	MCPServers  map[string]json.RawMessage `json:"mcp_servers,omitempty"`
}

// ExecutorACP is an assignment's executor for ACP agents.
const ExecutorACP = "acp"

// SelfCommand stands for the factory binary in an assignment's command
// (the built-in demo agent is factory demo-agent): each worker runs its
// own.
const SelfCommand = "@factory"

// Event is what a worker reports of a turn: claimed (it took it),
// started (its agent runs), message, heartbeat (the lease renewed), done (with the result and the
// files the agent left in its output folder).
type Event struct {
	RunID   string            `json:"run_id"`
	Attempt string            `json:"attempt"`
	Worker  string            `json:"worker"`
	Kind    string            `json:"kind"`
	Time    time.Time         `json:"time"`
	Message string            `json:"message,omitempty"`
	Result  *runtime.Result   `json:"result,omitempty"`
	Outputs map[string][]byte `json:"outputs,omitempty"`
	// OutputObjects name the turn's output files in the worker's object
	// store (attempt/path), where Outputs would not hold them.
	OutputObjects []string `json:"output_objects,omitempty"`
}

// Control asks the worker running a turn to stop it.
type Control struct {
	RunID   string `json:"run_id"`
	Attempt string `json:"attempt"`
	Action  string `json:"action"` // cancel, interrupt, or ping (are you there?)
}

// Ping says whether a worker answers on its control subject now: the
// presence check where the control plane does not run the NATS server.
func (d *Dispatcher) Ping(worker string) bool {
	b, _ := json.Marshal(Control{Action: "ping"})
	_, err := d.NC.Request(controlSubject(worker), b, 500*time.Millisecond)
	return err == nil
}

// Dispatcher is the control plane's side: it publishes assignments and
// routes the workers' events to the turns waiting for them.
type Dispatcher struct {
	NC    *nats.Conn
	JS    jetstream.JetStream
	Lease time.Duration
	Log   *slog.Logger
	// The run manager records each turn's attempt (Turn.Attempt) before
	// the turn is handed over, and its claim when it hears the turn's
	// claimed phase: a restarted control plane follows the turn again.

	mu      sync.Mutex
	waiting map[string]chan Event // by attempt
	last    map[string]string     // run ID → the worker of its last turn
	seen    map[string]*Activity  // by worker
	// orphans are events of turns nobody follows yet (a restarted control
	// plane hears them before it resumes the turns), by attempt.
	orphans map[string][]Event
}

// Orphan events kept at most, in all.
const maxOrphans = 10_000

// Activity is what the control plane has heard of a worker: the turns it
// holds, and when it last said anything.
type Activity struct {
	RunsActive int       `json:"runs_active"`
	LastSeen   time.Time `json:"last_heartbeat"`
}

// Activity is what the control plane heard of each worker since it
// started.
func (d *Dispatcher) Activity() map[string]Activity {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]Activity{}
	for w, a := range d.seen {
		out[w] = *a
	}
	return out
}

// heard notes a worker's event.
func (d *Dispatcher) heard(e Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.seen[e.Worker]
	if a == nil {
		a = &Activity{}
		d.seen[e.Worker] = a
	}
	a.LastSeen = time.Now().UTC()
	switch e.Kind {
	case "claimed":
		a.RunsActive++
	case "done":
		a.RunsActive = max(a.RunsActive-1, 0)
	}
}

// Setup creates the streams and the shared consumer, idempotently: the
// runs' work queue (each assignment taken once) and the events (kept a
// day, for a control plane that restarts).
func Setup(ctx context.Context, js jetstream.JetStream) error {
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: RunsStream, Subjects: []string{"factory.runs.>"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage}); err != nil {
		return fmt.Errorf("stream %s: %w", RunsStream, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: EventsStream, Subjects: []string{"factory.events.>"},
		Storage: jetstream.FileStorage, MaxAge: 24 * time.Hour}); err != nil {
		return fmt.Errorf("stream %s: %w", EventsStream, err)
	}
	_, err := js.CreateOrUpdateConsumer(ctx, RunsStream, jetstream.ConsumerConfig{Durable: anyConsumer, FilterSubject: anySubject,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: -1})
	return err
}

// AddWorker creates the queue of a worker's own assignments and the
// object store of its outputs (kept a day, for a control plane that is
// away).
func AddWorker(ctx context.Context, js jetstream.JetStream, id string) error {
	_, err := js.CreateOrUpdateConsumer(ctx, RunsStream, jetstream.ConsumerConfig{Durable: hostConsumer(id), FilterSubject: hostSubject(id),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: -1})
	if err != nil {
		return err
	}
	_, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: outputsBucket(id), Storage: jetstream.FileStorage, TTL: 24 * time.Hour})
	return err
}

// Start consumes the events stream until ctx ends.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	d.waiting, d.last, d.seen, d.orphans = map[string]chan Event{}, map[string]string{}, map[string]*Activity{}, map[string][]Event{}
	d.mu.Unlock()
	c, err := d.JS.CreateOrUpdateConsumer(ctx, EventsStream, jetstream.ConsumerConfig{Durable: "control-plane",
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return err
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		var e Event
		if json.Unmarshal(m.Data(), &e) == nil {
			// Who sent it is the subject it came on (a worker may
			// publish on its own only), never what the event says.
			e.Worker = strings.TrimPrefix(m.Subject(), "factory.events.")
			d.route(e)
		}
		_ = m.Ack()
	})
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); cc.Stop() }()
	return nil
}

func (d *Dispatcher) route(e Event) {
	d.heard(e)
	d.mu.Lock()
	ch := d.waiting[e.Attempt]
	if ch == nil {
		if len(d.orphans) < maxOrphans && len(d.orphans[e.Attempt]) < 200 || e.Kind == "done" {
			d.orphans[e.Attempt] = append(d.orphans[e.Attempt], e)
		}
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	select {
	case ch <- e:
	default:
		// The turn's buffer is full: messages may go, the turn's end not.
		if e.Kind == "done" {
			ch <- e
		}
	}
}

// register starts following an attempt: its channel gets the events
// heard before, then the new ones.
func (d *Dispatcher) register(attempt string) chan Event {
	ch := make(chan Event, 256)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.orphans[attempt] {
		select {
		case ch <- e:
		default:
		}
	}
	delete(d.orphans, attempt)
	d.waiting[attempt] = ch
	return ch
}

func (d *Dispatcher) unregister(attempt string) {
	d.mu.Lock()
	delete(d.waiting, attempt)
	d.mu.Unlock()
}

// Executor is an executor that runs command on a worker.
func (d *Dispatcher) Executor(command []string) runtime.Executor {
	return &remote{d: d, command: command}
}

// ACPExecutor is an executor that runs an ACP agent on a worker.
func (d *Dispatcher) ACPExecutor(command []string, permissions string) runtime.Executor {
	return &remote{d: d, command: command, executor: ExecutorACP, permissions: permissions}
}

type remote struct {
	d                     *Dispatcher
	command               []string
	executor, permissions string
}

// Run publishes the turn and follows it: claimed, messages, heartbeats,
// its end. A worker that goes quiet for longer than the lease ends the
// turn as ERROR (retryable); cancelling ctx asks the worker to stop.
func (x *remote) Run(ctx context.Context, t runtime.Turn, events func(runtime.Event)) runtime.Result {
	d := x.d
	a, err := assignment(t, x.command, d.Lease)
	if err != nil {
		return runtime.Result{State: factory.StateError, Message: "preparing the assignment: " + err.Error()}
	}
	a.Executor, a.Permissions, a.MCPServers = x.executor, x.permissions, t.MCPServers
	ch := d.register(a.Attempt)
	defer d.unregister(a.Attempt)
	d.mu.Lock()
	subject := anySubject
	switch w := d.last[t.RunID]; {
	case w != "" && t.FollowUp != "":
		subject = hostSubject(w) // the workspace is there
	case t.WorkerHost != "" && validID(t.WorkerHost):
		subject = hostSubject(t.WorkerHost)
	}
	d.mu.Unlock()
	body, _ := json.Marshal(a)
	published := time.Now()
	ack, err := d.JS.Publish(ctx, subject, body, jetstream.WithMsgID(a.Attempt))
	if err != nil {
		return runtime.Result{State: factory.StateError, Message: "queueing the run for a worker: " + err.Error()}
	}
	return x.follow(ctx, a.RunID, a.Attempt, turnWait{seq: ack.Sequence, published: published, outputDir: t.OutputDir}, ch, events)
}

// Resume follows a turn published before the control plane restarted: the
// events it missed wait in the events stream.
func (x *remote) Resume(ctx context.Context, r *factory.Run, t runtime.Turn, events func(runtime.Event)) (runtime.Result, bool) {
	if r.RemoteTurn == "" {
		return runtime.Result{}, false
	}
	ch := x.d.register(r.RemoteTurn)
	defer x.d.unregister(r.RemoteTurn)
	tw := turnWait{published: time.Now(), outputDir: t.OutputDir}
	if r.ClaimedTurn == r.RemoteTurn {
		tw.worker = r.Worker
	}
	return x.follow(ctx, r.ID, r.RemoteTurn, tw, ch, events), true
}

// follow waits for a turn's events until it ends.
// turnWait is what following a published turn needs of it.
type turnWait struct {
	seq       uint64 // its place in the queue (0: not known)
	published time.Time
	outputDir string
	worker    string // the worker known to have it
}

func (x *remote) follow(ctx context.Context, runID, attempt string, tw turnWait, ch chan Event, events func(runtime.Event)) runtime.Result {
	d := x.d
	worker := tw.worker
	lease := time.NewTimer(d.Lease)
	defer lease.Stop()
	done := ctx.Done()
	for {
		select {
		case e := <-ch:
			if worker != "" && e.Worker != worker {
				d.Log.Warn("an event of a run from a worker that does not hold it", "run", runID, "from", e.Worker, "holder", worker)
				continue
			}
			lease.Reset(d.Lease)
			switch e.Kind {
			case "claimed":
				worker = e.Worker
				d.claimed(runID, worker, tw.published)
				events(runtime.Event{Time: e.Time, Phase: runtime.PhaseClaimed, Worker: worker})
			case "started":
				events(runtime.Event{Time: e.Time, Phase: runtime.PhaseStarted})
			case "message":
				events(runtime.Event{Time: e.Time, Message: e.Message})
			case "done":
				return d.finished(e, tw.outputDir)
			}
		case <-lease.C:
			if worker == "" {
				lease.Reset(d.Lease) // still queued: no lease runs yet
				continue
			}
			// Should it be only cut off, it stops the turn when it hears this.
			x.stop(ctx, runID, attempt, 0, worker)
			return runtime.Result{State: factory.StateError, Code: "worker_lost",
				Message: fmt.Sprintf("worker %s stopped answering (no heartbeat for %s); send a follow-up to run it again", worker, d.Lease)}
		case <-done:
			if errors.Is(context.Cause(ctx), runtime.ErrShutdown) {
				return runtime.Result{} // the control plane stops; the turn goes on, to be resumed
			}
			done = nil
			x.stop(ctx, runID, attempt, tw.seq, worker)
			if worker == "" {
				return runtime.Result{State: factory.StateCancelled, Message: "cancelled before a worker took it"}
			}
		}
	}
}

// claimed notes the worker that took a turn: a follow-up goes to it.
func (d *Dispatcher) claimed(runID, worker string, published time.Time) {
	d.mu.Lock()
	d.last[runID] = worker
	d.mu.Unlock()
	d.Log.Info("run claimed", "run", runID, "worker", worker, "after", time.Since(published))
}

// stop takes a turn back: out of the queue if no worker has it, else a
// word to the worker that has it.
func (x *remote) stop(ctx context.Context, runID, attempt string, seq uint64, worker string) {
	d := x.d
	if worker == "" {
		if s, err := d.JS.Stream(context.Background(), RunsStream); err == nil && seq > 0 {
			_ = s.DeleteMsg(context.Background(), seq)
		}
		return
	}
	action := "cancel"
	if errors.Is(context.Cause(ctx), runtime.ErrInterrupted) {
		action = "interrupt"
	}
	b, _ := json.Marshal(Control{RunID: runID, Attempt: attempt, Action: action})
	if err := d.NC.Publish(controlSubject(worker), b); err != nil {
		d.Log.Error("asking a worker to stop a run", "run", runID, "worker", worker, "err", err)
	}
}

// finished is a turn's result, with the agent's output files written
// where the control plane collects artifacts from: those the event holds,
// and those in the worker's object store (taken out of it).
func (d *Dispatcher) finished(e Event, outputDir string) runtime.Result {
	if e.Result == nil {
		return runtime.Result{State: factory.StateError, Message: "the worker sent no result"}
	}
	for name, b := range e.Outputs {
		if p, ok := outputPath(outputDir, name); ok {
			_ = os.WriteFile(p, b, 0o600)
		}
	}
	if len(e.OutputObjects) > 0 {
		d.takeObjects(e, outputDir)
	}
	return *e.Result
}

// takeObjects copies a turn's output files out of its worker's object
// store into outputDir, each at most artifacts.MaxFileBytes, and deletes
// them there.
func (d *Dispatcher) takeObjects(e Event, outputDir string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs, err := d.JS.ObjectStore(ctx, outputsBucket(e.Worker))
	if err != nil {
		d.Log.Error("a worker's outputs", "worker", e.Worker, "run", e.RunID, "err", err)
		return
	}
	prefix := e.Attempt + "/"
	for _, name := range e.OutputObjects {
		rel, ok := strings.CutPrefix(name, prefix)
		p, local := outputPath(outputDir, rel)
		if !ok || !local {
			continue // not this turn's: a worker names its own only
		}
		if err := copyObject(ctx, obs, name, p); err != nil {
			d.Log.Error("a run's output from its worker", "run", e.RunID, "file", rel, "err", err)
		}
		_ = obs.Delete(ctx, name)
	}
}

func copyObject(ctx context.Context, obs jetstream.ObjectStore, name, path string) error {
	r, err := obs.Get(ctx, name)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, io.LimitReader(r, artifacts.MaxFileBytes+1))
	return errors.Join(err, f.Close())
}

// outputPath is where an output file named by a worker goes, if its name
// stays inside the output folder.
func outputPath(outputDir, name string) (string, bool) {
	rel := filepath.FromSlash(name)
	if !filepath.IsLocal(rel) {
		return "", false
	}
	p := filepath.Join(outputDir, rel)
	return p, os.MkdirAll(filepath.Dir(p), 0o700) == nil
}

// assignment builds a turn's assignment from its laid-out workspace.
func assignment(t runtime.Turn, command []string, lease time.Duration) (*Assignment, error) {
	prompt, err := os.ReadFile(t.PromptFile)
	if err != nil {
		return nil, err
	}
	a := &Assignment{RunID: t.RunID, Attempt: cmp.Or(t.Attempt, factory.NewUID("at_")), Command: command, Prompt: prompt, FollowUp: t.FollowUp,
		Env: t.Env, IdleTimeout: t.IdleTimeout, Timeout: t.Timeout, Lease: lease, Attachments: map[string][]byte{}}
	if err := withSetup(a, t); err != nil {
		return nil, err
	}
	entries, _ := os.ReadDir(t.AttachmentsDir)
	for _, en := range entries {
		if en.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(t.AttachmentsDir, en.Name()))
			if err != nil {
				return nil, err
			}
			a.Attachments[en.Name()] = b
		}
	}
	return a, nil
}

// withSetup adds the run's setup to its assignment: the skills' files (as
// laid out in the control plane's workspace), the runner's image and
// shape, and its setup commands on the run's first turn.
func withSetup(a *Assignment, t runtime.Turn) error {
	s := t.Setup
	if s == nil {
		return nil
	}
	a.Runner, a.Image, a.Shape = s.Runner, s.DockerImage, s.InstanceShape
	if t.SetupNow {
		a.Setup = s.SetupCommands
	}
	if len(s.Files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(t.Workspace)
	if err != nil {
		return err
	}
	defer root.Close()
	a.Files = map[string][]byte{}
	for _, p := range s.Files {
		b, err := root.ReadFile(p)
		if err != nil {
			return fmt.Errorf("skill file %s: %w", p, err)
		}
		a.Files[p] = b
	}
	return nil
}
