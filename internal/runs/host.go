package runs

import (
	"context"
	"os"
	"path/filepath"
	"slices"

	"factory"
	"factory/internal/runtime"
)

// localHost runs turns in this process (the control plane's own host):
// the environment's executor in the run's folder under the data
// directory, laid out and set up as every host does it (runtime.Here).
type localHost struct {
	m   *Manager
	env Environment
}

// Run runs the turn here; the agent's start, with its process group, is
// the turn's started step.
func (h *localHost) Run(ctx context.Context, t *runtime.Turn, events func(runtime.Event)) runtime.Result {
	if t.RunAs != nil {
		if err := h.passable(t.Dir); err != nil {
			return runtime.Result{State: factory.StateError, Message: "preparing the workspace: " + err.Error()}
		}
	}
	t.Started = func(pid int) { events(runtime.Event{Phase: runtime.PhaseStarted, PID: pid}) }
	if c := h.m.cfg.Confinement; c != nil && !h.env.Unconfined {
		t.Confine = &runtime.Confinement{Hidden: c.Hidden, ReadOnly: append(slices.Clone(c.ReadOnly), h.env.ReadOnly...)}
	}
	return runtime.Here(ctx, *t, h.env.Executor, events)
}

// Follow cannot follow a turn of this process after a restart: it ended
// with the process.
func (h *localHost) Follow(context.Context, *runtime.Turn, func(runtime.Event)) (runtime.Result, bool) {
	return runtime.Result{}, false
}

// passable makes the folders above a workspace whose agent runs as another
// user (the data directory, runs/, the run's) passable but not readable by
// others: the agent reaches its workspace by path, and no file of the
// server's (keys, the store, other runs) is readable to it, as every one
// of them is the server user's with mode 0600 or 0700.
func (h *localHost) passable(runDir string) error {
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return err
	}
	for _, dir := range []string{h.m.cfg.DataDir, filepath.Join(h.m.cfg.DataDir, "runs"), runDir} {
		if err := os.Chmod(dir, 0o711); err != nil {
			return err
		}
	}
	return nil
}
