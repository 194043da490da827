// Package runs owns runs: their records and their one state machine
// (every change of state goes through the table of factory.MoveTo, written
// once, in the store), the queue, and the turns: each built once from the
// store as a runtime.Turn and handed to a Host, on this machine or on a
// worker, whose events come back here and nowhere else.
package runs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"factory"
	"factory/internal/confine"
	"factory/internal/runtime"
	"factory/internal/store"
	"factory/internal/tracing"
)

// Environment is where runs execute: an executor and its limits
// (docs/spec/runtime.md).
type Environment struct {
	Executor runtime.Executor
	Timeout  time.Duration
	Env      []string // KEY=VALUE added to the agent's environment
	// ApprovalTimeout, when set, is how long its agents' tool calls wait
	// for a person's approval (permissions ask), over the server's.
	ApprovalTimeout time.Duration
	// Harness, when set, is the harness its agent is (claude, codex,
	// gemini): the server's environment of an installed harness. A run
	// whose agent names no harness gets what that harness needs
	// (Config.HarnessSetup); one whose agent names a harness gets that
	// harness's, whatever its environment.
	Harness string
	// RunAs, when set, is the user the agent runs as (the server must be
	// able to switch to it: root, or CAP_SETUID and CAP_SETGID). The
	// workspace becomes that user's; the rest of the data directory stays
	// out of its reach (docs/security.md). Such runs stay on the control
	// plane: a worker could not keep that boundary.
	RunAs *syscall.Credential
	// Unconfined runs this environment's agents without the manager's
	// confinement (Config.Confinement); ReadOnly are more paths its
	// agents read when confined (where its harness is installed).
	Unconfined bool
	ReadOnly   []string
}

// Host runs turns: the control plane's own (this process), or the workers
// (the NATS dispatcher).
type Host interface {
	// Run runs a turn until it ends and says how it ended. Its steps
	// (a worker claimed it, the agent started) and the agent's messages
	// reach events, in order. Cancelling ctx stops the turn; the cause
	// says why (runtime.ErrInterrupted: it ends BLOCKED; runtime.ErrShutdown:
	// the server stops, and a turn that goes on elsewhere returns a
	// Result with no State, to be followed after the restart).
	Run(ctx context.Context, t *runtime.Turn, events func(runtime.Event)) runtime.Result
	// Follow follows, after a restart, a turn that t.Worker claimed
	// before the server stopped; ok false when this host cannot.
	Follow(ctx context.Context, t *runtime.Turn, events func(runtime.Event)) (res runtime.Result, ok bool)
}

// Config sets a Manager up.
type Config struct {
	// Tracer, when set, traces each run's creation ("run.create") and
	// turns ("run.turn", children of the creation span, however much
	// later they run).
	Tracer             *tracing.Tracer
	Store              *store.Store
	DataDir            string // runs live in DataDir/runs/<run id>/
	Environments       map[string]Environment
	DefaultEnvironment string
	// MaxConcurrent bounds the turns the control plane runs itself at
	// once (default 4); turns on workers wait for a worker instead.
	MaxConcurrent int
	// DefaultIdleTimeout applies when a run's config sets none (10 min).
	DefaultIdleTimeout time.Duration
	Log                *slog.Logger
	// Finished, when set, is told the state each turn ends in (metrics).
	Finished func(state factory.RunState)
	// SecretValue reads a managed secret granted to a run (RunSetup.Secrets);
	// nil grants none.
	SecretValue func(name string) ([]byte, error)
	// Harnesses maps an agent's harness type (oz, claude, codex, gemini)
	// to the environment that runs it; oz defaults to DefaultEnvironment.
	Harnesses map[string]string
	// Workers, when set, runs turns on workers: those of runs that name a
	// worker, the next turns of runs a worker holds, and the rest when the
	// control plane runs no turns itself (NoLocal) or has no room while
	// WorkersReady says workers are there.
	Workers      Host
	NoLocal      bool
	WorkersReady func() bool
	// Repositories, when set, gives each turn of a run with repositories
	// what reaching them takes (codehost.Hosts.Access): where to clone
	// each from, and tokens minted for the turn.
	Repositories func(ctx context.Context, r *factory.Run) (RepoAccess, error)
	// PullRequests, when set, are the pull requests a run's branch has on
	// its code hosts, asked after each turn: they become its PULL_REQUEST
	// artifacts, whether or not the agent named them.
	PullRequests func(ctx context.Context, r *factory.Run) []factory.Artifact
	// Changed, when set, is told of every run whose state changed, after
	// the change is durable (the write-back to where runs came from). It
	// must not block.
	Changed func(r *factory.Run)
	// Output bounds the agents' status messages kept; nil: the defaults
	// (runtime.DefaultOutputLimits).
	Output *runtime.OutputLimits
	// Confinement confines the agents of this process's turns to their
	// runs' own folders and the system's (runtime.Confinement). Unless
	// Unconfined, where the kernel has Landlock, it is by default the data
	// directory hidden; where it has none, agents run unconfined and
	// Isolation says so.
	Confinement *runtime.Confinement
	Unconfined  bool
	// ApprovalTimeout is how long a tool call waits for a person's
	// approval (runtime.approvalTimeout; DefaultApprovalTimeout).
	ApprovalTimeout time.Duration
	// HarnessSetup, when set, gives each turn of a harness (its agent's,
	// else its environment's) what the harness needs: its model and
	// reasoning level, the model gateway's address and the run's token,
	// its settings in the run's HOME; a harness it does not know (oz) gets
	// nothing. A result ends the turn before it starts (its provider has
	// no key: integration_not_configured).
	HarnessSetup func(r *factory.Run, harness string) (env []string, home map[string][]byte, fail *runtime.Result)
}

// ErrExternalAuthentication is the error of a run that must reach its
// repositories as the person who created it, who gave no token for them
// (credentialStrategy CREATOR): it ends FAILED before its agent starts.
var ErrExternalAuthentication = errors.New("external authentication required")

// CodeExternalAuthenticationRequired is that run's error code.
const CodeExternalAuthenticationRequired = "external_authentication_required"

// RepoAccess is what a turn needs to reach its run's repositories: what to
// clone (first turn), the agent's environment (the tokens, as the hosts'
// tools read them), and notes for the timeline (a repository left out, and
// why).
type RepoAccess struct {
	Checkout []runtime.Checkout
	Env      []string
	Notes    []string
}

// Errors of the manager, for the API to map to statuses.
var (
	ErrUnknownEnvironment = errors.New("unknown environment")
	ErrNotFound           = errors.New("no such run")
	ErrTerminal           = errors.New("the run has ended")
	// ErrNotLive is the error of an interrupt of a run whose agent is not
	// running.
	ErrNotLive = errors.New("the run has no turn in progress")
	// ErrStaleClaim refuses a worker's claim of a turn that is not the
	// run's turn waiting for a worker (cancelled, claimed by another, or
	// an attempt offered again since).
	ErrStaleClaim = errors.New("not a turn waiting for a worker")
)

// Manager runs runs: a queue in creation order, each turn on a host (this
// process, at most MaxConcurrent at once, or a worker), each in its own
// workspace, every change of state checked and durable.
type Manager struct {
	cfg Config

	// mu covers the queue and the active turns, nothing else: run records
	// change through Store.UpdateRun, and no disk write waits under mu.
	mu      sync.Mutex
	queue   []queued
	active  map[string]*activeTurn
	here    int // active turns on this process
	wake    chan struct{}
	stopped atomic.Bool // the manager is stopping: finished runs are not queued again
	wg      sync.WaitGroup
	// resumable are the runs in flight at start whose turns go on on
	// workers: dispatch follows them before anything else.
	resumable []string
	observers []func(*factory.Run)
	extras    TurnExtras
	// dropped counts the status messages of turns past their bounds, by
	// attempt, until each turn ends.
	outMu   sync.Mutex
	dropped map[string]*runtime.Dropped

	// approvals are the turns waiting for a person's answer, by item.
	approvalMu sync.Mutex
	approvals  map[string][]chan struct{}
}

// activeTurn is a turn in flight: how to stop it, and where it runs.
type activeTurn struct {
	cancel context.CancelCauseFunc
	here   bool
}

// queued is a run waiting for its next turn, and where that turn may run.
type queued struct {
	id string
	// here: only on this process; worker: only on that worker.
	here   bool
	worker string
}

// NewManager returns a manager; Start runs it.
func NewManager(cfg Config) *Manager {
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 4
	}
	if cfg.DefaultIdleTimeout == 0 {
		cfg.DefaultIdleTimeout = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Unconfined || confine.ABI() == 0 {
		cfg.Confinement = nil
	} else if cfg.Confinement == nil {
		cfg.Confinement = &runtime.Confinement{}
	}
	if c := cfg.Confinement; c != nil && cfg.DataDir != "" && !slices.Contains(c.Hidden, cfg.DataDir) {
		c.Hidden = append(slices.Clone(c.Hidden), cfg.DataDir)
	}
	return &Manager{cfg: cfg, active: map[string]*activeTurn{}, wake: make(chan struct{}, 1)}
}

// SetTracer traces the runs' creations and turns from now on (before
// Start).
func (m *Manager) SetTracer(t *tracing.Tracer) { m.cfg.Tracer = t }

// Start reconciles the runs left in flight by the previous process with
// their hosts (recover), then executes queued runs until ctx ends; then it
// stops the turns in flight (those of this process end ERROR, retryable;
// those on workers go on) and returns when they have.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.recover(); err != nil {
		return err
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.dispatch(ctx)
	}()
	return nil
}

// Wait returns once the manager has stopped.
func (m *Manager) Wait() { m.wg.Wait() }

// RunDir is a run's folder on the control plane: its workspace, output
// folder and logs.
func (m *Manager) RunDir(id string) string { return filepath.Join(m.cfg.DataDir, "runs", id) }

// Workspace is a run's working directory on the control plane.
func (m *Manager) Workspace(id string) string { return filepath.Join(m.RunDir(id), "workspace") }

// OutputDir is a run's output folder ($FACTORY_OUTPUT_DIR) on the control
// plane: what a turn leaves there (or a worker sends back) becomes the
// run's artifacts.
func (m *Manager) OutputDir(id string) string { return filepath.Join(m.RunDir(id), "output") }

// enqueue queues a run for its next turn, once: a run queued already (by
// the start-up recovery and a create at the same moment, say) keeps its
// place.
func (m *Manager) enqueue(r *factory.Run) {
	q := m.placeOf(r)
	m.mu.Lock()
	if !slices.ContainsFunc(m.queue, func(e queued) bool { return e.id == r.ID }) {
		m.queue = append(m.queue, q)
	}
	m.mu.Unlock()
	m.wakeUp()
}

// placeOf is where a run's next turn may run: where its workspace is (a
// continued run's), where it names (a worker), this process for an
// environment whose agents run as another user (a worker could not keep
// that boundary), else anywhere.
func (m *Manager) placeOf(r *factory.Run) queued {
	q := queued{id: r.ID}
	switch {
	case m.cfg.Workers == nil || m.cfg.Environments[r.Environment].RunAs != nil:
		q.here = true
	case r.Worker != "" && r.Worker != legacyLocalWorker:
		q.worker = r.Worker
	case r.Turns > 0 && r.StartedAt != nil:
		q.here = true // the workspace is here
	default:
		q.worker = workerHost(r)
	}
	return q
}

// legacyLocalWorker is the in-process worker of earlier versions: its runs'
// workspaces are the control plane's own.
const legacyLocalWorker = "local"

// wakeUp tells dispatch to look at the queue and the free slots again.
func (m *Manager) wakeUp() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// dispatch starts queued runs, oldest first, each on a host that can take
// it now; a run that no host can take yet keeps its place, and those
// behind it may go.
func (m *Manager) dispatch(ctx context.Context) {
	var turns sync.WaitGroup
	defer turns.Wait()
	m.mu.Lock()
	for _, id := range m.resumable {
		m.launch(ctx, &turns, id, false, func(ctx context.Context, id string) { m.follow(ctx, id) })
	}
	m.resumable = nil
	m.mu.Unlock()
	for {
		m.mu.Lock()
		for i := 0; i < len(m.queue) && ctx.Err() == nil; {
			q := m.queue[i]
			here, ok := m.hostFor(q)
			if !ok {
				i++
				continue
			}
			m.queue = slices.Delete(m.queue, i, i+1)
			m.launch(ctx, &turns, q.id, here, func(ctx context.Context, id string) { m.execute(ctx, id, here) })
		}
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			m.stopped.Store(true)
			m.mu.Lock()
			for _, a := range m.active {
				a.cancel(runtime.ErrShutdown)
			}
			m.mu.Unlock()
			return
		case <-m.wake:
		}
	}
}

// hostFor says where a queued run's turn goes now: here (this process) or
// to the workers; ok false when it must wait. One turn of a run at a time:
// a run queued again while its last turn ends waits for that turn to
// leave. Called with mu held.
func (m *Manager) hostFor(q queued) (here, ok bool) {
	if _, busy := m.active[q.id]; busy {
		return false, false
	}
	room := m.here < m.cfg.MaxConcurrent
	switch {
	case q.here:
		return true, room
	case q.worker != "":
		return false, true
	case room && !m.cfg.NoLocal:
		return true, true
	}
	return false, m.cfg.NoLocal || m.cfg.WorkersReady != nil && m.cfg.WorkersReady()
}

// launch runs a turn as an active one; m.mu is held.
func (m *Manager) launch(ctx context.Context, turns *sync.WaitGroup, id string, here bool, run func(context.Context, string)) {
	// Not derived from ctx: on shutdown the cause must be ErrShutdown.
	turnCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	m.active[id] = &activeTurn{cancel: cancel, here: here}
	if here {
		m.here++
	}
	turns.Add(1)
	go func() {
		defer turns.Done()
		run(turnCtx, id)
		cancel(nil)
		m.mu.Lock()
		delete(m.active, id)
		if here {
			m.here--
		}
		m.mu.Unlock()
		m.wakeUp()
	}()
}

// DefaultEnvironment names the environment of runs that name none.
func (m *Manager) DefaultEnvironment() string { return m.cfg.DefaultEnvironment }

// HasEnvironment reports whether an environment exists.
func (m *Manager) HasEnvironment(name string) bool {
	_, ok := m.cfg.Environments[name]
	return ok
}

// HarnessEnvironment is the environment that runs a harness type: the
// server config's harnesses map, where oz defaults to the default
// environment. ok is false when no environment runs it.
func (m *Manager) HarnessEnvironment(harness string) (env string, ok bool) {
	env, ok = m.cfg.Harnesses[harness]
	if !ok && harness == factory.HarnessOz {
		env, ok = m.cfg.DefaultEnvironment, true
	}
	if ok && !m.HasEnvironment(env) {
		return env, false
	}
	return env, ok
}

// Counts returns how many runs wait in the queue and how many turns are in
// flight (here and on workers).
func (m *Manager) Counts() (queued, running int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.queue), len(m.active)
}

// AtCapacity reports whether a run created now waits behind the turns
// this process runs (MaxConcurrent) or other queued runs.
func (m *Manager) AtCapacity() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.here >= m.cfg.MaxConcurrent || len(m.queue) > 0
}

// OnFinished sets the hook told the state each turn ends in.
func (m *Manager) OnFinished(f func(state factory.RunState)) { m.cfg.Finished = f }

// EnvironmentInfo is an environment as the API lists it: its name and the
// kind of its executor, never its command or variables (they may hold
// credentials).
type EnvironmentInfo struct {
	Name     string
	Executor string // acp or exec
}

// EnvironmentList lists the environments, by name, with the kind of agent
// each runs (the same wherever its turns run).
func (m *Manager) EnvironmentList() []EnvironmentInfo {
	out := make([]EnvironmentInfo, 0, len(m.cfg.Environments))
	for name, env := range m.cfg.Environments {
		kind, _, _, ok := runtime.Describe(env.Executor)
		if !ok {
			kind = runtime.ExecutorExec
		}
		out = append(out, EnvironmentInfo{Name: name, Executor: kind})
	}
	slices.SortFunc(out, func(a, b EnvironmentInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// changed tells Config.Changed, then each observer, of a run's change.
func (m *Manager) changed(r *factory.Run) {
	if r == nil {
		return
	}
	if m.cfg.Changed != nil {
		m.cfg.Changed(r)
	}
	for _, o := range m.observers {
		o(r)
	}
}

// Observe adds a function told of every run whose state changed, after
// the change is durable, as Config.Changed is; it must not block. Call it
// before Start.
func (m *Manager) Observe(f func(r *factory.Run)) { m.observers = append(m.observers, f) }

// TurnExtras are what a turn of a run gets beside its own: more MCP
// servers (by name) and environment variables.
type TurnExtras func(r *factory.Run) (mcp map[string]json.RawMessage, env []string)

// Extend sets the function that gives each turn its extras (the Factory
// MCP server and its run token). Call it before Start.
func (m *Manager) Extend(f TurnExtras) { m.extras = f }

// logRun writes the server log's line for a run's change of state: one
// line for each, written here only.
func (m *Manager) logRun(r *factory.Run, msg string, more ...any) {
	args := []any{"run", r.ID, "state", string(r.State), "source", r.Source, "environment", r.Environment}
	if r.AutomationID != "" {
		args = append(args, "automation", r.AutomationID, "delivery", r.DeliveryID)
	}
	if r.TraceID != "" {
		args = append(args, "trace_id", r.TraceID)
	}
	m.cfg.Log.Info(msg, append(args, more...)...)
}

// logEnd writes the line for a turn's end: a warning when it did not
// succeed, with why.
func (m *Manager) logEnd(r *factory.Run, res runtime.Result) {
	if res.State == factory.StateSucceeded || res.State == factory.StateCancelled {
		m.logRun(r, "run finished", "result", string(res.State))
		return
	}
	args := []any{"run", r.ID, "state", string(r.State), "result", string(res.State), "message", res.Message}
	if r.AutomationID != "" {
		args = append(args, "automation", r.AutomationID, "delivery", r.DeliveryID)
	}
	if r.TraceID != "" {
		args = append(args, "trace_id", r.TraceID)
	}
	m.cfg.Log.Warn("run finished", args...)
}
