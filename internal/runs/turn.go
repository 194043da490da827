package runs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"factory"
	"factory/internal/artifacts"
	"factory/internal/runtime"
	"factory/internal/store"
	"factory/internal/tracing"
)

// execute runs the next turn of a queued run on a host: here (this
// process) or the workers; every step of it comes back through event and
// finish, checked against the run's current attempt.
func (m *Manager) execute(ctx context.Context, id string, here bool) {
	r, follow, err := m.begin(id, here)
	switch {
	case err != nil:
		m.cfg.Log.Error("starting a run's turn", "run", id, "err", err)
		return
	case follow:
		// A worker claimed the turn offered before a restart while the
		// run waited for its place again: it is followed, not offered.
		m.follow(ctx, id)
		return
	case r == nil:
		return // no longer queued: cancelled meanwhile
	}
	attempt := r.Current.Attempt
	span := m.startTurn(r, here)
	t, res, ok := m.turnOf(r)
	if !ok {
		m.end(id, attempt, res)
		endTurn(span, res)
		return
	}
	var host Host = m.cfg.Workers
	if here {
		host, t.Worker = &localHost{m: m, env: m.cfg.Environments[r.Environment]}, ""
	}
	res = host.Run(ctx, t, func(e runtime.Event) { m.event(id, attempt, e) })
	m.turnEnded(ctx, id, attempt, res)
	endTurn(span, res)
}

// startTurn starts a turn's span, the child of its run's creation span
// (Run.Traceparent) however long after the creation it runs.
func (m *Manager) startTurn(r *factory.Run, here bool) tracing.Span {
	if m.cfg.Tracer == nil {
		return tracing.Span{}
	}
	host := "server"
	if !here {
		host = "workers"
	}
	_, span := m.cfg.Tracer.StartFrom(r.Traceparent, "run.turn", tracing.String("factory.run.id", r.ID),
		tracing.Int("factory.run.turn", r.Turns), tracing.String("factory.run.attempt", r.Current.Attempt),
		tracing.String("factory.run.environment", r.Environment), tracing.String("factory.run.host", host))
	return span
}

// endTurn ends a turn's span with the state the turn ended in.
func endTurn(span tracing.Span, res runtime.Result) {
	span.Set(tracing.String("factory.run.result", string(res.State)))
	if res.State != factory.StateSucceeded && res.State != factory.StateCancelled {
		span.FailWith(res.Message)
	}
	span.End()
}

// begin starts a queued run's next turn: a new attempt, the oldest pending
// follow-up as its message (a continued run's), and, here, the claim
// (QUEUED → CLAIMED); for the workers, the attempt is recorded before the
// turn is offered, so that a restart finds it. A turn offered to the
// workers before a restart and not claimed since is offered again under a
// new attempt (a claim of the old one is refused). r is nil when the run
// is no longer queued; follow says a worker holds its turn already.
func (m *Manager) begin(id string, here bool) (r *factory.Run, follow bool, err error) {
	begun := false
	r, err = m.cfg.Store.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) error {
		switch {
		case r.State == factory.StateClaimed || r.State == factory.StateInProgress:
			follow = r.Current != nil && r.Current.Remote && r.Worker != ""
			return store.ErrNoChange
		case r.State != factory.StateQueued:
			return store.ErrNoChange
		}
		now := time.Now().UTC()
		if r.Current != nil && r.Current.Remote && !r.Current.Stopped {
			r.Current.Attempt = factory.NewUID("at_")
		} else {
			pending, err := m.cfg.Store.FollowUps(id)
			if err != nil {
				return err
			}
			r.Current = &factory.TurnRecord{Attempt: factory.NewUID("at_")}
			if r.Turns++; r.Turns > 1 && len(pending) > 0 {
				r.Current.FollowUp = pending[0].Message
				b.DropFollowUp(pending[0].Key)
			}
		}
		r.UpdatedAt, r.Current.Remote = now, !here
		r.Exceeded = nil // the budget is looked at again, at the turn's start and its model calls
		if here {
			if err := r.MoveTo(factory.StateClaimed); err != nil {
				return err
			}
			r.Worker = ""
			b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "claimed", State: factory.StateClaimed})
		}
		begun = true
		return nil
	})
	switch {
	case err != nil || follow:
		return nil, follow, err
	case !begun:
		return nil, false, nil
	case here:
		m.logRun(r, "run claimed")
		m.changed(r)
	default:
		m.logRun(r, "run offered to the workers", "worker", r.Worker)
	}
	return r, false, nil
}

// event applies what a turn reported to its run: its steps and its agent's
// messages, if the turn is still the run's current one (a late event of a
// cancelled turn, or of an attempt offered again since, changes nothing).
func (m *Manager) event(id, attempt string, e runtime.Event) {
	switch e.Phase {
	case runtime.PhaseClaimed:
		if err := m.Claim(id, attempt, e.Worker); err != nil && !errors.Is(err, ErrStaleClaim) {
			m.cfg.Log.Error("recording a run's claim", "run", id, "err", err)
		}
	case runtime.PhaseStarted:
		m.started(id, attempt, e)
	default:
		m.message(id, attempt, e)
	}
}

// Claim records that a worker took a turn offered to the workers: QUEUED
// → CLAIMED, durably, before the worker may run it. A claim of a turn that
// is not the run's current one waiting for a worker (cancelled, claimed by
// another worker, offered again under a new attempt, or unknown) is
// refused with ErrStaleClaim; the same worker's claim again is accepted.
func (m *Manager) Claim(runID, attempt, worker string) error {
	changed := false
	var after time.Duration
	r, err := m.cfg.Store.UpdateRun(runID, true, func(r *factory.Run, b *store.Batch) error {
		cur := r.Current
		if cur == nil || cur.Attempt != attempt || !cur.Remote || cur.Stopped {
			return fmt.Errorf("%w: attempt %s is not run %s's current turn", ErrStaleClaim, attempt, runID)
		}
		switch {
		case (r.State == factory.StateClaimed || r.State == factory.StateInProgress) && r.Worker == worker:
			return store.ErrNoChange
		case r.State != factory.StateQueued:
			return fmt.Errorf("%w: run %s is %s (worker %q)", ErrStaleClaim, runID, r.State, r.Worker)
		}
		if err := r.MoveTo(factory.StateClaimed); err != nil {
			return err
		}
		now := time.Now().UTC()
		after, r.UpdatedAt, r.Worker, changed = now.Sub(r.UpdatedAt), now, worker, true
		b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "claimed", State: factory.StateClaimed, Message: "claimed by worker " + worker})
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: no run %s", ErrStaleClaim, runID)
	}
	if err != nil {
		return err
	}
	if changed {
		m.logRun(r, "run claimed", "worker", worker, "after", after)
		m.changed(r)
	}
	return nil
}

// started records that a turn's agent runs: CLAIMED → INPROGRESS, with
// its process group when it is this machine's (the next start kills what a
// crash leaves of it).
func (m *Manager) started(id, attempt string, e runtime.Event) {
	var proc *factory.ProcessRef
	if e.PID > 0 {
		ref := runtime.ProcessOf(e.PID)
		proc = &ref
	}
	changed := false
	r, err := m.cfg.Store.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) error {
		if r.Current == nil || r.Current.Attempt != attempt || r.State != factory.StateClaimed {
			return store.ErrNoChange
		}
		if err := r.MoveTo(factory.StateInProgress); err != nil {
			return err
		}
		now := time.Now().UTC()
		if r.StartedAt == nil {
			r.StartedAt = &now
		}
		r.Current.Started = &now
		r.UpdatedAt, r.Process, changed = now, proc, true
		b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "started", State: factory.StateInProgress, Message: r.Current.FollowUp})
		return nil
	})
	switch {
	case err != nil:
		m.cfg.Log.Error("recording a run's start", "run", id, "err", err)
	case changed && r.Worker != "":
		m.logRun(r, "run started", "worker", r.Worker)
		m.changed(r)
	case changed:
		m.logRun(r, "run started")
		m.changed(r)
	}
}

// note records a message of the server's own on a run's timeline,
// whatever the run's state.
func (m *Manager) note(id, msg string) {
	_, err := m.cfg.Store.UpdateRun(id, false, func(r *factory.Run, b *store.Batch) error {
		b.AddRunEvent(r, factory.RunEvent{Time: time.Now().UTC(), Kind: "message", Message: msg})
		return nil
	})
	if err != nil {
		m.cfg.Log.Error("noting on a run's timeline", "run", id, "err", err)
	}
}

// turnEnded records how a turn ended; a turn that goes on on a worker
// while the server stops (an empty State) is left in flight, to be
// followed after the restart.
func (m *Manager) turnEnded(ctx context.Context, id, attempt string, res runtime.Result) {
	if res.State == "" {
		m.cfg.Log.Info("the server stops; the run goes on on its worker", "run", id)
		return
	}
	if res.Stderr != "" {
		// The end of the agent's stderr (bounded by the executor), beside
		// the workspace, for diagnosis: the last turn's wins.
		if os.MkdirAll(m.RunDir(id), 0o700) == nil {
			_ = runtime.WriteRunFile(m.RunDir(id), "agent-stderr.log", []byte(res.Stderr))
		}
	}
	if errors.Is(context.Cause(ctx), runtime.ErrShutdown) {
		res = runtime.Result{State: factory.StateError, Message: runtime.ErrShutdown.Error() + "; send a follow-up to continue it", Stderr: res.Stderr}
	} else {
		res.Links = append(res.Links, m.pullRequests(id)...)
	}
	m.end(id, attempt, res)
}

// pullRequests are the pull requests of the run's branch on its code
// hosts, found after a turn.
func (m *Manager) pullRequests(id string) []factory.Artifact {
	if m.cfg.PullRequests == nil {
		return nil
	}
	r, err := m.cfg.Store.Run(id)
	if err != nil || len(r.Repositories) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return m.cfg.PullRequests(ctx, r)
}

// end records a turn's end, and logs an error recording it.
func (m *Manager) end(id, attempt string, res runtime.Result) {
	m.noteDropped(attempt, &res)
	if err := m.finish(id, attempt, res, res.State == factory.StateError); err != nil {
		m.cfg.Log.Error("recording the end of a run's turn", "run", id, "err", err)
	}
}

// finish records a turn's end, if it is the run's current turn. A run with
// pending follow-ups goes back to the queue for its next turn. A turn
// that ends after its run did (a cancel is recorded at once; the agent
// stops after) changes nothing but what it leaves: its artifacts.
func (m *Manager) finish(id, attempt string, res runtime.Result, retryable bool) error {
	requeue, applied := false, false
	r, err := m.cfg.Store.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) (err error) {
		if r.Current == nil || r.Current.Attempt != attempt {
			return store.ErrNoChange
		}
		if !inFlight(r) {
			now := time.Now().UTC()
			m.collectArtifacts(r, b, res.Links, now)
			m.closeTurn(r, b, res, now)
			r.Process, r.Current = nil, nil
			return nil
		}
		applied = true
		requeue, err = m.ended(r, b, res, retryable)
		return err
	})
	if err != nil || !applied {
		return err
	}
	m.logEnd(r, res)
	m.changed(r)
	if m.cfg.Finished != nil {
		m.cfg.Finished(res.State)
	}
	if requeue {
		m.enqueue(r)
	}
	return nil
}

// Owns says whether a turn on the workers is live: the run's current
// attempt, offered or claimed, not stopped. What a worker says of any
// other turn is not held for it.
func (m *Manager) Owns(runID, attempt string) bool {
	r, err := m.cfg.Store.Run(runID)
	return err == nil && r.Current != nil && r.Current.Attempt == attempt && r.Current.Remote && !r.Current.Stopped && inFlight(r)
}

// inFlight reports whether a run's current turn may still end it: claimed
// or running, or offered to the workers and not claimed yet.
func inFlight(r *factory.Run) bool {
	switch r.State {
	case factory.StateClaimed, factory.StateInProgress:
		return true
	case factory.StateQueued:
		return r.Current != nil && r.Current.Remote
	case factory.StateBlocked:
		return r.Approving() // waiting for a person, its turn still live
	}
	return false
}

// ended changes a run, within an UpdateRun, to the end of its turn, and
// says whether pending follow-ups queue it again.
func (m *Manager) ended(r *factory.Run, b *store.Batch, res runtime.Result, retryable bool) (requeue bool, err error) {
	now := time.Now().UTC()
	pending, err := m.cfg.Store.FollowUps(r.ID)
	if err != nil {
		return false, err
	}
	if a := r.Asking; a != nil && res.State == factory.StateSucceeded && len(pending) == 0 {
		// The agent asked a person (ask_human) and ended its turn: the run
		// waits for the answer, which comes as a follow-up.
		res.State, res.Message = factory.StateBlocked, "waiting for a person's answer: "+a.Question
	}
	if e := r.Exceeded; e != nil && res.State != factory.StateError {
		// The gateway refused a model call past the budget: however the
		// agent took it, the run ran out of its budget.
		res.State, res.Code, res.Message = factory.StateFailed, runtime.CodeBudgetExceeded, e.Message()
	}
	if err := moveToEnd(r, &res); err != nil {
		return false, err
	}
	m.closeTurn(r, b, res, now)
	r.UpdatedAt, r.FinishedAt = now, &now
	r.Process, r.Current = nil, nil // no turn is in flight any more
	r.StatusMessage = &factory.StatusMessage{Message: res.Message, Retryable: retryable, ErrorCode: res.Code}
	if r.StatusMessage.ErrorCode == "" {
		switch res.State {
		case factory.StateError:
			r.StatusMessage.ErrorCode = runtime.CodeInternal
		case factory.StateFailed:
			r.StatusMessage.ErrorCode = runtime.CodeAgentProcessFailed
		}
	}
	m.collectArtifacts(r, b, res.Links, now)
	b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "finished", State: res.State, Message: res.Message})
	requeue = len(pending) > 0 && res.State != factory.StateCancelled && !m.stopped.Load()
	if requeue {
		return true, r.MoveTo(factory.StateQueued)
	}
	return false, nil
}

// moveToEnd moves a run in flight to the state its turn ended in. A turn
// whose agent ran to an end (SUCCEEDED, BLOCKED) when its start was not
// heard, or while it waited for an approval, passes through INPROGRESS; an end the table does not allow from
// where the run is (an agent's success before any worker took the turn)
// is recorded as ERROR, saying so.
func moveToEnd(r *factory.Run, res *runtime.Result) error {
	if (r.State == factory.StateClaimed || r.State == factory.StateBlocked) && (res.State == factory.StateSucceeded || res.State == factory.StateBlocked) {
		if err := r.MoveTo(factory.StateInProgress); err != nil {
			return err
		}
	}
	if factory.CanMove(r.State, res.State) {
		return r.MoveTo(res.State)
	}
	res.Message = fmt.Sprintf("the turn ended %s while the run was %s: %s", res.State, r.State, res.Message)
	res.State, res.Code = factory.StateError, runtime.CodeInternal
	return r.MoveTo(factory.StateError)
}

// collectArtifacts adds what the turn produced to the run, in the batch
// that ends the turn: the output folder's files and manifest, and the
// links the executor saw. What cannot be taken is said on the timeline.
func (m *Manager) collectArtifacts(r *factory.Run, b *store.Batch, links []factory.Artifact, now time.Time) {
	seen := artifacts.Seen{Digests: r.ArtifactDigests, Count: len(r.Artifacts), Bytes: r.ArtifactBytes}
	found, problems := artifacts.Collect(m.OutputDir(r.ID), seen, now)
	for _, l := range links {
		l.CreatedAt = now
		found = append(found, artifacts.Found{Artifact: l, Key: string(l.Type) + ":" + l.Data.URL})
	}
	for _, f := range found {
		if _, dup := r.ArtifactDigests[f.Key]; dup && f.Digest == "" || len(r.Artifacts) >= artifacts.MaxPerRun {
			continue
		}
		if r.ArtifactDigests == nil {
			r.ArtifactDigests = map[string]string{}
		}
		r.ArtifactDigests[f.Key] = f.Digest
		r.ArtifactBytes += int64(len(f.Bytes))
		r.Artifacts = append(r.Artifacts, f.Artifact)
		b.PutArtifact(r.ID, f.Artifact, f.Bytes)
	}
	for _, p := range problems {
		b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "message", Message: "artifacts: " + p})
	}
}

// follow follows a turn a worker holds, after a restart (or when a worker
// claimed a turn offered again while the run waited for its place), and
// records how it ended.
func (m *Manager) follow(ctx context.Context, id string) {
	r, err := m.cfg.Store.Run(id)
	if err != nil || r.Current == nil {
		m.cfg.Log.Error("following a run's turn on its worker", "run", id, "err", err)
		return
	}
	attempt := r.Current.Attempt
	res, ok := runtime.Result{}, false
	if m.cfg.Workers != nil {
		t := &runtime.Turn{RunID: id, Attempt: attempt, Number: r.Turns, Worker: r.Worker, Dir: m.RunDir(id)}
		res, ok = m.cfg.Workers.Follow(ctx, t, func(e runtime.Event) { m.event(id, attempt, e) })
	}
	if !ok {
		res = runtime.Result{State: factory.StateError, Message: fmt.Sprintf("worker %s held the run when the server stopped, and this server runs no workers now; send a follow-up to run it again", r.Worker)}
	}
	m.cfg.Log.Info("followed a run's turn on its worker after a restart", "run", id, "worker", r.Worker, "state", res.State)
	m.turnEnded(ctx, id, attempt, res)
}
