package runs

import (
	"fmt"
	"time"

	"factory"
	"factory/internal/runtime"
	"factory/internal/store"
)

// recover reconciles, at start-up, every run the previous process left in
// flight with its host, so that none waits for ever:
//   - a QUEUED run is queued again, in creation order; one whose turn was
//     offered to the workers and not claimed is offered again under a new
//     attempt (whether or not the offer was published before the end);
//   - a run claimed by a worker (CLAIMED, INPROGRESS, or BLOCKED on an
//     approval its agent waits for) is followed there:
//     its events wait in JetStream; a worker that says nothing within the
//     lease has lost it (ERROR, retryable);
//   - a run whose turn ran in this process has no process any more: what
//     is left of its agent is killed and it ends ERROR, retryable (a
//     follow-up continues it);
//   - a run cancelled while its agent ran has what is left of it killed.
func (m *Manager) recover() error {
	runs, err := m.cfg.Store.RunsInState(factory.StateQueued, factory.StateClaimed, factory.StateInProgress, factory.StateBlocked, factory.StateCancelled)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.State == factory.StateBlocked && !r.Approving() {
			continue // between turns: a follow-up continues it
		}
		if err := m.recoverRun(r); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) recoverRun(r *factory.Run) error {
	if r.Process != nil && reapProcess(*r.Process) {
		m.cfg.Log.Warn("killed the processes left by a run the server's end interrupted", "run", r.ID, "pgid", r.Process.PID)
	}
	upgradeLegacyTurn(m, r)
	switch {
	case r.State == factory.StateCancelled:
		if r.Process != nil || r.Current != nil {
			_, err := m.cfg.Store.UpdateRun(r.ID, true, func(r *factory.Run, b *store.Batch) error {
				r.Process, r.Current = nil, nil
				return nil
			})
			return err
		}
		return nil
	case r.State == factory.StateQueued:
		m.enqueue(r)
		return nil
	case r.Current == nil:
		return m.lost(r, "")
	case r.Current.Remote && r.Worker != "" && r.Worker != legacyLocalWorker && m.cfg.Workers != nil:
		m.resumable = append(m.resumable, r.ID)
		return nil
	case r.Current.Remote && r.Worker != "" && r.Worker != legacyLocalWorker:
		return m.lost(r, fmt.Sprintf("worker %s held the run when the server stopped, and this server runs no workers now; ", r.Worker))
	}
	return m.lost(r, "")
}

// lost ends a run in flight whose turn the server's end took with it:
// ERROR, retryable.
func (m *Manager) lost(r *factory.Run, why string) error {
	attempt := ""
	if r.Current != nil {
		attempt = r.Current.Attempt
	} else {
		// A run of an older version with no attempt on record: give it one
		// to end.
		attempt = factory.NewUID("at_")
		if _, err := m.cfg.Store.UpdateRun(r.ID, true, func(r *factory.Run, b *store.Batch) error {
			r.Current = &factory.TurnRecord{Attempt: attempt}
			return nil
		}); err != nil {
			return err
		}
	}
	msg := runtime.ErrShutdown.Error() + "; send a follow-up to continue it"
	if why != "" {
		msg = why + "send a follow-up to run it again"
	}
	return m.finish(r.ID, attempt, runtime.Result{State: factory.StateError, Message: msg}, true)
}

// upgradeLegacyTurn gives a run left in flight by an older version (its
// turn named by RemoteTurn and ClaimedTurn) the turn record of this one.
func upgradeLegacyTurn(m *Manager, r *factory.Run) {
	if r.Current != nil || r.RemoteTurn == "" || r.State.Terminal() {
		return
	}
	updated, err := m.cfg.Store.UpdateRun(r.ID, true, func(r *factory.Run, b *store.Batch) error {
		r.Current = &factory.TurnRecord{Attempt: r.RemoteTurn, Remote: true}
		if r.ClaimedTurn != r.RemoteTurn {
			r.Worker = "" // offered, not claimed
		}
		r.RemoteTurn, r.ClaimedTurn, r.UpdatedAt = "", "", time.Now().UTC()
		return nil
	})
	if err == nil {
		*r = *updated
	}
}

// reapProcess kills what is left of an agent's process group.
func reapProcess(ref factory.ProcessRef) bool { return runtime.Reap(ref) }
