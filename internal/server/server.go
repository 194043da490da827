// Package server is the factory server: one HTTP listener for the API, and
// one runner per factory that keeps it reconciled from its source.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"factory/internal/foreman"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"factory"
	"factory/internal/automations"
	"factory/internal/backup"
	"factory/internal/codehost"
	"factory/internal/ingress"
	"factory/internal/measure"
	"factory/internal/problem"
	"factory/internal/reconciler"
	"factory/internal/runs"
	"factory/internal/schedules"
	"factory/internal/service"
	"factory/internal/store"
	"factory/internal/tracing"
	"factory/internal/workers"
)

// FactorySource is one factory the server reconciles.
type FactorySource struct {
	Name   string
	Source reconciler.Source
	// Watch, when set, signals that the source may have changed (a watched
	// directory). Interval is then a safety-net resync.
	Watch func(ctx context.Context) (<-chan struct{}, error)
	// Interval between polls (git) or resyncs (watched directories).
	Interval time.Duration
}

// Config is what the server runs.
type Config struct {
	PublicURL string
	// Workers, when set, is the registry of workers (docs/spec/workers.md):
	// /v1/admin/workers answers through it.
	Workers   *workers.Registry
	Factories []FactorySource
	// Ingress limits; zero values take the seed's (ingress.Config).
	IngressPerMinute, IngressFailedAuthPerMinute, IngressRejectedPerMinute int
	IngressMaxBody                                                         int64
	// Runs executes runs; with it, accepted deliveries start the runs of
	// the automations they match.
	Runs *runs.Manager
	// MetricsListener, when set, serves /metrics without an API key (for a
	// scraper on a private address). On the main listener /metrics needs
	// a read (or admin) key, as the webhooks do: it lists every webhook's
	// UID, which is its ingress URL.
	MetricsListener net.Listener
	// Schedules bound the schedules: how often one may fire, how many a
	// factory and the Agents API may hold (zero fields: the defaults).
	Schedules factory.ScheduleLimits
	// CodeHosts, when set, are the code hosts: pull requests on a
	// factory's git source get a definition check (CheckName; default
	// warp/factory-config), and a paths filter on a pull request event
	// reads the files the pull request changes.
	CodeHosts *codehost.Hosts
	CheckName string
	// EgressRanges are the address ranges outbound traffic comes from
	// (networking.egressRanges, canonical): GET /v1/networking/egress-ranges.
	EgressRanges []string
	// Models are the models each environment offers, and DefaultModel the
	// configured default (environments.<name>.models, runtime.defaultModel):
	// GET /v1/agent/models.
	Models       map[string][]Model
	DefaultModel string
	// PushSecret, when set, names the managed secret of the push receiver
	// (POST /hooks/push): a git host's push notification signed or carrying
	// it syncs the pushed factories at once.
	PushSecret string
	// Backups, when set, is the schedule of backups (docs/operations.md).
	Backups *backup.Schedule
	// Version is the binary's version, recorded in backups.
	Version string
	// Talkback, when set, is the factories' chats and trackers: Teams
	// activities are received at /hooks/teams/<factory uid>.
	Talkback Talkback
	// Notify, when set, sends the run-status webhooks: its sender runs
	// with the server, its delivery log is served under /v1/notifications.
	Notify *Notifier
	// Gateway, when set, is the model gateway (docs/harnesses.md), served
	// at /v1/gateway/: it authenticates its callers by their run's token.
	Gateway http.Handler
	// Tracer, when set, traces deliveries into their runs (docs/server.md,
	// Tracing): the ingress request, its evaluation, the runs' creations
	// and turns. Nil: tracing is off.
	Tracer *tracing.Tracer
}

// Server serves the API and reconciles factories.
type Server struct {
	cfg     Config
	store   *store.Store
	applier *reconciler.Applier
	svc     *service.Service
	runs    *service.Runs // nil without a run manager
	started time.Time     // when the server was made: environments' last_updated
	log     *slog.Logger
	metrics *metrics
	backups *backups

	// syncMu serialises syncs and state-changing admin calls: a plan must
	// see the state it is applied to.
	syncMu  sync.Mutex
	runners map[string]*runner
	ready   chan struct{} // closed when every factory has synced once
	ingress *ingress.Handler
	eval    *automations.Evaluator
	sched   *schedules.Scheduler
	ui      sessions // the dashboard's
	// scheduleMu serialises the creations of schedules, so that two at
	// once cannot both take the last place.
	scheduleMu sync.Mutex
	push       *pushGuard
	signIn     *signIn
	// validations holds a slot per validation running (maxValidations).
	validations chan struct{}

	cursorOnce sync.Once
	cursorKeyV []byte
	cursorErr  error

	teamOnce sync.Once
	teamUIDV string
	teamErr  error

	// foreman keeps tasks and the inbox, and mcp is the Factory MCP
	// server: both nil without a run manager. listenURL is the address
	// served on, once Run has it.
	foreman   *foreman.Foreman
	mcp       http.Handler
	listenURL atomic.Value

	files *codehost.FileReader // pull requests' changed files, for paths filters
	// measure scores, benchmarks and improves runs (nil without a run
	// manager).
	measure *measure.Service
}

// runner keeps one factory reconciled.
type runner struct {
	FactorySource
	trigger chan chan struct{}

	mu        sync.Mutex
	synced    bool
	checkedAt time.Time
	outcome   string // of the last sync, for logging changes only
}

// New returns a server over an open store.
func New(cfg Config, applier *reconciler.Applier, log *slog.Logger) *Server {
	if applier.Loader == nil {
		applier.Loader = &reconciler.Loader{}
	}
	cfg.Schedules = cfg.Schedules.OrDefaults()
	applier.Loader.Schedules = cfg.Schedules
	if applier.CodeHost == nil {
		applier.CodeHost = func(factoryName, host string) bool {
			_, err := cfg.CodeHosts.For(factoryName, host)
			return err == nil
		}
	}
	s := &Server{cfg: cfg, store: applier.Store, applier: applier, log: log, metrics: newMetrics(),
		runners: map[string]*runner{}, ready: make(chan struct{}), started: time.Now().UTC(), validations: make(chan struct{}, maxValidations), push: newPushGuard(), signIn: newSignIn()}
	s.backups = newBackups(s.metrics.reg)
	if rec, err := backup.LastRecords(applier.Store); err == nil && rec.Last != nil {
		s.backups.show(*rec.Last)
	}
	s.files = &codehost.FileReader{Hosts: cfg.CodeHosts}
	s.svc = &service.Service{Store: applier.Store, Keyring: applier.Keyring, SyncMu: &s.syncMu, SecretsChanged: s.syncAll, Files: s.changedFiles}
	var accepted func(store.QueueItem)
	if cfg.Workers != nil {
		s.metrics.workerGauges(cfg.Workers)
	}
	if cfg.Runs != nil {
		cfg.Runs.SetTracer(cfg.Tracer)
		s.runs = &service.Runs{Store: applier.Store, Manager: cfg.Runs}
		s.metrics.runGauges(cfg.Runs.Counts)
		cfg.Runs.OnFinished(func(state factory.RunState) { s.metrics.runsEnded.WithLabelValues(string(state)).Inc() })
		s.eval = &automations.Evaluator{Store: applier.Store, Runs: cfg.Runs, Log: log,
			Started: func(n int) { s.metrics.runsStarted.Add(float64(n)) }, Observed: s.checkDefinition, Files: s.changedFiles, Tracer: cfg.Tracer}
		accepted = s.eval.Queued
		s.sched = &schedules.Scheduler{Store: applier.Store, Runs: cfg.Runs, Log: log, MinInterval: cfg.Schedules.MinInterval,
			Fired: func(n int, _ time.Duration) { s.metrics.runsStarted.Add(float64(n)) }}
	}
	s.svc.Accepted = accepted
	if cfg.Runs != nil {
		if err := s.startForeman(); err != nil {
			log.Error("starting the foreman: tasks, the inbox and the Factory MCP server are off", "err", err)
		}
		s.measure = measure.New(measure.Config{Store: applier.Store, Runs: cfg.Runs, Log: log})
	}
	s.ingress = ingress.New(ingress.Config{Store: applier.Store, Keyring: applier.Keyring, Log: log, Accepted: accepted,
		MaxBody: cfg.IngressMaxBody, PerMinute: cfg.IngressPerMinute, FailedAuthPerMinute: cfg.IngressFailedAuthPerMinute,
		RejectedPerMinute: cfg.IngressRejectedPerMinute, Tracer: cfg.Tracer})
	s.metrics.reg.MustRegister(s.ingress.Collectors()...)
	for _, f := range cfg.Factories {
		if f.Interval <= 0 {
			f.Interval = time.Minute
		}
		s.runners[f.Name] = &runner{FactorySource: f, trigger: make(chan chan struct{})}
	}
	return s
}

// ServerFile is written into the data directory while a server runs, so
// that commands that need the store go through the server instead.
const ServerFile = "server.json"

// Info is the content of ServerFile.
type Info struct {
	URL string `json:"url"`
	PID int    `json:"pid"`
	// NATS is the URL workers connect to, when the server runs workers.
	NATS string `json:"nats_url,omitempty"`
}

// Run serves on ln and keeps every factory reconciled until ctx ends; then
// it stops the runners and shuts the listener down gracefully.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	in := Info{URL: "http://" + ln.Addr().String(), PID: os.Getpid()}
	s.listenURL.Store(in.URL)
	if s.cfg.Workers != nil {
		in.NATS = s.cfg.Workers.URL
	}
	info, _ := json.Marshal(in)
	infoPath := filepath.Join(s.store.Dir(), ServerFile)
	if err := os.WriteFile(infoPath, info, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", infoPath, err)
	}
	defer os.Remove(infoPath)

	if err := backup.CleanCheckpoints(s.store.Dir()); err != nil {
		s.log.Warn("removing the checkpoints of interrupted backups", "err", err)
	}
	runCtx, stopRunners := context.WithCancel(ctx)
	defer stopRunners()
	// The runs start (and runs the last process left in progress end, as
	// after a crash) before the API answers: no caller sees a run as
	// running that is not.
	if s.cfg.Runs != nil {
		if err := s.cfg.Runs.Start(runCtx); err != nil {
			return fmt.Errorf("start the runs: %w", err)
		}
	}
	srv := &http.Server{Handler: s.metrics.instrument(s.Handler()), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if ml := s.cfg.MetricsListener; ml != nil {
		msrv := &http.Server{Handler: s.metrics.handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- msrv.Serve(ml) }()
		defer msrv.Close()
		s.log.Info("serving metrics", "addr", ml.Addr().String())
	}
	s.log.Info("serving", "addr", ln.Addr().String(), "public_url", s.cfg.PublicURL, "factories", len(s.runners))
	s.log.Info("dashboard", "url", "http://"+ln.Addr().String()+"/ui/", "sign_in", "with an API key: the admin key is in "+filepath.Join(s.store.Dir(), "admin-api-key"))

	var wg sync.WaitGroup
	s.startLoops(runCtx, &wg)

	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		s.log.Info("shutting down")
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = srv.Shutdown(shutdownCtx)
		cancel()
	}
	stopRunners()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// startLoops starts what runs until ctx ends, each counted in wg: a runner
// per factory (closing Ready once each has synced), the sweeper, the
// scheduled backups, and with runs the scheduler and the evaluation of
// accepted deliveries.
func (s *Server) startLoops(ctx context.Context, wg *sync.WaitGroup) {
	var first sync.WaitGroup
	for _, r := range s.runners {
		wg.Add(1)
		first.Add(1)
		go func() {
			defer wg.Done()
			s.run(ctx, r, first.Done)
		}()
	}
	go func() {
		first.Wait()
		close(s.ready)
	}()
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.sweep(ctx)
	}()
	go func() {
		defer wg.Done()
		s.foldMetrics(ctx)
	}()
	if s.cfg.Backups != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.scheduleBackups(ctx, s.log)
		}()
	}
	if s.cfg.Notify != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.cfg.Notify.Run(ctx)
		}()
	}
	if s.cfg.Runs != nil {
		wg.Add(3)
		go func() {
			defer wg.Done()
			s.sched.Run(ctx)
		}()
		go func() {
			defer wg.Done()
			s.measure.Run(ctx)
		}()
		go func() {
			defer wg.Done()
			s.eval.Run(ctx)
			s.cfg.Runs.Wait()
			if s.foreman != nil {
				s.foreman.Drain() // what the runs' last changes started
			}
		}()
	}
}

// sweepEvery is how often the delivery log's retention is applied.
const sweepEvery = 10 * time.Minute

// sweep applies the delivery log's retention at start and every
// sweepEvery until ctx ends.
func (s *Server) sweep(ctx context.Context) {
	for {
		n, err := s.store.SweepDeliveries(time.Now(), factory.DeliveryLogKeep, factory.DeliveryLogAge)
		if err != nil {
			s.log.Error("sweeping the delivery log", "err", err)
		} else if n > 0 {
			s.log.Info("swept the delivery log", "removed", n)
		}
		if _, err := s.store.SweepSupersededRunIndex(time.Now().Add(-store.RunListWindow)); err != nil {
			s.log.Error("sweeping the run index", "err", err)
		}
		if _, err := s.store.SweepNotifications(time.Now().Add(-factory.DeliveryLogAge)); err != nil {
			s.log.Error("sweeping the notifications' delivery log", "err", err)
		}
		s.ui.prune(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-time.After(sweepEvery):
		}
	}
}

// Ready is closed once every factory has synced at least once.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// run syncs a factory at start, then whenever its source may have changed,
// a sync is asked for, or its interval (with jitter) passes. A source that
// cannot be read is retried with exponential backoff, up to the interval.
func (s *Server) run(ctx context.Context, r *runner, firstDone func()) {
	var events <-chan struct{}
	if r.Watch != nil {
		ch, err := r.Watch(ctx)
		if err != nil {
			s.log.Warn("cannot watch the factory source; polling it instead", "factory", r.Name, "err", err)
			r.Interval = min(r.Interval, time.Second)
		}
		events = ch
	}
	var backoff time.Duration
	next := func(outcome reconciler.Outcome) time.Duration {
		if outcome != reconciler.Failed {
			backoff = 0
			return jitter(r.Interval)
		}
		backoff = min(max(2*backoff, time.Second), r.Interval)
		return backoff
	}
	timer := time.NewTimer(next(s.syncOne(ctx, r)))
	firstDone()
	defer timer.Stop()
	for {
		var done chan struct{}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
		case done = <-r.trigger:
		case <-timer.C:
		}
		timer.Stop()
		timer.Reset(next(s.syncOne(ctx, r)))
		if done != nil {
			close(done)
		}
	}
}

// jitter spreads polls of many factories over ±10% of the interval, so
// that they do not all reach their remotes at once.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()-0.5)*0.2*float64(d))
}

// syncOne reconciles one factory and logs when the outcome changes, so a
// server polling an unchanged source stays quiet.
func (s *Server) syncOne(ctx context.Context, r *runner) reconciler.Outcome {
	s.syncMu.Lock()
	start := time.Now()
	c, outcome, err := s.applier.Sync(ctx, r.Name, r.Source)
	s.syncMu.Unlock()
	s.metrics.observe(r.Name, outcome, time.Since(start))
	if f, ferr := s.store.Factory(r.Name); ferr == nil {
		s.metrics.status(f)
	}

	var summary string
	switch outcome {
	case reconciler.Failed:
		summary = "error: " + err.Error()
	case reconciler.Invalid:
		summary = "invalid " + c.Plan.Revision
	case reconciler.Applied:
		summary = "applied " + c.Plan.Revision
	}
	r.mu.Lock()
	r.synced = true
	if outcome != reconciler.Failed {
		r.checkedAt = time.Now().UTC()
	}
	changed := summary != "" && summary != r.outcome
	if summary != "" {
		r.outcome = summary
	}
	r.mu.Unlock()
	if !changed && outcome != reconciler.Applied {
		return outcome
	}
	switch outcome {
	case reconciler.Failed:
		s.log.Error("sync failed; retrying with backoff", "factory", r.Name, "source", r.Source.String(), "err", err)
	case reconciler.Invalid:
		errs := c.Plan.Diagnostics.Errors()
		s.log.Warn("revision refused; the last applied revision keeps serving", "factory", r.Name, "revision", c.Plan.Revision, "errors", len(errs))
		for _, d := range errs {
			s.log.Warn("invalid definition", "factory", r.Name, "at", d.String())
		}
	case reconciler.Applied:
		n := 0
		for _, ch := range c.Plan.Changes {
			if ch.Action != reconciler.ActionNoop {
				n++
			}
		}
		s.log.Info("revision applied", "factory", r.Name, "revision", c.Plan.Revision, "changes", n)
		for _, d := range c.Plan.Diagnostics.Warnings() {
			s.log.Warn("definition warning", "factory", r.Name, "at", d.String())
		}
	}
	return outcome
}

// SyncNow asks a factory's runner to sync and waits until it has.
func (s *Server) SyncNow(ctx context.Context, name string) error {
	r := s.runners[name]
	if r == nil {
		return errorf(CodeConflict, fmt.Sprintf("factory %s is not served by this server's sources", name))
	}
	done := make(chan struct{})
	select {
	case r.trigger <- done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// syncAll syncs every factory and waits (until ctx ends): after a change
// of state that plans depend on, such as a secret created or rotated, so
// that the caller can say the change is in force.
func (s *Server) syncAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range s.runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.SyncNow(ctx, r.Name)
		}()
	}
	wg.Wait()
}

// Handler is the server's HTTP API.
func (s *Server) Handler() http.Handler {
	mux := newRoutes()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("GET /readyz", s.readyz)
	read := func(h handler) http.Handler { return s.auth(h, factory.ScopeRead) }
	admin := func(h handler) http.Handler { return s.auth(h, factory.ScopeAdmin) }
	mux.Handle("GET /metrics", read(func(w http.ResponseWriter, r *http.Request) error {
		s.metrics.handler().ServeHTTP(w, r)
		return nil
	}))
	// Webhook ingress: no version segment (seed-spec §9); only POST (other
	// methods get 405 with Allow: POST from the mux).
	mux.Handle("POST /webhooks/w/{uid}", s.ingress)
	mux.Handle("POST /webhooks/w/{uid}/{token}", s.ingress)
	if s.cfg.PushSecret != "" {
		mux.Handle("POST /hooks/push", handlerFunc(s, s.receivePush))
	}
	mux.Handle("POST /hooks/teams/{uid}", handlerFunc(s, s.teamsActivity))
	s.factoryFileRoutes(mux)
	s.scheduleRoutes(mux)
	s.dashboardRoutes(mux)
	mux.Handle("GET /v1/factories", s.auth(s.listFactories, factory.ScopeRuns, factory.ScopeRead))
	mux.Handle("GET /v1/factories/{uid}", s.auth(s.getFactory, factory.ScopeRuns, factory.ScopeRead))
	mux.Handle("POST /v1/factories/{uid}/sync", admin(s.syncFactory))
	mux.Handle("GET /v1/factory", s.auth(s.listFactoryObjects, factory.ScopeRuns, factory.ScopeRead))
	mux.Handle("GET /v1/factory/{uid}", s.auth(s.getFactoryObject, factory.ScopeRuns, factory.ScopeRead))
	mux.Handle("POST /v1/factory/{uid}/runs", s.auth(s.needRuns(s.dispatch), factory.ScopeRuns))
	mux.Handle("GET /v1/admin/factories/{name}/state", read(s.factoryState))
	s.agentRoutes(mux)
	if s.cfg.Gateway != nil {
		for _, m := range []string{"GET", "HEAD", "POST"} {
			mux.Handle(m+" /v1/gateway/{provider}/{rest...}", s.cfg.Gateway)
		}
	}
	s.identityRoutes(mux)
	s.conversationRoutes(mux)
	s.platformRoutes(mux)
	s.measureRoutes(mux)
	s.metricsRoutes(mux)
	s.taskRoutes(mux)
	s.mcpRoutes(mux)
	s.notificationRoutes(mux)
	mux.Handle("POST /v1/automations/{id}/test-filter", read(s.testFilter))
	mux.Handle("GET /v1/webhooks/{uid}", read(s.getWebhook))
	mux.Handle("POST /v1/webhooks/{uid}/reveal-secret", admin(s.revealSecret))
	mux.Handle("POST /v1/webhooks/{uid}/suspend", admin(s.suspend(true)))
	mux.Handle("POST /v1/webhooks/{uid}/resume", admin(s.suspend(false)))
	mux.Handle("GET /v1/webhooks/{uid}/deliveries", read(s.listDeliveries))
	mux.Handle("GET /v1/webhooks/{uid}/deliveries/{id}", read(s.getDelivery))
	mux.Handle("GET /v1/deliveries/{id}", read(s.findDelivery))
	mux.Handle("POST /v1/deliveries/{id}/redeliver", admin(s.redeliver))
	mux.Handle("GET /v1/secrets", admin(s.listSecrets))
	mux.Handle("POST /v1/secrets", admin(s.createSecret))
	mux.Handle("POST /v1/secrets/{name}/rotate", admin(s.rotateSecret))
	mux.Handle("DELETE /v1/secrets/{name}", admin(s.deleteSecret))
	mux.Handle("GET /v1/admin/workers", admin(s.listWorkers))
	mux.Handle("GET /v1/admin/isolation", admin(s.isolation))
	mux.Handle("POST /v1/admin/workers", admin(s.createWorker))
	mux.Handle("POST /v1/admin/workers/{name}/revoke", admin(s.revokeWorker))
	mux.Handle("POST /v1/admin/backups", admin(s.streamBackup))
	mux.Handle("GET /v1/admin/backups", admin(s.backupStatus))
	mux.Handle("GET /v1/admin/api-keys", admin(s.listAPIKeys))
	mux.Handle("POST /v1/admin/api-keys", admin(s.createAPIKey))
	mux.Handle("POST /v1/admin/api-keys/revoke", admin(s.revokeAPIKey))
	return mux.done()
}

// routes is the server's mux, remembering each path's methods, so that a
// request with another method gets 405 with Allow as problem+json, like
// every other error (the mux's own 405 is plain text). The fallbacks are
// patterns without a method, which the mux tries only when no method
// matches: the routes themselves pay nothing for them.
type routes struct {
	mux     *http.ServeMux
	methods map[string][]string // path → methods
	paths   []string
}

func newRoutes() *routes { return &routes{mux: http.NewServeMux(), methods: map[string][]string{}} }

func (rt *routes) Handle(pattern string, h http.Handler) {
	method, path, _ := strings.Cut(pattern, " ")
	if _, seen := rt.methods[path]; !seen {
		rt.paths = append(rt.paths, path)
	}
	rt.methods[path] = append(rt.methods[path], method)
	rt.mux.Handle(pattern, h)
}

func (rt *routes) HandleFunc(pattern string, f http.HandlerFunc) { rt.Handle(pattern, f) }

// done adds the 405 fallbacks and returns the mux.
func (rt *routes) done() http.Handler {
	for _, path := range rt.paths {
		allow := rt.methods[path]
		if slices.Contains(allow, http.MethodGet) {
			allow = append(allow, http.MethodHead)
		}
		header := strings.Join(allow, ", ")
		fallback := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", header)
			problem.Write(w, r, problem.Errorf(problem.MethodNotAllowed, fmt.Sprintf("%s is not allowed here: use %s", r.Method, header)), nil)
		}
		// A path without a method would overlap another method's pattern
		// with wildcards (/v1/factory/scorers and GET /v1/factory/{uid}):
		// then each other method gets its fallback alone, where it does not.
		if !tryHandle(rt.mux, path, fallback) {
			for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
				if !slices.Contains(allow, m) {
					tryHandle(rt.mux, m+" "+path, fallback)
				}
			}
		}
	}
	return rt.mux
}

// tryHandle registers a pattern unless it conflicts with one registered
// (the mux panics then).
func tryHandle(mux *http.ServeMux, pattern string, h http.HandlerFunc) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	mux.HandleFunc(pattern, h)
	return true
}

type handler func(w http.ResponseWriter, r *http.Request) error

// auth checks the API key and that it has one of the scopes (admin has
// them all) before the handler runs (deny by default: every /v1 route goes
// through here).
func (s *Server) auth(h handler, scopes ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := s.caller(r)
		if key == nil && err == nil {
			s.writeError(w, r, errorf(CodeAuthenticationRequired, "send an API key as Authorization: Bearer <key>"))
			return
		}
		if errors.Is(err, store.ErrNotFound) || (err == nil && key.RevokedAt != nil) {
			s.writeError(w, r, errorf(CodeAuthenticationRequired, "unknown or revoked API key"))
			return
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		// Keys are found by their SHA-256, so no comparison of the key
		// itself can leak how much of it matched.
		if !key.Allows(scopes...) {
			s.writeError(w, r, errorf(CodeNotAuthorized, fmt.Sprintf("this API key has scope %s; this call needs %s", key.Scope, strings.Join(scopes, " or "))))
			return
		}
		if err := h(w, r.WithContext(context.WithValue(r.Context(), apiKeyContext{}, key))); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// caller is the key a request comes with: its bearer token, or for a read
// without one, the dashboard session's (the pages' live updates read the
// event streams with the session cookie; a state-changing request never
// authenticates by cookie, which is what keeps CSRF out of the API). No
// key and no error: the request brought none.
func (s *Server) caller(r *http.Request) (*factory.APIKey, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && token != "" {
		return s.store.APIKeyByValue(token)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return nil, nil
	}
	_, key := s.sessionKey(r) // read once, and checked not revoked
	return key, nil
}

type apiKeyContext struct{}

// callerKey is the API key a request was authenticated with.
func callerKey(r *http.Request) *factory.APIKey {
	k, _ := r.Context().Value(apiKeyContext{}).(*factory.APIKey)
	return k
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	var waiting []string
	for name, rn := range s.runners {
		rn.mu.Lock()
		if !rn.synced {
			waiting = append(waiting, name)
		}
		rn.mu.Unlock()
	}
	if len(waiting) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "syncing", "factories": waiting})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) listFactories(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.store.Factories()
	if err != nil {
		return err
	}
	out := []factory.FactorySummary{}
	for _, f := range fs {
		out = append(out, factory.Summary(f))
	}
	writeJSON(w, http.StatusOK, map[string]any{"factories": out})
	return nil
}

func (s *Server) factoryByUID(uid string) (*factory.Factory, error) {
	fs, err := s.store.Factories()
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.UID == uid || f.Name == uid {
			return f, nil
		}
	}
	return nil, errorf(CodeNotFound, fmt.Sprintf("no factory %s", uid))
}

func (s *Server) getFactory(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	st, err := s.factoryStatus(f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// factoryStatus is a factory's status with when this server last read its
// source.
func (s *Server) factoryStatus(f *factory.Factory) (*factory.FactoryStatus, error) {
	st, err := reconciler.Status(s.store, f, s.cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	if rn := s.runners[f.Name]; rn != nil {
		rn.mu.Lock()
		if !rn.checkedAt.IsZero() {
			t := rn.checkedAt
			st.CheckedAt = &t
		}
		rn.mu.Unlock()
	}
	return st, nil
}

// factoryStatuses is every factory's status.
func (s *Server) factoryStatuses() ([]*factory.FactoryStatus, error) {
	fs, err := s.store.Factories()
	if err != nil {
		return nil, err
	}
	out := make([]*factory.FactoryStatus, 0, len(fs))
	for _, f := range fs {
		st, err := s.factoryStatus(f)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (s *Server) syncFactory(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	if err := s.SyncNow(r.Context(), f.Name); err != nil {
		return err
	}
	return s.getFactory(w, r)
}

func (s *Server) factoryState(w http.ResponseWriter, r *http.Request) error {
	st, err := s.store.FactoryState(r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// handlerFunc serves a handler that authenticates by itself.
func handlerFunc(s *Server, h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}
