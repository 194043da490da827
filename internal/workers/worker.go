package workers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"factory"
	"factory/internal/artifacts"
	"factory/internal/docker"
	"factory/internal/runtime"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Worker claims assignments and runs them (the direct backend: a process
// group in a per-run workspace under Dir).
type Worker struct {
	ID      string
	NC      *nats.Conn
	JS      jetstream.JetStream
	MaxRuns int
	Dir     string
	Log     *slog.Logger
	// Docker, when set, runs each run in a container (the docker
	// backend); DockerImage is the image of runs whose runner names none.
	Docker      *docker.Backend
	DockerImage string
	// AbandonOnStop stops the turns it holds when ctx ends, instead of
	// letting them finish: the control plane's in-process worker, which
	// stops with its server (the runs then end ERROR, retryable, as a
	// single server's runs do when it stops).
	AbandonOnStop bool
	// SharesFolders says this worker's run folders are the run
	// manager's own (the in-process worker): the manager has laid the
	// workspace out already and collects the output where it is, so
	// neither is done again.
	SharesFolders bool

	outputs jetstream.ObjectStore // this worker's, nil without one
	mu      sync.Mutex
	active  map[string]context.CancelCauseFunc // by attempt
	wg      sync.WaitGroup
}

// errAbandoned ends the turns of a worker stopped with its server.
var errAbandoned = errors.New("the server stopped while the run was in progress")

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
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.User != ControlUser {
		opts = append(opts, nats.CustomInboxPrefix(inboxPrefix(c.User)))
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
	host, err := w.JS.Consumer(ctx, RunsStream, hostConsumer(w.ID))
	if err != nil {
		return fmt.Errorf("this worker's queue: %w (is it created with factory workers create %s?)", err, w.ID)
	}
	shared, err := w.JS.Consumer(ctx, RunsStream, anyConsumer)
	if err != nil {
		return fmt.Errorf("the shared queue: %w", err)
	}
	if w.outputs, err = w.JS.ObjectStore(ctx, outputsBucket(w.ID)); err != nil {
		// A worker registered before object stores: its outputs go in
		// its events, as then.
		w.Log.Warn("no object store for this worker's outputs: they go in its events, at most 4 MiB a turn", "err", err)
		w.outputs = nil
	}
	sub, err := w.NC.Subscribe(controlSubject(w.ID), w.control)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	w.claimLoop(ctx, host, shared, make(chan struct{}, w.MaxRuns))
	if w.AbandonOnStop {
		w.mu.Lock()
		for _, cancel := range w.active {
			cancel(errAbandoned)
		}
		w.mu.Unlock()
	}
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
		if json.Unmarshal(got.Data(), &a) != nil || a.RunID == "" {
			_ = got.Term()
			<-slots
			continue
		}
		// Acknowledged and confirmed before anything runs: the queue
		// hands the assignment to no one else.
		if err := got.DoubleAck(ctx); err != nil {
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

// runTurn lays a turn out, runs it, and reports it, renewing its lease
// every third of it while it runs.
func (w *Worker) runTurn(a *Assignment) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	w.mu.Lock()
	w.active[a.Attempt] = cancel
	w.mu.Unlock()
	defer func() { w.mu.Lock(); delete(w.active, a.Attempt); w.mu.Unlock() }()
	w.Log.Info("run started", "run", a.RunID, "attempt", a.Attempt)
	w.publish(Event{RunID: a.RunID, Attempt: a.Attempt, Kind: "claimed"})
	stop := make(chan struct{})
	go w.heartbeat(a, stop)
	res, outDir := w.execute(ctx, a)
	done := Event{RunID: a.RunID, Attempt: a.Attempt, Kind: "done", Result: &res}
	if outDir != "" && !w.SharesFolders {
		w.attachOutputs(&done, outDir)
	}
	close(stop)
	if errors.Is(context.Cause(ctx), errAbandoned) {
		res = runtime.Result{State: factory.StateError, Message: errAbandoned.Error() + "; send a follow-up to continue it", Stderr: res.Stderr}
	}
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

// execute lays the turn's workspace out on this machine and runs the turn
// with the worker's backend: a container (docker) or a process group
// (direct).
func (w *Worker) execute(ctx context.Context, a *Assignment) (runtime.Result, string) {
	base := filepath.Join(w.Dir, "runs", a.RunID)
	ws, out := filepath.Join(base, "workspace"), filepath.Join(base, "output")
	att := filepath.Join(ws, "attachments")
	if !w.SharesFolders {
		if err := layOut(ws, out, att, a); err != nil {
			return runtime.Result{State: factory.StateError, Message: "the worker's workspace: " + err.Error()}, ""
		}
	}
	turn := runtime.Turn{RunID: a.RunID, Workspace: ws, Prompt: string(a.Prompt), PromptFile: filepath.Join(ws, "PROMPT.md"),
		AttachmentsDir: att, OutputDir: out, FollowUp: a.FollowUp, Env: a.Env, IdleTimeout: a.IdleTimeout, Timeout: a.Timeout,
		MCPServers: a.MCPServers}
	command := ownCommand(a.Command, w.Docker != nil)
	events := func(e runtime.Event) {
		w.publish(Event{RunID: a.RunID, Attempt: a.Attempt, Kind: "message", Time: e.Time, Message: e.Message})
	}
	// The run is INPROGRESS from its agent's start (its setup is not).
	// The agent's process group is noted beside the workspace until the
	// turn ends: a worker that died under it kills it when it is back.
	agentFile := filepath.Join(base, agentProcessFile)
	defer os.Remove(agentFile)
	turn.Started = func(pid int) {
		if pid > 0 {
			b, _ := json.Marshal(runtime.ProcessOf(pid))
			_ = os.WriteFile(agentFile, b, 0o600)
		}
		w.publish(Event{RunID: a.RunID, Attempt: a.Attempt, Kind: "started"})
	}
	var acp *runtime.ACPExecutor
	if a.Executor == ExecutorACP {
		acp = &runtime.ACPExecutor{Command: command, Permissions: a.Permissions}
	}
	if w.Docker != nil {
		ct := docker.Turn{Turn: turn, Dir: base, Command: command, Image: cmp.Or(a.Image, w.DockerImage), Shape: a.Shape, Setup: a.Setup,
			Runner: a.Runner, ACP: acp}
		return w.Docker.Run(ctx, ct, events), out
	}
	if len(a.Setup) > 0 {
		if res, ok := runtime.RunSetup(ctx, a.Setup, a.Runner, turn, filepath.Join(base, "setup.log"), events); !ok {
			return res, out
		}
	}
	if acp != nil {
		return acp.Run(ctx, turn, events), out
	}
	return (&runtime.ExecExecutor{Command: command}).Run(ctx, turn, events), out
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

// layOut writes the assignment's prompt, attachments and skills' files
// into the run's workspace; a name that would leave its folder is
// skipped.
func layOut(ws, out, att string, a *Assignment) error {
	for _, d := range []string{ws, out, att} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "PROMPT.md"), a.Prompt, 0o600); err != nil {
		return err
	}
	for name, b := range a.Attachments {
		if runtime.CheckAttachmentName(name) != nil {
			continue
		}
		_ = os.WriteFile(filepath.Join(att, name), b, 0o600)
	}
	if len(a.Files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return err
	}
	defer root.Close()
	for p, b := range a.Files {
		if !filepath.IsLocal(p) || !strings.HasPrefix(path.Clean(p), factory.SkillsDirInWorkspace+"/") {
			continue
		}
		if err := root.MkdirAll(path.Dir(p), 0o700); err != nil {
			return err
		}
		if err := root.WriteFile(p, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// attachOutputs adds the files the agent left in its output folder to a
// turn's end: put in this worker's object store (each up to
// artifacts.MaxFileBytes, artifacts.MaxRunBytes in all), or, without one,
// in the event itself (up to maxOutputs in all). A file left out is said
// in the result's message.
func (w *Worker) attachOutputs(e *Event, dir string) {
	var skipped []string
	total := 0
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return nil
		}
		limit := maxOutputs
		if w.outputs != nil {
			limit = artifacts.MaxRunBytes
		}
		if info.Size() > artifacts.MaxFileBytes || total+int(info.Size()) > limit {
			skipped = append(skipped, rel)
			return nil
		}
		if err := w.attachOutput(e, p, rel); err != nil {
			w.Log.Warn("sending an output file", "run", e.RunID, "file", rel, "err", err)
			skipped = append(skipped, rel)
			return nil
		}
		total += int(info.Size())
		return nil
	})
	if len(skipped) > 0 {
		e.Result.Message += fmt.Sprintf(" (output files not sent back: %s)", strings.Join(skipped, ", "))
	}
}

func (w *Worker) attachOutput(e *Event, path, rel string) error {
	if w.outputs == nil {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if e.Outputs == nil {
			e.Outputs = map[string][]byte{}
		}
		e.Outputs[rel] = b
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := e.Attempt + "/" + rel
	if _, err := w.outputs.Put(ctx, jetstream.ObjectMeta{Name: name}, f); err != nil {
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
		_, err := w.JS.Publish(ctx, eventsSubject(w.ID), b)
		cancel()
		if err == nil || e.Kind == "heartbeat" {
			return // a heartbeat is only worth sending now
		}
		w.Log.Warn("reporting to the control plane", "run", e.RunID, "kind", e.Kind, "err", err)
		time.Sleep(time.Second)
	}
}
