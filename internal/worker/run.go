package worker

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"

	"factory/internal/confine"
	"factory/internal/docker"
	"factory/internal/runtime"

	"github.com/nats-io/nats.go/jetstream"
)

// Options are a worker's settings (factory worker's flags).
type Options struct {
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
	// Hidden are paths no agent of the direct backend may reach besides
	// Dir (the worker's credentials files); Unconfined runs them
	// unconfined (docs/security.md).
	Hidden     []string
	Unconfined bool
}

// Backends a worker runs turns with.
const (
	BackendDirect = "direct"
	BackendDocker = "docker"
)

// Run connects a worker to its control plane and runs it until ctx
// ends.
func Run(ctx context.Context, c Credentials, o Options, log *slog.Logger) error {
	w := &Worker{ID: o.ID, MaxRuns: o.MaxRuns, Dir: o.Dir, Log: log.With("worker", o.ID), DockerImage: o.DockerImage}
	confine.HideProcess() // its memory and environment hold its credentials
	switch o.Backend {
	case BackendDirect, "":
		how, ok := confine.Describe()
		if ok && !o.Unconfined {
			w.Confine = &runtime.Confinement{Hidden: append([]string{o.Dir}, o.Hidden...)}
		} else {
			w.Log.Warn("agents run unconfined, as this worker's user: each can read the worker's credentials and every run's workspace", "confinement", how)
		}
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
