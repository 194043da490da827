package workers

import (
	"context"
	"fmt"
	"log/slog"
	neturl "net/url"
	"sync"
	"time"

	"factory"
	"factory/internal/runtime"
	"factory/internal/store"

	"github.com/nats-io/nats.go/jetstream"
)

// ControlPlane is serve's part: the NATS server (embedded, or a cluster of
// its own), the dispatcher (the run manager's host for turns on workers),
// and the registry. The control plane's own turns run in the run manager.
type ControlPlane struct {
	NATS     *Embedded // nil on a cluster of its own
	URL      string    // the NATS URL workers connect to
	Registry *Registry
	disp     *Dispatcher
	stop     func()

	readyMu sync.Mutex
	ready   bool
	readyAt time.Time
}

// Options of the control plane.
type Options struct {
	Listen string // the embedded NATS server's address
	// URL is a NATS cluster of its own to use instead (with JetStream),
	// Auth the control plane's credentials there.
	URL  string
	Auth Credentials
	// StoreKey encrypts the embedded server's JetStream store at rest.
	StoreKey string
	Lease    time.Duration // a quiet worker loses its run after this long
	// Claim records a worker's claim of a turn: the run manager's
	// (runs.Manager.Claim), which owns the run's state. It may be set
	// later, before the run manager starts, with SetClaim.
	Claim func(runID, attempt, worker string) error
}

// StartControlPlane starts the embedded NATS server (or connects to the
// cluster) and what runs on it.
func StartControlPlane(ctx context.Context, o Options, s *store.Store, dataDir string, log *slog.Logger) (*ControlPlane, error) {
	reg := &Registry{Store: s, External: o.URL != ""}
	var emb *Embedded
	url, auth := o.URL, o.Auth
	auth.User = ControlUser
	if o.URL == "" {
		var err error
		if emb, err = StartEmbedded(dataDir, o.Listen, &Accounts{Worker: reg.Lookup, WorkerByNkey: reg.ByNkey}, factory.NewUID("np_"), o.StoreKey); err != nil {
			return nil, err
		}
		url, auth = emb.URL, emb.Own
	}
	shutdown := func() {
		if emb != nil {
			emb.Shutdown()
		}
	}
	nc, err := Connect(url, auth, "factory control plane")
	if err != nil {
		shutdown()
		return nil, fmt.Errorf("connecting to NATS at %s: %w", redactURL(url), err)
	}
	js, err := jetstream.New(nc)
	if err == nil {
		err = Setup(ctx, js)
	}
	if err == nil {
		err = upgradeWorkers(ctx, js, s)
	}
	if err != nil {
		nc.Close()
		shutdown()
		return nil, fmt.Errorf("the workers' streams: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	disp := &Dispatcher{NC: nc, JS: js, Lease: o.Lease, Log: log, Claim: o.Claim, Allowed: reg.Allowed}
	if err := disp.Start(wctx); err != nil {
		cancel()
		nc.Close()
		shutdown()
		return nil, err
	}
	reg.JS, reg.URL, reg.Connected, reg.Activity = js, redactURL(url), disp.Ping, disp.Activity
	if emb != nil {
		reg.Connected = emb.Connected // the server knows its connections
		reg.Disconnect = emb.Disconnect
	}
	log.Info("workers", "nats", redactURL(url), "embedded", emb != nil, "lease", o.Lease)
	cp := &ControlPlane{NATS: emb, URL: redactURL(url), Registry: reg, disp: disp, stop: func() { cancel(); nc.Close(); shutdown() }}
	return cp, nil
}

// upgradeWorkers gives the workers registered before a version added to
// AddWorker (their object store, say) what it adds now.
func upgradeWorkers(ctx context.Context, js jetstream.JetStream, s *store.Store) error {
	ws, err := s.Workers()
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w.RevokedAt == nil {
			if err := AddWorker(ctx, js, w.Name); err != nil {
				return fmt.Errorf("worker %s: %w", w.Name, err)
			}
		}
	}
	return nil
}

// redactURL is a NATS URL without the user and password it may carry:
// what workers are told and logs say.
func redactURL(u string) string {
	p, err := neturl.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	p.User = nil
	return p.String()
}

// Stop stops the dispatcher and the NATS server.
func (cp *ControlPlane) Stop() { cp.stop() }

// Host is the run manager's host for turns on workers.
func (cp *ControlPlane) Host() *Dispatcher { return cp.disp }

// SetOwner sets what says whether a turn on the workers is live (the run
// manager's Owns): events of a turn nobody follows are held only for one
// that is.
func (cp *ControlPlane) SetOwner(owns func(runID, attempt string) bool) {
	cp.disp.mu.Lock()
	cp.disp.Owner = owns
	cp.disp.mu.Unlock()
}

// SetApprove sets what puts the workers' tool calls to a person (the run
// manager's ApproveFor): until then, each ask is answered Pending.
func (cp *ControlPlane) SetApprove(approve func(ctx context.Context, worker, runID, attempt string, req runtime.ApprovalRequest) (runtime.ApprovalAnswer, error)) {
	cp.disp.mu.Lock()
	cp.disp.Approve = approve
	cp.disp.mu.Unlock()
}

// SetClaim sets what records workers' claims (the run manager's Claim):
// until then, every claim is refused and its turn stays queued.
func (cp *ControlPlane) SetClaim(claim func(runID, attempt, worker string) error) {
	cp.disp.mu.Lock()
	cp.disp.Claim = claim
	cp.disp.mu.Unlock()
}

// Ready says whether a worker is connected to take runs that the control
// plane has no room for (a registered worker, not revoked, connected now).
// The answer is kept for a second: the run manager asks at each dispatch.
func (cp *ControlPlane) Ready() bool {
	cp.readyMu.Lock()
	defer cp.readyMu.Unlock()
	if time.Since(cp.readyAt) < time.Second {
		return cp.ready
	}
	cp.ready, cp.readyAt = false, time.Now()
	ws, err := cp.Registry.Store.Workers()
	if err != nil {
		return false
	}
	for _, w := range ws {
		if w.RevokedAt == nil && cp.Registry.Connected != nil && cp.Registry.Connected(w.Name) {
			cp.ready = true
			break
		}
	}
	return cp.ready
}
