package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"factory"

	"factory/internal/artifacts"
	"factory/internal/store"
)

// Environment is where runs execute: an executor and its limits
// (docs/spec/runtime.md).
type Environment struct {
	Executor Executor
	Timeout  time.Duration
	Env      []string // KEY=VALUE added to the agent's environment
	// RunAs, when set, is the user the agent runs as (the server must be
	// able to switch to it: root, or CAP_SETUID and CAP_SETGID). The
	// workspace becomes that user's; the rest of the data directory stays
	// out of its reach (docs/security.md).
	RunAs *syscall.Credential
}

// Config sets a Manager up.
type Config struct {
	Store              *store.Store
	DataDir            string // runs live in DataDir/runs/<run id>/workspace
	Environments       map[string]Environment
	DefaultEnvironment string
	MaxConcurrent      int // default 4
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
}

// Errors of the manager, for the API to map to statuses.
var (
	ErrUnknownEnvironment = errors.New("unknown environment")
	ErrNotFound           = errors.New("no such run")
	ErrTerminal           = errors.New("the run has ended")
)

// Manager runs runs: a queue in creation order, at most MaxConcurrent at
// once, each in its own workspace, every transition durable.
type Manager struct {
	cfg Config

	// mu covers the queue and the active runs, nothing else: run records
	// are changed through Store.UpdateRun, and no disk write waits under mu.
	mu      sync.Mutex
	queue   []string
	active  map[string]*activeRun
	wake    chan struct{}
	stopped atomic.Bool // the manager is stopping: finished runs are not queued again
	wg      sync.WaitGroup
	// resumable are the runs in progress at start whose turns go on
	// elsewhere (a Resumer's): dispatch follows them before anything else.
	resumable []string
}

type activeRun struct {
	cancel   context.CancelCauseFunc
	canceled bool
}

// errShutdown is the cause of a turn stopped because the server stopped.
var errShutdown = errors.New("the server stopped while the run was in progress")

// errInterrupted is the cause of a turn stopped by an interrupt: the run
// is BLOCKED until a follow-up continues it.
var errInterrupted = errors.New("interrupted")

// ErrShutdown is the cause of a turn stopped because the server stops.
var ErrShutdown = errShutdown

// ErrInterrupted is the cause an executor elsewhere (a worker) cancels a
// turn with, to stop it as an interrupt does: BLOCKED, not CANCELLED.
var ErrInterrupted = errInterrupted

// ErrNotLive is the error of an interrupt of a run with no turn in
// progress.
var ErrNotLive = errors.New("the run has no turn in progress")

// Interrupt stops a run's current turn without ending the run: the agent
// is asked to stop (ACP session/cancel; an exec agent's group gets
// SIGINT), and the run is BLOCKED until a follow-up continues it.
func (m *Manager) Interrupt(id string) error {
	r, err := m.cfg.Store.Run(id)
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotFound
	} else if err != nil {
		return err
	}
	m.mu.Lock()
	a, active := m.active[id]
	m.mu.Unlock()
	// A turn that has ended may not have left the active runs yet.
	if !active || r.State != factory.StateInProgress && r.State != factory.StateClaimed {
		return ErrNotLive
	}
	a.cancel(errInterrupted)
	return nil
}

// NewManager returns a manager; Start runs it.
func NewManager(cfg Config) *Manager {
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 4
	}
	if cfg.DefaultIdleTimeout == 0 {
		cfg.DefaultIdleTimeout = 10 * time.Minute
	}
	return &Manager{cfg: cfg, active: map[string]*activeRun{}, wake: make(chan struct{}, 1)}
}

// CreateRequest is a run to create.
type CreateRequest struct {
	// ID, when set, makes Create idempotent: a run with this ID that
	// exists already is returned as it is (automation runs derive their
	// ID from the delivery and the automation).
	ID string
	// ErrorOnUnknownEnvironment records a run whose environment does not
	// exist as ERROR, naming it, instead of refusing it (automation runs:
	// there is no caller to refuse).
	ErrorOnUnknownEnvironment            bool
	Prompt, Title, Environment, Source   string
	Config                               json.RawMessage
	Metadata                             map[string]string
	Creator                              *factory.Creator
	FactoryUID, AutomationID, DeliveryID string
	Attachments                          []AttachmentData
	IdleTimeout                          time.Duration
	// Skill, the parent's chain (ParentRunID first, the root last), the
	// conversation, the schedule and the trigger's URL, as the run shows
	// them.
	Skill, ConversationID, TriggerURL string
	Ancestors                         []string
	Schedule                          *factory.RunSchedule
	ScheduledAt                       *time.Time
	// Setup prepares the workspace of a factory agent's run; SetupFiles
	// are the bytes of its Files, by path in the workspace.
	Setup      *factory.RunSetup
	SetupFiles map[string][]byte
	// FailWith, when set, records the run as FAILED at once with this
	// status (an agent whose harness no environment runs).
	FailWith *factory.StatusMessage
}

// ErrAttachmentName is the error of an attachment name a workspace cannot
// hold as given.
var ErrAttachmentName = errors.New("attachment name")

// CheckAttachmentName accepts a name that the workspace holds as given: a
// plain file name (no folder, not . or ..), without control characters
// (NUL included), at most 255 bytes, and none of the names the workspace
// itself uses (PROMPT.md, attachments/): an attachment never overwrites
// the prompt.
func CheckAttachmentName(name string) error {
	switch {
	case name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\"):
		return fmt.Errorf("%w: %q is not a plain file name", ErrAttachmentName, name)
	case len(name) > 255:
		return fmt.Errorf("%w: %q is over 255 bytes", ErrAttachmentName, name)
	case strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return fmt.Errorf("%w: %q has a control character", ErrAttachmentName, name)
	case name == "PROMPT.md" || name == "attachments":
		return fmt.Errorf("%w: %q is reserved: the workspace uses it", ErrAttachmentName, name)
	}
	return nil
}

// AttachmentData is an attachment's name, type and content.
type AttachmentData struct {
	Name, MimeType string
	Data           []byte
}

// Start recovers runs left by the previous process, then executes queued
// runs until ctx ends; then it stops the runs in progress (they end ERROR,
// retryable) and returns when they have.
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

// recover: a run in progress when the server died has no process any more:
// it ends ERROR, retryable (a follow-up continues it). Queued runs are
// queued again, in creation order.
func (m *Manager) recover() error {
	runs, err := m.cfg.Store.RunsInState(factory.StateQueued, factory.StateClaimed, factory.StateInProgress)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if _, ok := m.cfg.Environments[r.Environment].Executor.(Resumer); ok && r.RemoteTurn != "" {
			m.resumable = append(m.resumable, r.ID) // its turn went on on a worker, or waits for one
			continue
		}
		if r.State != factory.StateQueued {
			if r.Process != nil && reap(*r.Process) {
				m.cfg.Log.Warn("killed the processes left by a run the server's end interrupted", "run", r.ID, "pgid", r.Process.PID)
			}
			if err := m.finish(r.ID, Result{State: factory.StateError, Message: errShutdown.Error() + "; send a follow-up to continue it"}, true); err != nil {
				return err
			}
			continue
		}
		// The API may already be creating runs: the queue is shared.
		m.mu.Lock()
		if !slices.Contains(m.queue, r.ID) {
			m.queue = append(m.queue, r.ID)
		}
		m.mu.Unlock()
	}
	return nil
}

// Workspace is a run's working directory.
func (m *Manager) Workspace(id string) string {
	return filepath.Join(m.cfg.DataDir, "runs", id, "workspace")
}

// Create stores a new run, QUEUED, with its attachments, in one synced
// batch, and queues it. Its workspace is laid out when it starts.
func (m *Manager) Create(req CreateRequest) (*factory.Run, error) {
	runs, err := m.CreateMany([]CreateRequest{req}, nil)
	if err != nil {
		return nil, err
	}
	return runs[0], nil
}

// CreateMany creates several runs in one synced batch, with extra writes
// of the caller's (an evaluated delivery's record and its removal from the
// queue): all of them are durable together, or none is.
func (m *Manager) CreateMany(reqs []CreateRequest, extra func(*store.Batch)) ([]*factory.Run, error) {
	b := m.cfg.Store.NewLogBatch()
	runs := make([]*factory.Run, 0, len(reqs))
	var queue []string
	for _, req := range reqs {
		r, fresh, err := m.prepare(b, req)
		if err != nil {
			b.Abort()
			return nil, err
		}
		runs = append(runs, r)
		if fresh && r.State == factory.StateQueued {
			queue = append(queue, r.ID)
		}
	}
	if extra != nil {
		extra(b)
	}
	if err := b.Commit(); err != nil {
		return nil, err
	}
	for _, r := range runs {
		m.logRun(r, "run created")
	}
	for _, id := range queue {
		m.enqueue(id)
	}
	return runs, nil
}

// prepare adds a new run's writes to a batch; an existing run with the
// request's ID is returned as it is (fresh is false).
func (m *Manager) prepare(b *store.Batch, req CreateRequest) (r *factory.Run, fresh bool, err error) {
	if req.ID != "" {
		if r, err := m.cfg.Store.Run(req.ID); err == nil {
			return r, false, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, false, err
		}
	}
	env := req.Environment
	if env == "" {
		env = m.cfg.DefaultEnvironment
	}
	_, known := m.cfg.Environments[env]
	if !known && !req.ErrorOnUnknownEnvironment {
		return nil, false, fmt.Errorf("%w %q", ErrUnknownEnvironment, env)
	}
	now := time.Now().UTC()
	id := req.ID
	if id == "" {
		id = factory.NewUID(factory.PrefixRun)
	}
	r = &factory.Run{ID: id, Title: req.Title, Prompt: req.Prompt, State: factory.StateQueued, CreatedAt: now, UpdatedAt: now,
		Config: req.Config, Environment: env, Source: req.Source, Metadata: req.Metadata,
		FactoryUID: req.FactoryUID, AutomationID: req.AutomationID, DeliveryID: req.DeliveryID, Creator: req.Creator,
		Skill: req.Skill, ConversationID: req.ConversationID, TriggerURL: req.TriggerURL, Ancestors: req.Ancestors,
		Schedule: req.Schedule, ScheduledAt: req.ScheduledAt, Setup: req.Setup}
	if err := putSetupFiles(b, id, req.Setup, req.SetupFiles); err != nil {
		return nil, false, err
	}
	if len(r.Ancestors) > 0 {
		r.ParentRunID = r.Ancestors[0]
	}
	if r.Title == "" {
		r.Title = TitleOf(req.Prompt)
	}
	seen := map[string]bool{}
	for _, a := range req.Attachments {
		name := a.Name
		if err := CheckAttachmentName(name); err != nil {
			return nil, false, err
		}
		if seen[name] {
			return nil, false, fmt.Errorf("%w: %q is given twice", ErrAttachmentName, name)
		}
		seen[name] = true
		b.PutRunAttachment(r.ID, name, a.Data)
		r.Attachments = append(r.Attachments, factory.Attachment{Name: name, MimeType: a.MimeType, Size: int64(len(a.Data))})
	}
	b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "created", State: factory.StateQueued})
	switch {
	case req.FailWith != nil:
		r.State, r.StatusMessage = factory.StateFailed, req.FailWith
		r.FinishedAt = &now
		b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "finished", State: factory.StateFailed, Message: req.FailWith.Message})
	case !known:
		msg := fmt.Sprintf("environment %q does not exist: the server's configuration defines none by that name", env)
		r.State, r.StatusMessage = factory.StateError, &factory.StatusMessage{Message: msg, ErrorCode: "unknown_environment"}
		r.FinishedAt = &now
		b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "finished", State: factory.StateError, Message: msg})
	}
	b.PutRun(r, nil)
	return r, true, nil
}

// layOut writes a run's workspace on its first turn: PROMPT.md, and the
// attachments beside it (agents read event-payload.json there) and in
// attachments/, byte for byte as they were given.
func (m *Manager) layOut(r *factory.Run, runAs *syscall.Credential) error {
	ws := m.Workspace(r.ID)
	if _, err := os.Stat(filepath.Join(ws, "PROMPT.md")); err == nil {
		return m.layOutNewAttachments(r, runAs)
	}
	if err := os.MkdirAll(filepath.Join(ws, "attachments"), 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(m.OutputDir(r.ID), 0o700); err != nil {
		return err
	}
	for _, a := range r.Attachments {
		data, err := m.cfg.Store.RunAttachment(r.ID, a.Name)
		if err != nil {
			return fmt.Errorf("attachment %s: %w", a.Name, err)
		}
		for _, p := range []string{filepath.Join(ws, a.Name), filepath.Join(ws, "attachments", a.Name)} {
			if err := os.WriteFile(p, data, 0o600); err != nil {
				return err
			}
		}
	}
	if err := m.layOutSetupFiles(r); err != nil {
		return err
	}
	// PROMPT.md last: its presence means the workspace is complete.
	if err := os.WriteFile(filepath.Join(ws, "PROMPT.md"), []byte(r.Prompt), 0o600); err != nil {
		return err
	}
	if runAs != nil {
		return m.handOver(ws, runAs)
	}
	return nil
}

// layOutNewAttachments writes the attachments follow-ups added since the
// workspace was laid out, as layOut writes the first ones. The agent has
// had the workspace to itself: every path is resolved inside it (a link it
// left cannot lead a write elsewhere) and no file is overwritten.
func (m *Manager) layOutNewAttachments(r *factory.Run, runAs *syscall.Credential) error {
	root, err := os.OpenRoot(m.Workspace(r.ID))
	if err != nil {
		return err
	}
	defer root.Close()
	for _, a := range r.Attachments {
		if _, err := root.Lstat(filepath.Join("attachments", a.Name)); err == nil {
			continue
		}
		data, err := m.cfg.Store.RunAttachment(r.ID, a.Name)
		if err != nil {
			return fmt.Errorf("attachment %s: %w", a.Name, err)
		}
		for _, p := range []string{filepath.Join("attachments", a.Name), a.Name} {
			err := writeNew(root, p, data, runAs)
			if p == a.Name && errors.Is(err, os.ErrExist) {
				continue // the agent has a file of that name: attachments/ holds it
			}
			if err != nil {
				return fmt.Errorf("attachment %s: %w", a.Name, err)
			}
		}
	}
	return nil
}

// writeNew writes a file that must not exist yet, inside root, and gives
// it to the agent's user.
func writeNew(root *os.Root, name string, data []byte, runAs *syscall.Credential) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && runAs != nil {
		err = root.Lchown(name, int(runAs.Uid), int(runAs.Gid))
	}
	return err
}

// handOver makes a workspace the agent user's, and the folders above it
// (the data directory, runs/, the run's) passable but not readable by
// others: the agent reaches its workspace by path, and no file of the
// server's (keys, the store, other runs) is readable to it, as every one
// of them is the server user's with mode 0600 or 0700.
func (m *Manager) handOver(ws string, runAs *syscall.Credential) error {
	for _, dir := range []string{m.cfg.DataDir, filepath.Join(m.cfg.DataDir, "runs"), filepath.Dir(ws)} {
		if err := os.Chmod(dir, 0o711); err != nil {
			return err
		}
	}
	out := filepath.Join(filepath.Dir(ws), "output")
	if err := os.Lchown(out, int(runAs.Uid), int(runAs.Gid)); err != nil {
		return err
	}
	return filepath.WalkDir(ws, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(runAs.Uid), int(runAs.Gid))
	})
}

// TitleOf is the title of a run given none: its prompt's first line,
// without Markdown heading marks, at most 80 bytes.
func TitleOf(prompt string) string {
	line := strings.TrimSpace(prompt)
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimLeft(line, "# ")
	if len(line) > 80 {
		line = line[:77] + "..."
	}
	if line == "" {
		return "Untitled run"
	}
	return line
}

// enqueue queues a run for its next turn, once: a run queued already (by
// the start-up recovery and a create at the same moment, say) keeps its
// place.
func (m *Manager) enqueue(id string) {
	m.mu.Lock()
	if !slices.Contains(m.queue, id) {
		m.queue = append(m.queue, id)
	}
	m.mu.Unlock()
	m.wakeUp()
}

// nextQueued takes the oldest queued run that has no turn in progress (a
// run queued again while its last turn ends waits for that turn to leave:
// one turn of a run at a time, and each tracked). Called with mu held.
func (m *Manager) nextQueued() (string, bool) {
	for i, id := range m.queue {
		if _, busy := m.active[id]; !busy {
			m.queue = slices.Delete(m.queue, i, i+1)
			return id, true
		}
	}
	return "", false
}

// wakeUp tells dispatch to look at the queue and the free slots again.
func (m *Manager) wakeUp() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// dispatch starts queued runs, oldest first, while slots are free.
func (m *Manager) dispatch(ctx context.Context) {
	var turns sync.WaitGroup
	defer turns.Wait()
	m.mu.Lock()
	for _, id := range m.resumable {
		m.launch(ctx, &turns, id, m.resume)
	}
	m.resumable = nil
	m.mu.Unlock()
	for {
		m.mu.Lock()
		for len(m.active) < m.cfg.MaxConcurrent && ctx.Err() == nil {
			id, ok := m.nextQueued()
			if !ok {
				break
			}
			m.launch(ctx, &turns, id, m.execute)
		}
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			m.stopped.Store(true)
			m.mu.Lock()
			for _, a := range m.active {
				a.cancel(errShutdown)
			}
			m.mu.Unlock()
			return
		case <-m.wake:
		}
	}
}

// launch runs a turn (execute, or resume) as an active run; m.mu is held.
func (m *Manager) launch(ctx context.Context, turns *sync.WaitGroup, id string, run func(context.Context, string)) {
	// Not derived from ctx: on shutdown the cause must be errShutdown.
	turnCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	m.active[id] = &activeRun{cancel: cancel}
	turns.Add(1)
	go func() {
		defer turns.Done()
		run(turnCtx, id)
		cancel(nil)
		m.mu.Lock()
		delete(m.active, id)
		m.mu.Unlock()
		m.wakeUp()
	}()
}

// resume follows a turn that went on elsewhere while the server was down,
// and records how it ended.
func (m *Manager) resume(ctx context.Context, id string) {
	r, err := m.cfg.Store.Run(id)
	if err != nil {
		m.cfg.Log.Error("resuming a run", "run", id, "err", err)
		return
	}
	env := m.cfg.Environments[r.Environment]
	turn := Turn{RunID: r.ID, Workspace: m.Workspace(r.ID), OutputDir: m.OutputDir(r.ID)}
	res, ok := env.Executor.(Resumer).Resume(ctx, r, turn, func(e Event) { m.report(id, e) })
	if !ok {
		res = Result{State: factory.StateError, Message: errShutdown.Error() + "; send a follow-up to continue it"}
	}
	m.cfg.Log.Info("followed a run again after a restart", "run", id, "state", res.State)
	m.turnEnded(ctx, id, res)
}

// execute runs one turn of a run and records how it ended.
func (m *Manager) execute(ctx context.Context, id string) {
	r, turn, err := m.start(id)
	if err != nil {
		m.cfg.Log.Error("starting a run", "run", id, "err", err)
		return
	}
	if r == nil {
		return // cancelled while queued
	}
	env := m.cfg.Environments[r.Environment]
	firstTurn := r.Turns == 1
	if err := m.layOut(r, env.RunAs); err != nil {
		if err := m.finish(id, Result{State: factory.StateError, Message: "preparing the workspace: " + err.Error()}, true); err != nil {
			m.cfg.Log.Error("recording the end of a run", "run", id, "err", err)
		}
		return
	}
	if res, ok := m.prepareTurn(ctx, r, &turn, env, firstTurn); !ok {
		if err := m.finish(id, res, res.State == factory.StateError); err != nil {
			m.cfg.Log.Error("recording the end of a run", "run", id, "err", err)
		}
		return
	}
	res := env.Executor.Run(ctx, turn, func(e Event) { m.report(id, e) })
	m.turnEnded(ctx, id, res)
}

// turnEnded records how a turn ended; a turn that goes on elsewhere while
// the server stops (an empty State) is left in progress, for Resume.
func (m *Manager) turnEnded(ctx context.Context, id string, res Result) {
	if res.State == "" {
		m.cfg.Log.Info("the server stops; the run goes on on its worker", "run", id)
		return
	}
	if res.Stderr != "" {
		// The end of the agent's stderr (bounded by the executor), beside
		// the workspace, for diagnosis: the last turn's wins.
		_ = os.WriteFile(filepath.Join(filepath.Dir(m.Workspace(id)), "agent-stderr.log"), []byte(res.Stderr), 0o600)
	}
	if cause := context.Cause(ctx); errors.Is(cause, errShutdown) {
		res = Result{State: factory.StateError, Message: errShutdown.Error() + "; send a follow-up to continue it", Stderr: res.Stderr}
	}
	if err := m.finish(id, res, res.State == factory.StateError); err != nil {
		m.cfg.Log.Error("recording the end of a run", "run", id, "err", err)
	}
}

// prepareTurn gives a turn its environment (the environment's, the agent's
// settings, the secrets granted to it) and, before a run's first turn,
// runs its runner's setup commands. ok false ends the run with res.
func (m *Manager) prepareTurn(ctx context.Context, r *factory.Run, turn *Turn, env Environment, firstTurn bool) (res Result, ok bool) {
	granted, res, ok := m.grants(r.Setup)
	if !ok {
		return res, false
	}
	turn.Timeout, turn.Env, turn.RunAs = env.Timeout, slices.Concat(env.Env, setupEnv(r.Setup), granted), env.RunAs
	turn.WorkerHost = workerHost(r)
	if r.Setup != nil {
		turn.MCPServers = r.Setup.MCPServers
	}
	if _, remote := env.Executor.(Resumer); remote {
		// The workspace is the worker's: the setup runs there.
		turn.Setup, turn.SetupNow = r.Setup, firstTurn
		return Result{}, true
	}
	if !firstTurn {
		return Result{}, true
	}
	return m.runSetup(ctx, r, *turn, func(e Event) { m.report(r.ID, e) })
}

// workerHost is the worker a run names: its config's worker_host, else
// its agent's workerHost; warp (the product's own) names none.
func workerHost(r *factory.Run) string {
	var cfg struct {
		Host string `json:"worker_host"`
	}
	_ = json.Unmarshal(r.Config, &cfg)
	host := cfg.Host
	if host == "" && r.Setup != nil {
		host = r.Setup.WorkerHost
	}
	if host == "warp" {
		return ""
	}
	return host
}

// OutputDir is a run's output folder ($FACTORY_OUTPUT_DIR), beside its
// workspace so that a repository checked out there does not see it.
func (m *Manager) OutputDir(id string) string {
	return filepath.Join(filepath.Dir(m.Workspace(id)), "output")
}

// start moves a queued run to INPROGRESS for its next turn, taking the
// oldest pending follow-up as the turn's message. A run that is no longer
// queued (cancelled meanwhile) gives a nil run.
func (m *Manager) start(id string) (*factory.Run, Turn, error) {
	var turn Turn
	started := false
	r, err := m.cfg.Store.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) error {
		if r.State != factory.StateQueued {
			return store.ErrNoChange
		}
		follow, err := m.cfg.Store.FollowUps(id)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		ws := m.Workspace(r.ID)
		turn = Turn{RunID: r.ID, Workspace: ws, Prompt: r.Prompt, PromptFile: filepath.Join(ws, "PROMPT.md"),
			AttachmentsDir: filepath.Join(ws, "attachments"), OutputDir: m.OutputDir(r.ID), IdleTimeout: m.idleTimeout(r),
			Started: func(pid int) { m.recordProcess(id, pid) }}
		if r.Turns++; r.Turns > 1 && len(follow) > 0 {
			// A continued run: the oldest pending follow-up is this turn's.
			turn.FollowUp = follow[0].Message
			b.DropFollowUp(follow[0].Key)
		}
		r.UpdatedAt = now
		event := factory.RunEvent{Time: now, Kind: "started", State: factory.StateInProgress, Message: turn.FollowUp}
		if _, remote := m.cfg.Environments[r.Environment].Executor.(Resumer); remote {
			// Handed to a worker: QUEUED until one claims it (phase).
			turn.Attempt = factory.NewUID("at_")
			r.RemoteTurn = turn.Attempt
			event.Kind, event.State = "dispatched", factory.StateQueued
		} else {
			r.State = factory.StateInProgress
			if r.StartedAt == nil {
				r.StartedAt = &now
			}
		}
		b.AddRunEvent(r, event)
		started = true
		return nil
	})
	if err != nil || !started {
		return nil, turn, err
	}
	if turn.Attempt != "" {
		m.logRun(r, "run queued for a worker")
	} else {
		m.logRun(r, "run started")
	}
	return r, turn, nil
}

func (m *Manager) idleTimeout(r *factory.Run) time.Duration {
	var cfg struct {
		Idle int `json:"idle_timeout_minutes"`
	}
	if json.Unmarshal(r.Config, &cfg) == nil && cfg.Idle > 0 {
		return time.Duration(cfg.Idle) * time.Minute
	}
	return m.cfg.DefaultIdleTimeout
}

// report records a status message of a run in progress. Messages are
// written without waiting for the disk: a crash loses the last few, never
// a state.
func (m *Manager) report(id string, e Event) {
	if e.Phase != "" {
		m.phase(id, e)
		return
	}
	_, err := m.cfg.Store.UpdateRun(id, false, func(r *factory.Run, b *store.Batch) error {
		r.StatusMessage = &factory.StatusMessage{Message: e.Message}
		r.UpdatedAt = e.Time
		b.AddRunEvent(r, factory.RunEvent{Time: e.Time, Kind: "message", Message: e.Message})
		return nil
	})
	if err != nil {
		m.cfg.Log.Error("recording a status message", "run", id, "err", err)
	}
}

// phase records a step of a turn that runs on a worker: QUEUED → CLAIMED
// when one took it (the run's executor), → INPROGRESS when its agent
// started. A step of a turn that is not the run's current one changes
// nothing.
func (m *Manager) phase(id string, e Event) {
	changed := false
	r, err := m.cfg.Store.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) error {
		now := time.Now().UTC()
		switch {
		case e.Phase == PhaseClaimed && r.State == factory.StateQueued && r.RemoteTurn != "":
			r.State, r.Worker, r.ClaimedTurn = factory.StateClaimed, e.Worker, r.RemoteTurn
			b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "claimed", State: factory.StateClaimed, Message: "claimed by worker " + e.Worker})
		case e.Phase == PhaseStarted && r.State == factory.StateClaimed:
			r.State = factory.StateInProgress
			if r.StartedAt == nil {
				r.StartedAt = &now
			}
			b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "started", State: factory.StateInProgress})
		default:
			return store.ErrNoChange
		}
		r.UpdatedAt, changed = now, true
		return nil
	})
	switch {
	case err != nil:
		m.cfg.Log.Error("recording a run's step", "run", id, "step", e.Phase, "err", err)
	case changed && e.Phase == PhaseClaimed:
		m.logRun(r, "run claimed", "worker", r.Worker)
	case changed:
		m.logRun(r, "run started", "worker", r.Worker)
	}
}

// finish records a turn's end. A run with pending follow-ups goes back to
// the queue for its next turn.
func (m *Manager) finish(id string, res Result, retryable bool) error {
	requeue := false
	r, err := m.cfg.Store.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) (err error) {
		requeue, err = m.ended(r, b, res, retryable)
		return err
	})
	if err != nil {
		return err
	}
	m.logEnd(r, res)
	if m.cfg.Finished != nil {
		m.cfg.Finished(res.State)
	}
	if requeue {
		m.enqueue(id)
	}
	return nil
}

// ended changes a run, within an UpdateRun, to the end of its turn, and
// says whether pending follow-ups queue it again.
func (m *Manager) ended(r *factory.Run, b *store.Batch, res Result, retryable bool) (requeue bool, err error) {
	now := time.Now().UTC()
	r.State, r.UpdatedAt = res.State, now
	r.FinishedAt = &now
	r.Process, r.RemoteTurn = nil, "" // no turn is in flight any more
	r.StatusMessage = &factory.StatusMessage{Message: res.Message, Retryable: retryable, ErrorCode: res.Code}
	if r.StatusMessage.ErrorCode == "" {
		switch res.State {
		case factory.StateError:
			r.StatusMessage.ErrorCode = CodeInternal
		case factory.StateFailed:
			r.StatusMessage.ErrorCode = CodeAgentProcessFailed
		}
	}
	m.collectArtifacts(r, b, res.Links, now)
	b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "finished", State: res.State, Message: res.Message})
	pending, err := m.cfg.Store.FollowUps(r.ID)
	if err != nil {
		return false, err
	}
	requeue = len(pending) > 0 && res.State != factory.StateCancelled && !m.stopped.Load()
	if requeue {
		r.State = factory.StateQueued
	}
	return requeue, nil
}

// collectArtifacts adds what the turn produced to the run, in the batch
// that ends the turn: the output folder's files and manifest, and the
// links the executor saw. What cannot be taken is said on the timeline.
func (m *Manager) collectArtifacts(r *factory.Run, b *store.Batch, links []factory.Artifact, now time.Time) {
	seen := artifacts.Seen{Digests: r.ArtifactDigests, Count: len(r.Artifacts), Bytes: r.ArtifactBytes}
	found, problems := artifacts.Collect(m.OutputDir(r.ID), seen, now)
	for _, l := range links {
		l.CreatedAt = now
		found = append(found, artifacts.Found{Artifact: l, Key: string(l.Type) + ":" + l.Data.URL})
	}
	for _, f := range found {
		if _, dup := r.ArtifactDigests[f.Key]; dup && f.Digest == "" || len(r.Artifacts) >= artifacts.MaxPerRun {
			continue
		}
		if r.ArtifactDigests == nil {
			r.ArtifactDigests = map[string]string{}
		}
		r.ArtifactDigests[f.Key] = f.Digest
		r.ArtifactBytes += int64(len(f.Bytes))
		r.Artifacts = append(r.Artifacts, f.Artifact)
		b.PutArtifact(r.ID, f.Artifact, f.Bytes)
	}
	for _, p := range problems {
		b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "message", Message: "artifacts: " + p})
	}
}

// Cancel stops a queued or running run: it ends CANCELLED, and no process
// of it is left. A run that has ended answers ErrTerminal.
func (m *Manager) Cancel(id string) (*factory.Run, error) {
	m.mu.Lock()
	a, active := m.active[id]
	queued := slices.Index(m.queue, id)
	if queued >= 0 {
		m.queue = slices.Delete(m.queue, queued, queued+1)
	}
	m.mu.Unlock()
	var turn *activeRun
	r, err := m.cfg.Store.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) error {
		if r.State.Terminal() {
			return fmt.Errorf("%w: it is %s", ErrTerminal, r.State)
		}
		if active && (r.State == factory.StateInProgress || r.RemoteTurn != "") {
			turn = a // the turn ends CANCELLED and records it (a worker's, queued or claimed, too)
			return store.ErrNoChange
		}
		_, err := m.ended(r, b, Result{State: factory.StateCancelled, Message: "cancelled"}, false)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if turn != nil {
		turn.cancel(context.Canceled)
		return r, nil
	}
	m.logRun(r, "run finished", "result", string(factory.StateCancelled))
	if m.cfg.Finished != nil {
		m.cfg.Finished(factory.StateCancelled)
	}
	return r, nil
}

// FollowUp sends a message to a run. During a turn (or while queued) it
// waits for the next turn; a run that has ended is continued: it goes back
// to QUEUED with the message as its next turn. Several keep their order.
func (m *Manager) FollowUp(id, message string) (*factory.Run, error) {
	r, _, err := m.SendFollowUp(id, message, nil)
	return r, err
}

// Follow-up outcomes (the platform API's): queued for the run's next turn,
// or continuing a run that had ended. (ACP has no input during a turn, so
// a follow-up never reaches a live session.)
const (
	OutcomeQueuedPrompt     = "queued_prompt"
	OutcomeHandoffExecution = "handoff_execution"
)

// FollowUpAnswer is what a follow-up became: its ID (derived from the run
// and its place in the timeline) and its outcome.
type FollowUpAnswer struct {
	ID      string `json:"followup_id"`
	Outcome string `json:"outcome"`
}

// SendFollowUp is FollowUp, saying what the follow-up became; files are
// attached to the run (a name it has already is refused) and laid out in
// its workspace before its next turn.
func (m *Manager) SendFollowUp(id, message string, files []AttachmentData) (*factory.Run, FollowUpAnswer, error) {
	requeue := false
	var ans FollowUpAnswer
	r, err := m.cfg.Store.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) error {
		now := time.Now().UTC()
		for _, f := range files {
			if err := CheckAttachmentName(f.Name); err != nil {
				return err
			}
			if slices.ContainsFunc(r.Attachments, func(a factory.Attachment) bool { return a.Name == f.Name }) {
				return fmt.Errorf("%w: the run has an attachment %q already", ErrAttachmentName, f.Name)
			}
			b.PutRunAttachment(r.ID, f.Name, f.Data)
			r.Attachments = append(r.Attachments, factory.Attachment{Name: f.Name, MimeType: f.MimeType, Size: int64(len(f.Data))})
		}
		ans.ID = factory.DerivedID("fu_", id, strconv.Itoa(r.Events))
		b.QueueFollowUp(id, r.Events, message) // numbered after everything before it
		b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "followup", Message: message})
		requeue = r.State.Terminal() || r.State == factory.StateBlocked
		ans.Outcome = OutcomeQueuedPrompt
		if r.State.Terminal() {
			ans.Outcome = OutcomeHandoffExecution
		}
		if requeue {
			r.State, r.FinishedAt = factory.StateQueued, nil
		}
		r.UpdatedAt = now
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, ans, ErrNotFound
	}
	if err != nil {
		return nil, ans, err
	}
	if requeue {
		m.enqueue(id)
	}
	return r, ans, nil
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

// Counts returns how many runs wait in the queue and how many run now.
func (m *Manager) Counts() (queued, running int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.queue), len(m.active)
}

// OnFinished sets the hook told the state each turn ends in.
func (m *Manager) OnFinished(f func(state factory.RunState)) { m.cfg.Finished = f }

// recordProcess records, durably, the agent process group of a run's turn,
// so that the next start can kill what a crash leaves of it.
func (m *Manager) recordProcess(id string, pid int) {
	ref := ProcessOf(pid)
	_, err := m.cfg.Store.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) error {
		r.Process = &ref
		return nil
	})
	if err != nil {
		m.cfg.Log.Error("recording a run's process", "run", id, "err", err)
	}
}

// logRun writes the server log's line for a run's change of state.
func (m *Manager) logRun(r *factory.Run, msg string, more ...any) {
	args := []any{"run", r.ID, "state", string(r.State), "source", r.Source, "environment", r.Environment}
	if r.AutomationID != "" {
		args = append(args, "automation", r.AutomationID, "delivery", r.DeliveryID)
	}
	m.cfg.Log.Info(msg, append(args, more...)...)
}

// logEnd writes the line for a turn's end: a warning when it did not
// succeed, with why.
func (m *Manager) logEnd(r *factory.Run, res Result) {
	if res.State == factory.StateSucceeded || res.State == factory.StateCancelled {
		m.logRun(r, "run finished", "result", string(res.State))
		return
	}
	args := []any{"run", r.ID, "state", string(r.State), "result", string(res.State), "message", res.Message}
	if r.AutomationID != "" {
		args = append(args, "automation", r.AutomationID, "delivery", r.DeliveryID)
	}
	m.cfg.Log.Warn("run finished", args...)
}

// EnvironmentInfo is an environment as the API lists it: its name and the
// kind of its executor, never its command or variables (they may hold
// credentials).
type EnvironmentInfo struct {
	Name     string
	Executor string // acp or exec
}

// EnvironmentList lists the environments, by name.
func (m *Manager) EnvironmentList() []EnvironmentInfo {
	out := make([]EnvironmentInfo, 0, len(m.cfg.Environments))
	for name, env := range m.cfg.Environments {
		kind := "exec"
		if _, ok := env.Executor.(*ACPExecutor); ok {
			kind = "acp"
		}
		out = append(out, EnvironmentInfo{Name: name, Executor: kind})
	}
	slices.SortFunc(out, func(a, b EnvironmentInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// AtCapacity reports whether a run created now waits behind
// MaxConcurrent runs.
func (m *Manager) AtCapacity() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.active) >= m.cfg.MaxConcurrent || len(m.queue) > 0
}
