package runs

import (
	"time"

	"factory"
	"factory/internal/runtime"
	"factory/internal/store"
)

// Admit says whether a run's agent may call its model now (the model
// gateway asks before each call): the run has a live turn, and its budget
// leaves room. A run past its budget has its turn stopped, FAILED with
// budget_exceeded, and the answer says which limit (exceeded); a run with
// no live turn is ErrNotLive.
func (m *Manager) Admit(runID string) (r *factory.Run, exceeded *factory.BudgetExceeded, err error) {
	r, err = m.cfg.Store.Run(runID)
	if store.IsNotFound(err) {
		return nil, nil, ErrNotFound
	}
	if err != nil {
		return nil, nil, err
	}
	if r.Current == nil || !r.Live(r.Current.Attempt) {
		return r, nil, ErrNotLive
	}
	if r.Setup == nil || r.Setup.Budget == nil {
		return r, nil, nil
	}
	var elapsed time.Duration
	if s := r.Current.Started; s != nil {
		elapsed = time.Since(*s)
	}
	if exceeded = r.Setup.Budget.Exceeded(r.Spent, elapsed); exceeded != nil {
		m.budgetEvent(runID, exceeded)
		m.stopTurn(runID, &runtime.StopError{Code: runtime.CodeBudgetExceeded, Message: exceeded.Message()})
	}
	return r, exceeded, nil
}

// budgetEvent records, once a turn, the limit its run ran past: the run
// ends FAILED, budget_exceeded, however its agent takes the refusal, and
// the timeline says which limit and what was used.
func (m *Manager) budgetEvent(runID string, e *factory.BudgetExceeded) {
	_, err := m.cfg.Store.UpdateRun(runID, true, func(r *factory.Run, b *store.Batch) error {
		if r.Exceeded != nil {
			return store.ErrNoChange
		}
		r.Exceeded = e
		b.AddRunEvent(r, factory.RunEvent{Time: e.At, Kind: factory.EventBudgetExceeded, Message: e.Message(),
			Data: map[string]any{"limit": e.Limit, "max": e.Max, "used": e.Used}})
		return nil
	})
	if err != nil {
		m.cfg.Log.Error("recording a run's budget", "run", runID, "err", err)
	}
}

// stopTurn stops a run's turn in flight with a cause (runtime.StopError:
// it ends FAILED with its code).
func (m *Manager) stopTurn(runID string, cause error) {
	m.mu.Lock()
	a := m.active[runID]
	m.mu.Unlock()
	if a != nil {
		a.cancel(cause)
	}
}

// RecordCall records a model call of a run's agent (the gateway's, once
// the call has ended): the run's request_usage and what it spent against
// its budget, and the call itself (numbered in the run). Calls are
// written without waiting for the disk, as messages are.
func (m *Manager) RecordCall(runID string, c *factory.ModelCall) error {
	_, err := m.cfg.Store.UpdateRun(runID, false, func(r *factory.Run, b *store.Batch) error {
		c.Seq = 1
		if r.Spent != nil {
			c.Seq = r.Spent.Calls + 1
		}
		r.AddCall(c)
		b.AddModelCall(runID, c)
		return nil
	})
	if store.IsNotFound(err) {
		return ErrNotFound
	}
	return err
}

// ModelCalls are a run's model calls through the gateway, oldest first.
func (m *Manager) ModelCalls(runID string) ([]*factory.ModelCall, error) {
	return m.cfg.Store.ModelCalls(runID)
}
