// Package foreman runs a factory's work (docs/spec/foreman.md): tasks
// moving through stages, a foreman's agents dispatching agents as child
// runs, and people in the loop through the inbox. The HTTP API and the
// Factory MCP server call it; it calls the run manager to create and
// continue runs, and watches every run's changes to keep tasks, waiting
// dispatches and the inbox in step with them.
package foreman

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"factory"
	"factory/internal/runs"
	"factory/internal/store"
)

// Config is what the foreman works with.
type Config struct {
	Store *store.Store
	Runs  *runs.Manager
	Log   *slog.Logger
	// URL is the server's base URL as a run's agent reaches it: the
	// Factory MCP server is offered there.
	URL func() string
	// Key signs run tokens; a server keeps it in its store.
	Key []byte
	// Fire, when set, fires the automations of a factory on one of the
	// factory provider's events (a task's stage changed).
	Fire func(f *factory.Factory, ev *factory.ProviderEvent, payload []byte)
}

// Foreman is the service of tasks, orchestration and the inbox.
type Foreman struct {
	cfg Config
	// mu serialises writes of tasks and inbox items (read, change,
	// write); runs change through the run manager.
	mu sync.Mutex
	// waiting are dispatches waiting for their child's end, by child run.
	wmu     sync.Mutex
	waiting map[string][]chan *factory.Run
	// work counts what runs off the run manager's path (a run's end), so
	// that Drain can let it finish before the store closes.
	work sync.WaitGroup
}

// Drain waits for the work a run's change started to finish.
func (f *Foreman) Drain() { f.work.Wait() }

// New returns a foreman and has it observe the run manager's runs, and
// offer every run of a factory its Factory MCP server.
func New(cfg Config) *Foreman {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	f := &Foreman{cfg: cfg, waiting: map[string][]chan *factory.Run{}}
	if cfg.Runs != nil {
		cfg.Runs.Observe(f.runChanged)
		cfg.Runs.Extend(f.turnExtras)
	}
	return f
}

// MCPPath is where the Factory MCP server is served.
const MCPPath = "/v1/mcp/factory"

// turnExtras offers a factory's run its Factory MCP server, with a token
// of its own: as an MCP server of its agent, and in its environment for
// agents that are plain commands.
func (f *Foreman) turnExtras(r *factory.Run) (map[string]json.RawMessage, []string) {
	if r.FactoryUID == "" || f.cfg.URL == nil || f.cfg.URL() == "" {
		return nil, nil
	}
	url := strings.TrimRight(f.cfg.URL(), "/") + MCPPath
	tok := f.RunToken(r.ID)
	srv, _ := json.Marshal(map[string]any{"url": url, "headers": map[string]string{"Authorization": "Bearer " + tok}})
	return map[string]json.RawMessage{"factory": srv}, []string{"FACTORY_MCP_URL=" + url, "FACTORY_RUN_TOKEN=" + tok}
}

// runTokenPrefix starts every run token, so that one is told from an API
// key at a glance (and by secret scanners).
const runTokenPrefix = "frt_"

// RunToken is a run's token for the Factory MCP server: the run's ID and
// a MAC of it under the server's key. It is valid while the run has not
// ended (Verify reads the run).
func (f *Foreman) RunToken(runID string) string {
	return runTokenPrefix + runID + "." + f.mac(runID)
}

func (f *Foreman) mac(runID string) string {
	h := hmac.New(sha256.New, f.cfg.Key)
	h.Write([]byte("factory run token\x00" + runID))
	return factory.IDEncoding.EncodeToString(h.Sum(nil))
}

// IsRunToken reports whether a bearer token is a run token (not an API
// key), without checking it.
func IsRunToken(tok string) bool { return strings.HasPrefix(tok, runTokenPrefix) }

// ErrBadToken is the error of a run token that is not one, or whose run
// has ended.
var ErrBadToken = errors.New("invalid run token")

// VerifyRunToken returns the run a token belongs to, if the token is
// genuine and the run has not ended.
func (f *Foreman) VerifyRunToken(tok string) (*factory.Run, error) {
	rest, ok := strings.CutPrefix(tok, runTokenPrefix)
	i := strings.LastIndexByte(rest, '.')
	if !ok || i <= 0 || len(f.cfg.Key) == 0 {
		return nil, ErrBadToken
	}
	id, mac := rest[:i], rest[i+1:]
	if !hmac.Equal([]byte(mac), []byte(f.mac(id))) {
		return nil, ErrBadToken
	}
	r, err := f.cfg.Store.Run(id)
	if err != nil {
		return nil, ErrBadToken
	}
	if r.State.Terminal() {
		return nil, fmt.Errorf("%w: run %s has ended (%s)", ErrBadToken, r.ID, r.State)
	}
	return r, nil
}

// runChanged keeps tasks, waiting dispatches and the inbox in step with a
// run: a work item's root run gets its task, an ended child answers the
// dispatch that waits for it (or its parent hears of it as a follow-up),
// an ended run's open inbox items are resolved, and a task's cancelled
// top-level run cancels the task.
func (f *Foreman) runChanged(r *factory.Run) {
	if r.FactoryUID == "" {
		return
	}
	if r.ParentRunID == "" && r.Origin != nil && r.Origin.WorkItem != "" && r.Turns == 0 {
		if _, err := f.taskForWorkItem(r); err != nil {
			f.cfg.Log.Error("creating the task of a work item", "run", r.ID, "err", err)
		}
	}
	if !r.State.Terminal() && r.State != factory.StateBlocked {
		return
	}
	if r.State.Terminal() || r.Asking == nil {
		f.work.Go(func() { f.ended(r) }) // off the manager's path: it may write, and send follow-ups
	}
}

// ended does what a run's end asks for (runChanged).
func (f *Foreman) ended(r *factory.Run) {
	taken := f.wake(r)
	if r.ParentRunID != "" && r.Source == factory.SourceOrchestration && !taken {
		f.tellParent(r)
	}
	if r.State.Terminal() {
		if err := f.resolveItemsOf(r); err != nil {
			f.cfg.Log.Error("resolving a run's inbox items", "run", r.ID, "err", err)
		}
	}
	if r.ParentRunID == "" {
		f.rootEnded(r)
	}
}

// now is the time, in UTC.
func now() time.Time { return time.Now().UTC() }
