package runs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"factory"
	"factory/internal/runtime"
	"factory/internal/store"
)

// DefaultApprovalTimeout is how long a tool call waits for a person's
// approval before the agent's reject option answers it
// (runtime.approvalTimeout; an environment's approvalTimeout overrides it).
const DefaultApprovalTimeout = time.Hour

// ErrTurnOver refuses an approval asked for a turn that is no longer the
// run's live one.
var ErrTurnOver = errors.New("the run's turn is over")

// approvalUID is the inbox item of a turn's request: asking again (a
// worker's retry, after a restart) finds the same one.
func approvalUID(attempt, key string) string {
	return factory.DerivedID(factory.PrefixInbox, "approval", attempt, key)
}

// Approve puts a tool call of a turn's agent to a person (permissions
// ask, docs/spec/foreman.md): an inbox item of kind approval, the run
// BLOCKED while its turn goes on, and waits for the answer (any option
// the agent offered) or the timeout, which answers with the agent's
// reject option. ctx ending returns its error; the item waits on, and
// asking again waits for it again.
func (m *Manager) Approve(ctx context.Context, runID, attempt string, req runtime.ApprovalRequest) (runtime.ApprovalAnswer, error) {
	return m.approve(ctx, runID, attempt, "", req)
}

// ApproveFor is Approve for a turn a worker runs: the worker must hold
// the run.
func (m *Manager) ApproveFor(ctx context.Context, worker, runID, attempt string, req runtime.ApprovalRequest) (runtime.ApprovalAnswer, error) {
	return m.approve(ctx, runID, attempt, worker, req)
}

func (m *Manager) approve(ctx context.Context, runID, attempt, worker string, req runtime.ApprovalRequest) (runtime.ApprovalAnswer, error) {
	if len(req.Options) == 0 || len(req.Options) > 20 || req.Key == "" || len(req.Key) > 512 {
		return runtime.ApprovalAnswer{}, factory.Errorf(factory.EINVALID, "an approval needs a key and 1 to 20 options")
	}
	it, timeout, err := m.askApproval(runID, attempt, worker, req)
	if err != nil {
		return runtime.ApprovalAnswer{}, err
	}
	for it.Resolved == nil {
		wake := m.waitApproval(it.UID)
		left := time.Until(it.CreatedAt.Add(timeout))
		if left <= 0 {
			if _, err := m.resolveApproval(runID, it.UID, rejectOf(it.Approval), nil, true); err != nil && !errors.Is(err, errResolved) {
				return runtime.ApprovalAnswer{}, err
			}
		} else {
			t := time.NewTimer(left)
			select {
			case <-wake:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				m.unwaitApproval(it.UID, wake)
				return runtime.ApprovalAnswer{}, ctx.Err()
			}
			t.Stop()
		}
		m.unwaitApproval(it.UID, wake)
		if it, err = m.cfg.Store.InboxItem(it.UID); err != nil {
			return runtime.ApprovalAnswer{}, err
		}
	}
	switch {
	case it.Approval != nil && it.Approval.Timeout && it.Approval.Chosen == "":
		return runtime.ApprovalAnswer{}, errors.New("nobody answered in time, and the agent offered no reject option")
	case it.Approval == nil || it.Approval.Chosen == "":
		return runtime.ApprovalAnswer{}, ErrTurnOver // resolved unanswered: the turn ended
	}
	return runtime.ApprovalAnswer{OptionID: it.Approval.Chosen, TimedOut: it.Approval.Timeout}, nil
}

// askApproval finds the request's inbox item, or makes it: the run goes
// BLOCKED (its turn live), its status message and timeline say what is
// asked. It returns the approval's timeout too.
func (m *Manager) askApproval(runID, attempt, worker string, req runtime.ApprovalRequest) (*factory.InboxItem, time.Duration, error) {
	uid := approvalUID(attempt, req.Key)
	var it *factory.InboxItem
	var timeout time.Duration
	_, err := m.cfg.Store.UpdateRun(runID, true, func(r *factory.Run, b *store.Batch) error {
		if !r.Live(attempt) || worker != "" && r.Worker != worker {
			return fmt.Errorf("%w: attempt %s is not run %s's live turn", ErrTurnOver, attempt, runID)
		}
		timeout = m.approvalTimeout(r)
		if have, err := m.cfg.Store.InboxItem(uid); err == nil {
			it = have
			return store.ErrNoChange
		} else if !store.IsNotFound(err) {
			return err
		}
		it = m.approvalItem(r, uid, req)
		b.PutInboxItem(it)
		if r.State == factory.StateClaimed { // its start is on its way from the worker
			if err := r.MoveTo(factory.StateInProgress); err != nil {
				return err
			}
		}
		if r.State == factory.StateInProgress {
			if err := r.MoveTo(factory.StateBlocked); err != nil {
				return err
			}
		}
		r.Current.Approvals = append(r.Current.Approvals, uid)
		r.UpdatedAt = it.CreatedAt
		msg := fmt.Sprintf("waiting for a person to approve %s (inbox item %s; it answers itself with %q in %s)",
			req.Title, uid, rejectOf(it.Approval), timeout)
		r.StatusMessage = &factory.StatusMessage{Message: msg}
		b.AddRunEvent(r, factory.RunEvent{Time: it.CreatedAt, Kind: factory.EventApprovalRequested, Message: msg, State: factory.StateBlocked,
			Data: map[string]any{"item_uid": uid, "tool_call_id": req.ToolCallID, "title": req.Title, "tool_kind": req.Kind,
				"options": it.Approval.Options, "paths": req.Paths, "expires_at": it.CreatedAt.Add(timeout)}})
		return nil
	})
	if err == nil && it != nil {
		m.logRunID(runID, "a tool call waits for a person's approval", "item", uid)
	}
	return it, timeout, err
}

// approvalItem is the inbox item that asks a person about a tool call.
func (m *Manager) approvalItem(r *factory.Run, uid string, req runtime.ApprovalRequest) *factory.InboxItem {
	ap := &factory.Approval{ToolCallID: req.ToolCallID, Title: req.Title, Kind: req.Kind, Arguments: req.Arguments}
	for _, o := range req.Options {
		ap.Options = append(ap.Options, factory.ApprovalOption{ID: o.ID, Name: o.Name, Kind: o.Kind})
	}
	var body strings.Builder
	fmt.Fprintf(&body, "The agent of run %s asks to run a tool call: %s", r.ID, req.Title)
	if req.Kind != "" {
		fmt.Fprintf(&body, " (%s)", req.Kind)
	}
	if len(req.Paths) > 0 {
		fmt.Fprintf(&body, "\nPaths: %s", strings.Join(req.Paths, ", "))
	}
	if req.Arguments != "" {
		fmt.Fprintf(&body, "\nArguments: %s", req.Arguments)
	}
	it := &factory.InboxItem{UID: uid, FactoryUID: r.FactoryUID, RunID: r.ID, Kind: factory.InboxApproval,
		Title: "Approve: " + req.Title, Body: body.String(), CreatedAt: time.Now().UTC(), Approval: ap}
	for _, o := range ap.Options {
		it.Options = append(it.Options, o.ID)
	}
	if t, err := m.cfg.Store.TaskByConversation(r.Conversation()); err == nil {
		it.TaskUID = t.UID
	}
	return it
}

// approvalTimeout is how long a run's approvals wait: its environment's
// approvalTimeout, else the server's.
func (m *Manager) approvalTimeout(r *factory.Run) time.Duration {
	return cmp.Or(m.cfg.Environments[r.Environment].ApprovalTimeout, m.cfg.ApprovalTimeout, DefaultApprovalTimeout)
}

// errResolved refuses an answer to an item answered already.
var errResolved = errors.New("resolved already")

// AnswerApproval answers a run's approval with one of the options its
// agent offered, for a person (by): the agent's session goes on with it,
// and the run back to INPROGRESS once nothing else waits for a person.
func (m *Manager) AnswerApproval(runID, itemUID, optionID string, by *factory.Creator) (*factory.InboxItem, error) {
	it, err := m.resolveApproval(runID, itemUID, optionID, by, false)
	switch {
	case errors.Is(err, errResolved):
		return nil, &factory.Error{Code: factory.ECONFLICT, Final: true, Message: fmt.Sprintf("approval %s is resolved already", itemUID)}
	case errors.Is(err, store.ErrNotFound):
		return nil, ErrNotFound
	}
	return it, err
}

// resolveApproval records an approval's answer (a person's, or the
// timeout's) and wakes the turn waiting for it.
func (m *Manager) resolveApproval(runID, uid, optionID string, by *factory.Creator, timedOut bool) (*factory.InboxItem, error) {
	var it *factory.InboxItem
	_, err := m.cfg.Store.UpdateRun(runID, true, func(r *factory.Run, b *store.Batch) error {
		var err error
		if it, err = m.cfg.Store.InboxItem(uid); store.IsNotFound(err) || err == nil && (it.RunID != runID || it.Approval == nil) {
			return factory.Errorf(factory.ENOTFOUND, "run %s has no approval %s", runID, uid)
		} else if err != nil {
			return err
		}
		if it.Resolved != nil {
			return errResolved
		}
		offered := slices.ContainsFunc(it.Approval.Options, func(o factory.ApprovalOption) bool { return o.ID == optionID })
		if !offered && !(timedOut && optionID == "") { // a timeout without a reject option answers none

			return factory.Errorf(factory.EINVALID, "option_id: %q is not one of the agent's options: %s", optionID, strings.Join(it.Options, ", "))
		}
		now := time.Now().UTC()
		it.Resolved, it.Answer, it.AnsweredBy = &now, optionID, by
		it.Approval.Chosen, it.Approval.Timeout = optionID, timedOut
		b.PutInboxItem(it)
		return m.approvalAnswered(r, b, it, now)
	})
	if err != nil {
		return nil, err
	}
	m.wakeApproval(uid)
	return it, nil
}

// approvalAnswered takes an answered approval off the run's turn: the run
// goes back to INPROGRESS when no other waits, and the timeline says who
// answered what.
func (m *Manager) approvalAnswered(r *factory.Run, b *store.Batch, it *factory.InboxItem, now time.Time) error {
	who := "a person"
	if it.AnsweredBy != nil && it.AnsweredBy.DisplayName != "" {
		who = it.AnsweredBy.DisplayName
	}
	if it.Approval.Timeout {
		who = "the timeout"
	}
	msg := fmt.Sprintf("%s answered the approval of %s: %s", who, it.Approval.Title, optionName(it.Approval, it.Answer))
	if r.Current != nil {
		r.Current.Approvals = slices.DeleteFunc(r.Current.Approvals, func(u string) bool { return u == it.UID })
		if len(r.Current.Approvals) == 0 && r.State == factory.StateBlocked {
			if err := r.MoveTo(factory.StateInProgress); err != nil {
				return err
			}
			r.StatusMessage = &factory.StatusMessage{Message: msg}
		}
	}
	r.UpdatedAt = now
	data := map[string]any{"item_uid": it.UID, "option_id": it.Answer, "timed_out": it.Approval.Timeout}
	if it.AnsweredBy != nil {
		data["answered_by"] = it.AnsweredBy
	}
	b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: factory.EventApprovalAnswered, Message: msg, Data: data})
	return nil
}

// waitApproval returns a channel closed when the item is answered.
func (m *Manager) waitApproval(uid string) chan struct{} {
	ch := make(chan struct{})
	m.approvalMu.Lock()
	if m.approvals == nil {
		m.approvals = map[string][]chan struct{}{}
	}
	m.approvals[uid] = append(m.approvals[uid], ch)
	m.approvalMu.Unlock()
	return ch
}

func (m *Manager) unwaitApproval(uid string, ch chan struct{}) {
	m.approvalMu.Lock()
	defer m.approvalMu.Unlock()
	m.approvals[uid] = slices.DeleteFunc(m.approvals[uid], func(c chan struct{}) bool { return c == ch })
	if len(m.approvals[uid]) == 0 {
		delete(m.approvals, uid)
	}
}

func (m *Manager) wakeApproval(uid string) {
	m.approvalMu.Lock()
	defer m.approvalMu.Unlock()
	for _, ch := range m.approvals[uid] {
		close(ch)
	}
	delete(m.approvals, uid)
}

// rejectOf is the agent's option that refuses the tool call: its
// reject_once, else its reject_always; "" when it offered none.
func rejectOf(a *factory.Approval) string {
	for _, kind := range []string{"reject_once", "reject_always"} {
		for _, o := range a.Options {
			if o.Kind == kind {
				return o.ID
			}
		}
	}
	return ""
}

// optionName is an option's name, with its ID.
func optionName(a *factory.Approval, id string) string {
	for _, o := range a.Options {
		if o.ID == id {
			return fmt.Sprintf("%s (%s)", o.Name, o.ID)
		}
	}
	return "none (the agent offered no reject option)"
}

// logRunID logs a line of a run by its ID.
func (m *Manager) logRunID(id, msg string, more ...any) {
	m.cfg.Log.Info(msg, append([]any{"run", id}, more...)...)
}
