package runs

import (
	"time"

	"factory"
	"factory/internal/runtime"
	"factory/internal/store"
)

// closeTurn records, within the UpdateRun that ends a turn, what the turn
// leaves beside its state: the agent's time against the run's budget, the
// ACP session the next turn loads, and its approvals nobody answered
// (resolved, unanswered: the turn that asked is over).
func (m *Manager) closeTurn(r *factory.Run, b *store.Batch, res runtime.Result, now time.Time) {
	cur := r.Current
	if cur == nil {
		return
	}
	if cur.Started != nil {
		if r.Spent == nil {
			r.Spent = &factory.Spent{}
		}
		r.Spent.AgentTime += now.Sub(*cur.Started)
	}
	if res.Session != "" {
		r.AgentSession = res.Session
	}
	for _, uid := range cur.Approvals {
		it, err := m.cfg.Store.InboxItem(uid)
		if err != nil || it.Resolved != nil {
			continue
		}
		at := now
		it.Resolved = &at
		b.PutInboxItem(it)
	}
}
