package runs

import (
	"fmt"

	"factory"
	"factory/internal/runtime"
	"factory/internal/store"
)

// The bounds of an agent's output (factory.MaxTurnMessages and the rest)
// are kept here, where every host's status messages land: a message is
// cut; the turn's and the run's counts are in the run record, written with
// each message; the first message over a bound writes one note on the
// timeline, and the rest are dropped without touching the store, counted
// in memory until the turn ends, where the count is said.

// outputLimits are the manager's bounds (Config.Output, else the
// defaults).
func (m *Manager) outputLimits() runtime.OutputLimits {
	if m.cfg.Output != nil {
		return *m.cfg.Output
	}
	return runtime.DefaultOutputLimits
}

// dropping reports whether a turn's messages are past their bounds, and
// if so counts msg as dropped.
func (m *Manager) dropping(attempt string, msg string) bool {
	m.outMu.Lock()
	defer m.outMu.Unlock()
	d, ok := m.dropped[attempt]
	if ok {
		d.Messages++
		d.Bytes += int64(len(msg))
	}
	return ok
}

// startDropping marks a turn's messages past their bounds, msg the first
// of them dropped.
func (m *Manager) startDropping(attempt string, msg string) {
	m.outMu.Lock()
	defer m.outMu.Unlock()
	if m.dropped == nil {
		m.dropped = map[string]*runtime.Dropped{}
	}
	if _, ok := m.dropped[attempt]; !ok {
		m.dropped[attempt] = &runtime.Dropped{Messages: 1, Bytes: int64(len(msg))}
	}
}

// takeDropped is what a turn dropped here, its count forgotten.
func (m *Manager) takeDropped(attempt string) runtime.Dropped {
	m.outMu.Lock()
	defer m.outMu.Unlock()
	d := m.dropped[attempt]
	delete(m.dropped, attempt)
	if d == nil {
		return runtime.Dropped{}
	}
	return *d
}

// message records a status message of a turn in flight, within the
// output's bounds. Messages are written without waiting for the disk: a
// crash loses the last few, never a state.
func (m *Manager) message(id, attempt string, e runtime.Event) {
	lim := m.outputLimits()
	msg := runtime.CutMessage(e.Message, lim.Message)
	if m.dropping(attempt, msg) {
		return
	}
	over := false
	_, err := m.cfg.Store.UpdateRun(id, false, func(r *factory.Run, b *store.Batch) error {
		if !r.Live(attempt) {
			return store.ErrNoChange
		}
		cur, n := r.Current, int64(len(msg))
		if cur.Limited || cur.Messages+1 > lim.TurnMessages || cur.MessageBytes+n > lim.TurnBytes ||
			r.Messages+1 > lim.RunMessages || r.MessageBytes+n > lim.RunBytes {
			over = true
			if cur.Limited {
				return store.ErrNoChange // said already (before a restart)
			}
			cur.Limited = true
			b.AddRunEvent(r, factory.RunEvent{Time: e.Time, Kind: "message", Message: limitNote(r, lim)})
			return nil
		}
		cur.Messages, cur.MessageBytes = cur.Messages+1, cur.MessageBytes+n
		r.Messages, r.MessageBytes = r.Messages+1, r.MessageBytes+n
		r.StatusMessage = &factory.StatusMessage{Message: msg}
		r.UpdatedAt = e.Time
		b.AddRunEvent(r, factory.RunEvent{Time: e.Time, Kind: "message", Message: msg})
		return nil
	})
	if over {
		m.startDropping(attempt, msg)
	}
	if err != nil {
		m.cfg.Log.Error("recording a status message", "run", id, "err", err)
	}
}

// limitNote is the timeline's one note of a turn whose messages passed a
// bound.
func limitNote(r *factory.Run, lim runtime.OutputLimits) string {
	return fmt.Sprintf("%sthe agent's status messages passed their bounds (a turn keeps %d messages and %s, a run %d and %s; "+
		"this turn kept %d, the run %d): the rest of this turn's are not kept, and their count is given when it ends",
		factory.OutputLimited, lim.TurnMessages, size(lim.TurnBytes), lim.RunMessages, size(lim.RunBytes), r.Current.Messages, r.Messages)
}

// droppedNote says, in a turn's result, how many of its messages were
// dropped (here and by its host).
func droppedNote(d runtime.Dropped) string {
	return fmt.Sprintf(" (%d status messages, %s, over the output's bounds were dropped)", d.Messages, size(d.Bytes))
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// noteDropped adds to a turn's result the count of its messages dropped
// here and by its host.
func (m *Manager) noteDropped(attempt string, res *runtime.Result) {
	d := m.takeDropped(attempt)
	if res.Dropped != nil {
		d.Messages += res.Dropped.Messages
		d.Bytes += res.Dropped.Bytes
	}
	if d.Messages > 0 {
		res.Message += droppedNote(d)
	}
}
