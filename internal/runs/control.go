package runs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"factory"
	"factory/internal/runtime"
	"factory/internal/store"
)

// Cancel ends a run that has not ended, whatever it waits for or does:
// CANCELLED is recorded durably first, so the run reads CANCELLED from the
// moment Cancel returns, and nothing the turn reports later changes that;
// then whatever runs is stopped (its host leaves no process of it). A run
// that has ended answers ErrTerminal.
func (m *Manager) Cancel(id string) (*factory.Run, error) {
	r, err := m.cfg.Store.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) error {
		if r.State.Terminal() {
			return fmt.Errorf("%w: it is %s", ErrTerminal, r.State)
		}
		if err := r.MoveTo(factory.StateCancelled); err != nil {
			return err
		}
		now := time.Now().UTC()
		r.UpdatedAt, r.FinishedAt = now, &now
		r.StatusMessage = &factory.StatusMessage{Message: "cancelled"}
		if r.Current != nil {
			r.Current.Stopped = true // its late end changes nothing; a claim of it is refused
		}
		b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "finished", State: factory.StateCancelled, Message: "cancelled"})
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.queue = slices.DeleteFunc(m.queue, func(q queued) bool { return q.id == id })
	a := m.active[id]
	m.mu.Unlock()
	if a != nil {
		a.cancel(context.Canceled)
	}
	m.logRun(r, "run finished", "result", string(factory.StateCancelled))
	m.changed(r)
	if m.cfg.Finished != nil {
		m.cfg.Finished(factory.StateCancelled)
	}
	return r, nil
}

// Interrupt stops a run's current turn without ending the run: the agent
// is asked to stop (ACP session/cancel; an exec agent's group gets
// SIGINT), and the run is BLOCKED until a follow-up continues it. Only a
// run whose agent runs (INPROGRESS) can be interrupted: ErrNotLive else.
func (m *Manager) Interrupt(id string) error {
	r, err := m.cfg.Store.Run(id)
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotFound
	} else if err != nil {
		return err
	}
	m.mu.Lock()
	a, active := m.active[id]
	m.mu.Unlock()
	if !active || r.State != factory.StateInProgress && !r.Approving() {
		return ErrNotLive
	}
	a.cancel(runtime.ErrInterrupted)
	return nil
}

// FollowUp sends a message to a run. During a turn (or while queued) it
// waits for the next turn; a run that has ended is continued: it goes back
// to QUEUED with the message as its next turn. Several keep their order.
func (m *Manager) FollowUp(id, message string) (*factory.Run, error) {
	r, _, err := m.SendFollowUp(id, message, nil)
	return r, err
}

// Follow-up outcomes (the platform API's): queued for the run's next turn,
// or continuing a run that had ended. (ACP has no input during a turn, so
// a follow-up never reaches a live session.)
const (
	OutcomeQueuedPrompt     = "queued_prompt"
	OutcomeHandoffExecution = "handoff_execution"
)

// FollowUpAnswer is what a follow-up became: its ID (derived from the run
// and its place in the timeline) and its outcome.
type FollowUpAnswer struct {
	ID      string `json:"followup_id"`
	Outcome string `json:"outcome"`
}

// SendFollowUp is FollowUp, saying what the follow-up became; files are
// attached to the run (a name it has already is refused) and laid out in
// its workspace before its next turn. A run that ended or is BLOCKED
// between turns goes back to QUEUED; its next turn runs where its
// workspace is. A run BLOCKED on a tool call's approval has a live turn:
// the follow-up waits for the next one.
func (m *Manager) SendFollowUp(id, message string, files []AttachmentData) (*factory.Run, FollowUpAnswer, error) {
	return m.sendFollowUp(id, "", message, files, nil)
}

// ContinueWith sends a follow-up to a run once per key, however many times
// it is asked (an event on a work item, evaluated again after a crash):
// sent, or sent before, is no error. from, when set, is the event's origin:
// the comment or chat message that asked becomes the run's origin's (its
// write-back reacts to it).
func (m *Manager) ContinueWith(id, key, message string, files []AttachmentData, from *factory.Origin) error {
	_, _, err := m.sendFollowUp(id, key, message, files, from)
	return err
}

func (m *Manager) sendFollowUp(id, once, message string, files []AttachmentData, from *factory.Origin) (*factory.Run, FollowUpAnswer, error) {
	requeue := false
	var ans FollowUpAnswer
	r, err := m.cfg.Store.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) error {
		if once != "" {
			if sent, err := m.cfg.Store.SentFollowUp(id, once); err != nil || sent {
				return cmpErr(err, store.ErrNoChange)
			}
			b.MarkFollowUp(id, once)
		}
		now := time.Now().UTC()
		for _, f := range files {
			if err := CheckAttachmentName(f.Name); err != nil {
				return err
			}
			if slices.ContainsFunc(r.Attachments, func(a factory.Attachment) bool { return a.Name == f.Name }) {
				return fmt.Errorf("%w: the run has an attachment %q already", ErrAttachmentName, f.Name)
			}
			b.PutRunAttachment(r.ID, f.Name, f.Data)
			r.Attachments = append(r.Attachments, factory.Attachment{Name: f.Name, MimeType: f.MimeType, Size: int64(len(f.Data))})
		}
		if o := from; o != nil && o.CommentID != 0 && r.Origin != nil {
			r.Origin.CommentID, r.Origin.ReviewComment = o.CommentID, o.ReviewComment
		}
		if o := from; o != nil && o.Message != "" && r.Origin != nil {
			r.Origin.Message = o.Message // a chat's reply: its reaction
		}
		ans.ID = factory.DerivedID("fu_", id, strconv.Itoa(r.Events))
		b.QueueFollowUp(id, r.Events, message) // numbered after everything before it
		b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "followup", Message: message})
		ans.Outcome = OutcomeQueuedPrompt
		if r.State.Terminal() {
			ans.Outcome = OutcomeHandoffExecution
		}
		if requeue = r.State.Terminal() || r.State == factory.StateBlocked && !r.Approving(); requeue {
			if err := r.MoveTo(factory.StateQueued); err != nil {
				return err
			}
			r.FinishedAt = nil
		}
		r.UpdatedAt = now
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, ans, ErrNotFound
	}
	if err != nil {
		return nil, ans, err
	}
	if requeue {
		m.enqueue(r)
	}
	m.changed(r)
	return r, ans, nil
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}
