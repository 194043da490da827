package workers

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"factory"
	"factory/internal/runtime"
	"factory/internal/store"

	"github.com/nats-io/nats.go/jetstream"
)

// ControlPlane is serve's part: the embedded NATS server, the dispatcher,
// the registry, and the in-process worker.
type ControlPlane struct {
	NATS     *Embedded
	Registry *Registry
	disp     *Dispatcher
	stop     func()
}

// Options of the control plane.
type Options struct {
	Listen       string        // the NATS server's address
	Lease        time.Duration // a quiet worker loses its run after this long
	LocalWorker  bool          // run a worker in this process
	LocalMaxRuns int
}

// StartControlPlane starts the embedded NATS server and what runs on it.
func StartControlPlane(ctx context.Context, o Options, s *store.Store, dataDir string, log *slog.Logger) (*ControlPlane, error) {
	reg := &Registry{Store: s}
	emb, err := StartEmbedded(dataDir, o.Listen, &Accounts{Worker: reg.Lookup}, factory.NewUID("np_"))
	if err != nil {
		return nil, err
	}
	nc, err := Connect(emb.URL, emb.Own, "factory control plane")
	if err != nil {
		emb.Shutdown()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		err = Setup(ctx, js)
	}
	if err != nil {
		nc.Close()
		emb.Shutdown()
		return nil, fmt.Errorf("the workers' streams: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	disp := &Dispatcher{NC: nc, JS: js, Lease: o.Lease, Log: log, Published: recordPublished(s), Claimed: recordClaimed(s)}
	if err := disp.Start(wctx); err != nil {
		cancel()
		nc.Close()
		emb.Shutdown()
		return nil, err
	}
	reg.JS, reg.URL, reg.Connected, reg.Activity = js, emb.URL, emb.Connected, disp.Activity
	done := make(chan struct{})
	close(done)
	if o.LocalWorker {
		// Today's single-binary behaviour, through the same queue as
		// workers elsewhere.
		if err := AddWorker(ctx, js, "local"); err != nil {
			cancel()
			nc.Close()
			emb.Shutdown()
			return nil, err
		}
		w := &Worker{ID: "local", NC: nc, JS: js, MaxRuns: o.LocalMaxRuns, Dir: filepath.Join(dataDir, "worker"), Log: log.With("worker", "local"),
			AbandonOnStop: true}
		done = make(chan struct{})
		go func() { _ = w.Run(wctx); close(done) }()
	}
	log.Info("workers", "nats", emb.URL, "lease", o.Lease, "local_worker", o.LocalWorker)
	return &ControlPlane{NATS: emb, Registry: reg, disp: disp, stop: func() { cancel(); <-done; nc.Close(); emb.Shutdown() }}, nil
}

// Stop stops the in-process worker, the dispatcher and the NATS server.
func (cp *ControlPlane) Stop() { cp.stop() }

// RemoteExecutors makes a run manager's exec environments run on workers.
func (cp *ControlPlane) RemoteExecutors(envs map[string]runtime.Environment) {
	for name, env := range envs {
		if ex, ok := env.Executor.(*runtime.ExecExecutor); ok {
			env.Executor = cp.disp.Executor(ex.Command)
			envs[name] = env
		}
	}
}

func recordPublished(s *store.Store) func(runID, attempt string) error {
	return func(runID, attempt string) error {
		_, err := s.UpdateRun(runID, true, func(r *factory.Run, _ *store.Batch) error { r.RemoteTurn = attempt; return nil })
		return err
	}
}

func recordClaimed(s *store.Store) func(runID, worker, attempt string) {
	return func(runID, worker, attempt string) {
		_, _ = s.UpdateRun(runID, true, func(r *factory.Run, _ *store.Batch) error { r.Worker, r.ClaimedTurn = worker, attempt; return nil })
	}
}

// RunWorker connects a worker to its control plane and runs it until ctx
// ends.
func RunWorker(ctx context.Context, c Credentials, natsURL, id string, maxRuns int, dir string, log *slog.Logger) error {
	nc, err := Connect(natsURL, c, "factory worker "+id)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", natsURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	log.Info("worker started", "worker", id, "nats", natsURL, "max_runs", maxRuns, "dir", dir)
	w := &Worker{ID: id, NC: nc, JS: js, MaxRuns: maxRuns, Dir: dir, Log: log.With("worker", id)}
	err = w.Run(ctx)
	log.Info("worker stopped", "worker", id)
	return err
}
