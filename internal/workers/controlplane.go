package workers

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	neturl "net/url"
	"os"
	"path/filepath"
	"time"

	"factory"
	"factory/internal/docker"
	"factory/internal/runtime"
	"factory/internal/store"

	"github.com/nats-io/nats.go/jetstream"
)

// ControlPlane is serve's part: the NATS server (embedded, or a cluster of
// its own), the dispatcher, the registry, and the in-process worker.
type ControlPlane struct {
	NATS     *Embedded // nil on a cluster of its own
	URL      string    // the NATS URL workers connect to
	Registry *Registry
	disp     *Dispatcher
	stop     func()
}

// Options of the control plane.
type Options struct {
	Listen string // the embedded NATS server's address
	// URL is a NATS cluster of its own to use instead (with JetStream),
	// Auth the control plane's credentials there.
	URL  string
	Auth Credentials
	// StoreKey encrypts the embedded server's JetStream store at rest.
	StoreKey     string
	Lease        time.Duration // a quiet worker loses its run after this long
	LocalWorker  bool          // run a worker in this process
	LocalMaxRuns int
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
	disp := &Dispatcher{NC: nc, JS: js, Lease: o.Lease, Log: log}
	if err := disp.Start(wctx); err != nil {
		cancel()
		nc.Close()
		shutdown()
		return nil, err
	}
	reg.JS, reg.URL, reg.Connected, reg.Activity = js, redactURL(url), disp.Ping, disp.Activity
	if emb != nil {
		reg.Connected = emb.Connected // the server knows its connections
	}
	done := make(chan struct{})
	close(done)
	if o.LocalWorker {
		// Today's single-binary behaviour, through the same queue as
		// workers elsewhere.
		if err := AddWorker(ctx, js, "local"); err != nil {
			cancel()
			nc.Close()
			shutdown()
			return nil, err
		}
		// Its workspaces are the run manager's own (<data>/runs/<run>):
		// one machine's layout does not change.
		dir, err := filepath.Abs(dataDir) // an agent's paths do not depend on its working directory
		if err != nil {
			cancel()
			nc.Close()
			shutdown()
			return nil, err
		}
		w := &Worker{ID: "local", NC: nc, JS: js, MaxRuns: o.LocalMaxRuns, Dir: dir, Log: log.With("worker", "local"),
			AbandonOnStop: true, SharesFolders: true}
		done = make(chan struct{})
		go func() { _ = w.Run(wctx); close(done) }()
	}
	log.Info("workers", "nats", redactURL(url), "embedded", emb != nil, "lease", o.Lease, "local_worker", o.LocalWorker)
	return &ControlPlane{NATS: emb, URL: redactURL(url), Registry: reg, disp: disp, stop: func() { cancel(); <-done; nc.Close(); shutdown() }}, nil
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

// Stop stops the in-process worker, the dispatcher and the NATS server.
func (cp *ControlPlane) Stop() { cp.stop() }

// RemoteExecutors makes a run manager's environments (exec and ACP) run
// on workers. A command that is this binary (the built-in demo agent)
// becomes SelfCommand: each worker runs its own.
//
// An environment that runs its agent as another user (user:) stays here:
// a worker could not keep that boundary, and it is never dropped silently.
func (cp *ControlPlane) RemoteExecutors(envs map[string]runtime.Environment) {
	for name, env := range envs {
		if env.RunAs != nil {
			continue
		}
		switch ex := env.Executor.(type) {
		case *runtime.ExecExecutor:
			env.Executor = cp.disp.Executor(selfAsMarker(ex.Command))
		case *runtime.ACPExecutor:
			env.Executor = cp.disp.ACPExecutor(selfAsMarker(ex.Command), ex.Permissions)
		default:
			continue
		}
		envs[name] = env
	}
}

// selfAsMarker replaces this binary at the head of a command with
// SelfCommand.
func selfAsMarker(command []string) []string {
	self, err := os.Executable()
	if err != nil || len(command) == 0 {
		return command
	}
	resolved, _ := filepath.EvalSymlinks(self)
	if command[0] != self && command[0] != resolved {
		return command
	}
	return append([]string{SelfCommand}, command[1:]...)
}

// WorkerOptions are a worker's settings (factory worker's flags).
type WorkerOptions struct {
	ID      string
	NATS    string // the control plane's NATS URL
	MaxRuns int
	Dir     string // where the runs' workspaces live
	// Backend is direct (a process group per run) or docker (a
	// container per run); DockerNetwork and DockerImage are the docker
	// backend's network mode and the image of runs whose runner names
	// none.
	Backend       string
	DockerNetwork string
	DockerImage   string
}

// Backends a worker runs turns with.
const (
	BackendDirect = "direct"
	BackendDocker = "docker"
)

// RunWorker connects a worker to its control plane and runs it until ctx
// ends.
func RunWorker(ctx context.Context, c Credentials, o WorkerOptions, log *slog.Logger) error {
	w := &Worker{ID: o.ID, MaxRuns: o.MaxRuns, Dir: o.Dir, Log: log.With("worker", o.ID), DockerImage: o.DockerImage}
	switch o.Backend {
	case BackendDirect, "":
	case BackendDocker:
		b, err := docker.Open(ctx, o.ID, o.DockerNetwork, w.Log)
		if err != nil {
			return fmt.Errorf("the docker backend: %w", err)
		}
		defer b.Close()
		w.Docker = b
	default:
		return fmt.Errorf("--backend %s: a worker's backend is direct or docker", o.Backend)
	}
	nc, err := Connect(o.NATS, c, "factory worker "+o.ID)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", o.NATS, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	w.NC, w.JS = nc, js
	log.Info("worker started", "worker", o.ID, "nats", o.NATS, "max_runs", o.MaxRuns, "dir", o.Dir, "backend", cmp.Or(o.Backend, BackendDirect))
	err = w.Run(ctx)
	log.Info("worker stopped", "worker", o.ID)
	return err
}
