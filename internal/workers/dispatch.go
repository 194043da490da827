package workers

import (
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
	"syscall"
	"time"

	"factory"
	"factory/internal/artifacts"
	"factory/internal/runtime"
	"factory/internal/worker"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Dispatcher is the run manager's host for turns on workers: it offers
// each turn on the runs' work queue, answers the workers' claims through
// the run manager (Claim), and routes each claimed turn's events to the
// turn waiting for them.
type Dispatcher struct {
	NC    *nats.Conn
	JS    jetstream.JetStream
	Lease time.Duration
	Log   *slog.Logger
	// Claim records a worker's claim of a turn (the run manager's, which
	// owns the run's state); an error refuses it. Set before Start.
	Claim func(runID, attempt, worker string) error
	// Allowed, when set, says whether a worker's claims and events are
	// taken (it is not revoked): those of a revoked worker are dropped.
	Allowed func(worker string) bool

	// Owner, when set, says whether a turn is live (the run's current
	// attempt on the workers): events of a turn nobody follows are kept
	// for it only when it is.
	Owner func(runID, attempt string) bool
	// Approve puts a tool call of a worker's turn to a person and waits
	// for the answer until ctx ends (the run manager's ApproveFor).
	Approve func(ctx context.Context, worker, runID, attempt string, req runtime.ApprovalRequest) (runtime.ApprovalAnswer, error)

	mu      sync.Mutex
	waiting map[string]*waiter  // by attempt
	seen    map[string]*heardOf // by worker
	// orphans are events of live turns nobody follows yet (a restarted
	// control plane hears them before it follows the turns again), by
	// attempt, within bounds; orphanBytes is their size in all.
	orphans     map[string]*orphan
	orphanBytes int
}

// waiter is a turn being followed: its events' channel, closed gone when
// it is followed no more.
type waiter struct {
	ch   chan worker.Event
	gone chan struct{}
}

// orphan is what is held of a turn nobody follows yet.
type orphan struct {
	events []worker.Event
	bytes  int
	at     time.Time
}

// Bounds of what the dispatcher holds for turns nobody follows: a worker
// that sends events for turns that are not live, or floods a live one
// before it is followed, cannot exhaust the control plane's memory.
const (
	maxOrphanTurns    = 1_000
	maxOrphanMessages = 200      // a turn's messages (its claim, start and end beside)
	maxOrphanBytes    = 64 << 20 // in all
	orphanTTL         = 10 * time.Minute
)

// Activity is what the control plane has heard of a worker: the turns it
// holds, and when it last said anything.
type Activity struct {
	RunsActive int       `json:"runs_active"`
	LastSeen   time.Time `json:"last_heartbeat"`
}

// heardOf is what the control plane heard of one worker: the turns it
// holds (a claim asked again counts once), and when it last said anything.
type heardOf struct {
	turns    map[string]bool // by attempt
	lastSeen time.Time
}

// Activity is what the control plane heard of each worker since it
// started.
func (d *Dispatcher) Activity() map[string]Activity {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]Activity{}
	for w, a := range d.seen {
		out[w] = Activity{RunsActive: len(a.turns), LastSeen: a.lastSeen}
	}
	return out
}

// heard notes a worker's event.
func (d *Dispatcher) heard(e worker.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.seen[e.Worker]
	if a == nil {
		a = &heardOf{turns: map[string]bool{}}
		d.seen[e.Worker] = a
	}
	if e.Kind != "lost" {
		a.lastSeen = time.Now().UTC()
	}
	switch e.Kind {
	case "claimed":
		a.turns[e.Attempt] = true
	case "done", "lost":
		delete(a.turns, e.Attempt)
	}
}

// Ping says whether a worker answers on its control subject now: the
// presence check where the control plane does not run the NATS server.
func (d *Dispatcher) Ping(name string) bool {
	b, _ := json.Marshal(worker.Control{Action: "ping"})
	_, err := d.NC.Request(controlSubject(name), b, 500*time.Millisecond)
	return err == nil
}

// Bounds of the events stream: a worker cannot fill the control plane's
// disk. Each worker's subject keeps its latest MaxEventsPerWorker events
// (a flood pushes out its own oldest, not another worker's), the stream
// MaxEvents and MaxEventsBytes in all, an event at most MaxEventBytes (the
// embedded server's largest message).
const (
	MaxEventsPerWorker = 100_000
	MaxEvents          = 1_000_000
	MaxEventsBytes     = 1 << 30
	MaxEventBytes      = 8 << 20
)

// Setup creates the streams and the shared consumer, idempotently: the
// runs' work queue (each turn taken once) and the events (kept a day, for
// a control plane that restarts, within bounds).
func Setup(ctx context.Context, js jetstream.JetStream) error {
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: RunsStream, Subjects: []string{"factory.runs.>"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage}); err != nil {
		return fmt.Errorf("stream %s: %w", RunsStream, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: EventsStream, Subjects: []string{"factory.events.>"},
		Storage: jetstream.FileStorage, MaxAge: 24 * time.Hour, MaxBytes: MaxEventsBytes, MaxMsgs: MaxEvents,
		MaxMsgsPerSubject: MaxEventsPerWorker, MaxMsgSize: MaxEventBytes, Discard: jetstream.DiscardOld}); err != nil {
		return fmt.Errorf("stream %s: %w", EventsStream, err)
	}
	_, err := js.CreateOrUpdateConsumer(ctx, RunsStream, jetstream.ConsumerConfig{Durable: anyConsumer, FilterSubject: anySubject,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: -1})
	return err
}

// AddWorker creates the queue of a worker's own turns and the object store
// of its outputs (kept a day, for a control plane that is away).
func AddWorker(ctx context.Context, js jetstream.JetStream, id string) error {
	_, err := js.CreateOrUpdateConsumer(ctx, RunsStream, jetstream.ConsumerConfig{Durable: hostConsumer(id), FilterSubject: hostSubject(id),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: -1})
	if err != nil {
		return err
	}
	_, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: outputsBucket(id), Storage: jetstream.FileStorage, TTL: 24 * time.Hour})
	return err
}

// Start consumes the events stream and answers claims until ctx ends.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	d.waiting, d.seen, d.orphans, d.orphanBytes = map[string]*waiter{}, map[string]*heardOf{}, map[string]*orphan{}, 0
	d.mu.Unlock()
	c, err := d.JS.CreateOrUpdateConsumer(ctx, EventsStream, jetstream.ConsumerConfig{Durable: "control-plane",
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return err
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		var e worker.Event
		if json.Unmarshal(m.Data(), &e) == nil {
			// Who sent it is the subject it came on (a worker may
			// publish on its own only), never what the event says.
			e.Worker = strings.TrimPrefix(m.Subject(), "factory.events.")
			if d.allowed(e.Worker) {
				d.route(e)
			}
		}
		_ = m.Ack()
	})
	if err != nil {
		return err
	}
	sub, err := d.NC.Subscribe(worker.ClaimsSubjects, d.answerClaim)
	if err != nil {
		cc.Stop()
		return err
	}
	asub, err := d.NC.Subscribe(worker.ApprovalsSubjects, func(m *nats.Msg) { go d.answerApproval(ctx, m) })
	if err != nil {
		cc.Stop()
		_ = sub.Unsubscribe()
		return err
	}
	go func() { <-ctx.Done(); cc.Stop(); _ = sub.Unsubscribe(); _ = asub.Unsubscribe() }()
	return nil
}

// approvalWait is how long the control plane holds a worker's ask of a
// person's answer before it answers Pending (the worker asks again within
// its own bound, worker's approvalPoll).
const approvalWait = 20 * time.Second

// answerApproval answers a worker's ask of a person's answer to a tool
// call (worker.ApprovalAsk), through the run manager: the answer, Pending
// after approvalWait, or why there will be none. The asker is the subject
// the ask came on: the manager checks it holds the run.
func (d *Dispatcher) answerApproval(ctx context.Context, m *nats.Msg) {
	name := strings.TrimPrefix(m.Subject, "factory.approvals.")
	var ask worker.ApprovalAsk
	var reply worker.ApprovalReply
	d.mu.Lock()
	approve := d.Approve
	d.mu.Unlock()
	switch err := json.Unmarshal(m.Data, &ask); {
	case err != nil || ask.RunID == "" || ask.Attempt == "":
		reply.Error = "not an approval"
	case approve == nil:
		reply.Pending = true // the control plane is starting: ask again
	default:
		wctx, cancel := context.WithTimeout(ctx, approvalWait)
		ans, err := approve(wctx, name, ask.RunID, ask.Attempt, ask.Request)
		cancel()
		switch {
		case err == nil:
			reply.Answer = &ans
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			reply.Pending = true
		default:
			reply.Error = err.Error()
		}
	}
	b, _ := json.Marshal(reply)
	_ = m.Respond(b)
}

// answerClaim answers a worker's claim of a turn it took from the queue:
// the run manager records it (the run is CLAIMED, durably) or refuses it;
// only then does the worker run it. The claimant is the subject the claim
// came on (a worker may claim on its own only).
func (d *Dispatcher) answerClaim(m *nats.Msg) {
	name := strings.TrimPrefix(m.Subject, "factory.claims.")
	var req worker.ClaimRequest
	ans := worker.ClaimAnswer{OK: true}
	d.mu.Lock()
	claim := d.Claim
	d.mu.Unlock()
	switch err := json.Unmarshal(m.Data, &req); {
	case err != nil || req.RunID == "" || req.Attempt == "":
		ans = worker.ClaimAnswer{Reason: "not a claim"}
	case !d.allowed(name):
		ans = worker.ClaimAnswer{Reason: "worker " + name + " is revoked"}
	case claim == nil:
		ans = worker.ClaimAnswer{Reason: "the control plane takes no claims yet", Retry: true}
	default:
		if err := claim(req.RunID, req.Attempt, name); err != nil {
			ans = worker.ClaimAnswer{Reason: err.Error()}
		}
	}
	if ans.OK {
		crashAt("claimed")
		d.route(worker.Event{RunID: req.RunID, Attempt: req.Attempt, Worker: name, Kind: "claimed", Time: time.Now().UTC()})
	}
	b, _ := json.Marshal(ans)
	_ = m.Respond(b)
}

// allowed says whether what comes in a worker's name is taken.
func (d *Dispatcher) allowed(name string) bool {
	return d.Allowed == nil || d.Allowed(name)
}

func (d *Dispatcher) route(e worker.Event) {
	d.heard(e)
	d.mu.Lock()
	w, owner := d.waiting[e.Attempt], d.Owner
	d.mu.Unlock()
	if w == nil {
		// Nobody follows it: kept for a live turn (asked outside the
		// lock: it reads the store), else dropped.
		if owner != nil && !owner(e.RunID, e.Attempt) {
			return
		}
		d.mu.Lock()
		if w = d.waiting[e.Attempt]; w == nil {
			d.keepOrphan(e)
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
	}
	select {
	case w.ch <- e:
	default:
		// The turn's buffer is full: messages may go, its claim and end
		// not, unless the turn is followed no more.
		if e.Kind == "done" || e.Kind == "claimed" {
			select {
			case w.ch <- e:
			case <-w.gone:
			}
		}
	}
}

// keepOrphan holds an event of a turn nobody follows yet, within bounds:
// its claim, start and end once each, its messages up to
// maxOrphanMessages, heartbeats never; at most maxOrphanTurns turns (those
// held past orphanTTL go first) and maxOrphanBytes in all. d.mu is held.
func (d *Dispatcher) keepOrphan(e worker.Event) {
	o := d.orphans[e.Attempt]
	if o == nil {
		if len(d.orphans) >= maxOrphanTurns {
			d.dropStaleOrphans()
		}
		if len(d.orphans) >= maxOrphanTurns {
			return
		}
		o = &orphan{at: time.Now()}
		d.orphans[e.Attempt] = o
	}
	size := eventSize(e)
	messages := 0
	for i, have := range o.events {
		if have.Kind == e.Kind && e.Kind != "message" {
			if e.Kind == "done" && d.orphanBytes-eventSize(have)+size <= maxOrphanBytes {
				d.orphanBytes += size - eventSize(have)
				o.bytes += size - eventSize(have)
				o.events[i] = e // the last end said
			}
			return
		}
		if have.Kind == "message" {
			messages++
		}
	}
	switch {
	case e.Kind == "heartbeat":
	case e.Kind == "message" && messages >= maxOrphanMessages:
	case d.orphanBytes+size > maxOrphanBytes:
	default:
		o.events = append(o.events, e)
		o.bytes += size
		d.orphanBytes += size
	}
}

// dropStaleOrphans forgets the turns held past orphanTTL. d.mu is held.
func (d *Dispatcher) dropStaleOrphans() {
	for attempt, o := range d.orphans {
		if time.Since(o.at) > orphanTTL {
			d.orphanBytes -= o.bytes
			delete(d.orphans, attempt)
		}
	}
}

// eventSize is about what an event holds in memory.
func eventSize(e worker.Event) int {
	n := 256 + len(e.RunID) + len(e.Attempt) + len(e.Worker) + len(e.Kind) + len(e.Message)
	if r := e.Result; r != nil {
		n += len(r.Message) + len(r.Stderr) + len(r.Code)
	}
	for name, b := range e.Outputs {
		n += len(name) + len(b)
	}
	for _, name := range e.OutputObjects {
		n += len(name)
	}
	return n
}

// register starts following an attempt: its channel gets the events
// heard before, then the new ones.
func (d *Dispatcher) register(attempt string) chan worker.Event {
	w := &waiter{ch: make(chan worker.Event, 256), gone: make(chan struct{})}
	d.mu.Lock()
	defer d.mu.Unlock()
	if o := d.orphans[attempt]; o != nil {
		for _, e := range o.events {
			select {
			case w.ch <- e:
			default:
			}
		}
		d.orphanBytes -= o.bytes
		delete(d.orphans, attempt)
	}
	d.waiting[attempt] = w
	return w.ch
}

func (d *Dispatcher) unregister(attempt string) {
	d.mu.Lock()
	if w := d.waiting[attempt]; w != nil {
		close(w.gone)
		delete(d.waiting, attempt)
	}
	d.mu.Unlock()
}

// Run offers the turn on the queue (the worker it names, else any) and
// follows it: its claim, the agent's start and messages, heartbeats, its
// end, with the turn's output files written into its folder here
// (t.Dir). A claimed turn whose worker goes quiet for longer than the
// lease ends ERROR (retryable); cancelling ctx takes an unclaimed turn
// off the queue, or asks the worker to stop it.
func (d *Dispatcher) Run(ctx context.Context, t *runtime.Turn, events func(runtime.Event)) runtime.Result {
	a := worker.Assignment{Turn: *t, Lease: d.Lease}
	a.Command = selfAsMarker(a.Command)
	ch := d.register(a.Attempt)
	defer d.unregister(a.Attempt)
	subject := anySubject
	if t.Worker != "" && validID(t.Worker) {
		subject = hostSubject(t.Worker)
	}
	body, err := json.Marshal(a)
	if err != nil {
		return runtime.Result{State: factory.StateError, Message: "the turn's assignment: " + err.Error()}
	}
	crashAt("recorded")
	published := time.Now()
	// Published whatever becomes of ctx meanwhile: a cancel is recorded
	// already and takes the turn back below; a shutdown leaves it offered.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	ack, err := d.JS.Publish(pctx, subject, body, jetstream.WithMsgID(a.Attempt))
	cancel()
	if err != nil {
		if errors.Is(context.Cause(ctx), runtime.ErrShutdown) {
			return runtime.Result{} // offered again after the restart
		}
		return runtime.Result{State: factory.StateError, Message: "offering the run to the workers: " + err.Error()}
	}
	crashAt("published")
	return d.follow(ctx, t.RunID, a.Attempt, turnWait{seq: ack.Sequence, published: published, outputDir: t.OutputDir()}, ch, events)
}

// Follow follows a turn a worker (t.Worker) claimed before the control
// plane restarted: the events it missed wait in the events stream.
func (d *Dispatcher) Follow(ctx context.Context, t *runtime.Turn, events func(runtime.Event)) (runtime.Result, bool) {
	if t.Attempt == "" || t.Worker == "" {
		return runtime.Result{}, false
	}
	ch := d.register(t.Attempt)
	defer d.unregister(t.Attempt)
	return d.follow(ctx, t.RunID, t.Attempt, turnWait{published: time.Now(), outputDir: t.OutputDir(), worker: t.Worker}, ch, events), true
}

// turnWait is what following an offered turn needs of it.
type turnWait struct {
	seq       uint64 // its place in the queue (0: not known)
	published time.Time
	outputDir string
	worker    string // the worker known to have it
}

// follow waits for a turn's events until it ends.
func (d *Dispatcher) follow(ctx context.Context, runID, attempt string, tw turnWait, ch chan worker.Event, events func(runtime.Event)) runtime.Result {
	holder := tw.worker
	lease := time.NewTimer(d.Lease)
	defer lease.Stop()
	done := ctx.Done()
	for {
		select {
		case e := <-ch:
			if holder != "" && e.Worker != holder {
				d.Log.Warn("an event of a run from a worker that does not hold it", "run", runID, "from", e.Worker, "holder", holder)
				continue
			}
			lease.Reset(d.Lease)
			switch e.Kind {
			case "claimed":
				holder = e.Worker
				if done == nil {
					d.stop(ctx, runID, attempt, 0, holder) // cancelled while its claim was answered
				}
			case "started":
				events(runtime.Event{Time: e.Time, Phase: runtime.PhaseStarted, Worker: e.Worker})
			case "message":
				events(runtime.Event{Time: e.Time, Message: e.Message})
			case "done":
				return d.finished(e, tw.outputDir)
			}
		case <-lease.C:
			if holder == "" {
				lease.Reset(d.Lease) // still queued: no lease runs yet
				continue
			}
			// Should it be only cut off, it stops the turn when it hears this.
			d.stop(ctx, runID, attempt, 0, holder)
			d.heard(worker.Event{Worker: holder, Attempt: attempt, Kind: "lost"})
			return runtime.Result{State: factory.StateError, Code: "worker_lost",
				Message: fmt.Sprintf("worker %s stopped answering (no heartbeat for %s); send a follow-up to run it again", holder, d.Lease)}
		case <-done:
			if errors.Is(context.Cause(ctx), runtime.ErrShutdown) {
				return runtime.Result{} // the control plane stops; the turn goes on, to be followed again
			}
			done = nil
			d.stop(ctx, runID, attempt, tw.seq, holder)
			if holder == "" {
				return runtime.Result{State: factory.StateCancelled, Message: "cancelled before a worker took it"}
			}
		}
	}
}

// stop takes a turn back: off the queue if no worker has it (a worker
// that took it meanwhile has its claim refused), else a word to the worker
// that has it.
func (d *Dispatcher) stop(ctx context.Context, runID, attempt string, seq uint64, holder string) {
	if holder == "" {
		if s, err := d.JS.Stream(context.Background(), RunsStream); err == nil && seq > 0 {
			_ = s.DeleteMsg(context.Background(), seq)
		}
		return
	}
	action := "cancel"
	if errors.Is(context.Cause(ctx), runtime.ErrInterrupted) {
		action = "interrupt"
	}
	b, _ := json.Marshal(worker.Control{RunID: runID, Attempt: attempt, Action: action})
	if err := d.NC.Publish(controlSubject(holder), b); err != nil {
		d.Log.Error("asking a worker to stop a run", "run", runID, "worker", holder, "err", err)
	}
}

// finished is a turn's result, with the agent's output files written
// where the control plane collects artifacts from: those the event holds,
// and those in the worker's object store (taken out of it).
func (d *Dispatcher) finished(e worker.Event, outputDir string) runtime.Result {
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
func (d *Dispatcher) takeObjects(e worker.Event, outputDir string) {
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

// selfAsMarker replaces this binary at the head of a command with
// worker.SelfCommand: each worker runs its own.
func selfAsMarker(command []string) []string {
	self, err := os.Executable()
	if err != nil || len(command) == 0 {
		return command
	}
	resolved, _ := filepath.EvalSymlinks(self)
	if command[0] != self && command[0] != resolved {
		return command
	}
	return append([]string{worker.SelfCommand}, command[1:]...)
}

// crashStep is the step of dispatch at which this process kills itself
// (FACTORY_TEST_CRASH_AT: recorded, published or claimed), for the tests
// that a control plane's SIGKILL at each step loses no run. It is not a
// feature: nothing but those tests sets it.
var crashStep = os.Getenv("FACTORY_TEST_CRASH_AT")

// crashAt kills this process, as a power cut would, at the named step.
func crashAt(step string) {
	if crashStep == step {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
