package foreman

import (
	"fmt"
	"slices"
	"strings"

	"factory"
	"factory/internal/store"
)

// Ask is an ask_human call.
type Ask struct {
	Question string
	Kind     string // question (default), spec_review, pr_review
	Options  []string
	Links    []factory.InboxLink
}

// MaxQuestion bounds a question's bytes, and MaxOptions its options.
const (
	MaxQuestion = 8 << 10
	MaxOptions  = 20
)

// Ask puts a caller's question to a person: an inbox item, and the run
// marked as asking, so that its turn ends BLOCKED (the run manager) and
// the answer continues it as a follow-up. A spec review withdraws an
// approval given before.
func (f *Foreman) Ask(caller *factory.Run, a Ask) (*factory.InboxItem, error) {
	a.Question = strings.TrimSpace(a.Question)
	switch {
	case a.Question == "":
		return nil, factory.Errorf(factory.EINVALID, "question: say what you ask")
	case len(a.Question) > MaxQuestion:
		return nil, factory.Errorf(factory.EINVALID, "question: at most %d bytes", MaxQuestion)
	case len(a.Options) > MaxOptions:
		return nil, factory.Errorf(factory.EINVALID, "options: at most %d", MaxOptions)
	}
	if a.Kind == "" {
		a.Kind = factory.InboxQuestion
	}
	if !slices.Contains(factory.AskKinds, a.Kind) {
		return nil, factory.Errorf(factory.EINVALID, "kind: %q is not one of %s", a.Kind, strings.Join(factory.AskKinds, ", "))
	}
	if a.Kind == factory.InboxSpecReview {
		a.Options = []string{factory.AnswerApprove, factory.AnswerRequestChanges}
	}
	t, err := f.TaskOfRun(caller)
	if err != nil {
		return nil, err
	}
	it := &factory.InboxItem{UID: factory.NewUID(factory.PrefixInbox), FactoryUID: caller.FactoryUID, RunID: caller.ID, Kind: a.Kind,
		Title: firstLine(a.Question), Body: a.Question, Options: a.Options, CreatedAt: now(), Links: a.Links}
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.cfg.Store.NewLogBatch()
	if t != nil {
		it.TaskUID = t.UID
		if a.Kind == factory.InboxSpecReview {
			t.SpecApproved, t.SpecReview, t.UpdatedAt = false, it.UID, now()
			b.PutTask(t)
		}
	}
	b.PutInboxItem(it)
	if err := b.Commit(); err != nil {
		return nil, err
	}
	_, err = f.cfg.Store.UpdateRun(caller.ID, true, func(r *factory.Run, b *store.Batch) error {
		r.Asking = &factory.Asking{Item: it.UID, Question: it.Title}
		b.AddRunEvent(r, factory.RunEvent{Time: it.CreatedAt, Kind: "message", Message: fmt.Sprintf("[ask_human] %s (%s, inbox item %s)", it.Title, it.Kind, it.UID)})
		return nil
	})
	return it, err
}

// firstLine is a text's first line, at most 200 bytes of it.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// Answer answers an inbox item: a question with one of its options (or
// anything, when it offers none), a spec review with approve or
// request_changes. The run that asked continues its conversation with the
// answer; an approved spec lets its task into IMPLEMENT.
func (f *Foreman) Answer(uid, answer, comment string, by *factory.Creator) (*factory.InboxItem, error) {
	answer, comment = strings.TrimSpace(answer), strings.TrimSpace(comment)
	f.mu.Lock()
	it, err := f.openItem(uid)
	if err == nil {
		err = checkAnswer(it, &answer)
	}
	if err != nil {
		f.mu.Unlock()
		return nil, err
	}
	at := now()
	it.Resolved, it.Answer, it.Comment, it.AnsweredBy = &at, answer, comment, by
	if it.Kind == factory.InboxQuestion {
		it.Kind = factory.InboxAnsweredQuestion
	}
	b := f.cfg.Store.NewLogBatch()
	b.PutInboxItem(it)
	if t, err := f.cfg.Store.Task(it.TaskUID); err == nil && it.Kind == factory.InboxSpecReview && (t.SpecReview == "" || t.SpecReview == it.UID) {
		t.SpecApproved, t.UpdatedAt = answer == factory.AnswerApprove, at
		b.PutTask(t)
	}
	err = b.Commit()
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	_, err = f.cfg.Store.UpdateRun(it.RunID, true, func(r *factory.Run, b *store.Batch) error {
		if r.Asking == nil || r.Asking.Item != it.UID {
			return store.ErrNoChange
		}
		r.Asking = nil
		return nil
	})
	if err != nil && !store.IsNotFound(err) {
		return it, err
	}
	msg := answerMessage(it)
	if err := f.cfg.Runs.ContinueWith(it.RunID, "answer:"+it.UID, msg, nil, nil); err != nil && !isEnded(err) {
		return it, err
	}
	return it, nil
}

// openItem reads an item that waits for an answer.
func (f *Foreman) openItem(uid string) (*factory.InboxItem, error) {
	it, err := f.cfg.Store.InboxItem(uid)
	if store.IsNotFound(err) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no inbox item %s", uid)
	}
	if err != nil {
		return nil, err
	}
	if it.Resolved != nil {
		return nil, &factory.Error{Code: factory.ECONFLICT, Final: true, Message: fmt.Sprintf("inbox item %s is resolved already", uid)}
	}
	if it.Kind == factory.InboxApproval {
		return nil, factory.Errorf(factory.EINVALID, "inbox item %s is a tool call's approval: answer it with POST /v1/agent/runs/%s/approvals/%s", uid, it.RunID, uid)
	}
	return it, nil
}

// checkAnswer accepts an answer the item takes, in the item's spelling.
func checkAnswer(it *factory.InboxItem, answer *string) error {
	if *answer == "" {
		return factory.Errorf(factory.EINVALID, "answer: required")
	}
	if len(*answer) > MaxQuestion {
		return factory.Errorf(factory.EINVALID, "answer: at most %d bytes", MaxQuestion)
	}
	if len(it.Options) == 0 {
		return nil
	}
	for _, o := range it.Options {
		if strings.EqualFold(o, *answer) {
			*answer = o
			return nil
		}
	}
	return factory.Errorf(factory.EINVALID, "answer: one of %s", strings.Join(it.Options, ", "))
}

// answerMessage is how an answer reads to the agent that asked.
func answerMessage(it *factory.InboxItem) string {
	var b strings.Builder
	who := "A person"
	if it.AnsweredBy != nil && it.AnsweredBy.DisplayName != "" {
		who = it.AnsweredBy.DisplayName
	}
	switch it.Kind {
	case factory.InboxSpecReview:
		fmt.Fprintf(&b, "%s reviewed the spec (%s): %s", who, it.Title, it.Answer)
	default:
		fmt.Fprintf(&b, "%s answered your question (%s): %s", who, it.Title, it.Answer)
	}
	if it.Comment != "" {
		fmt.Fprintf(&b, "\nComment: %s", it.Comment)
	}
	return b.String()
}

// resolveItemsOf resolves the open items of a run that ended: nobody is
// asked anything by a run that is over.
func (f *Foreman) resolveItemsOf(r *factory.Run) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	items, err := f.cfg.Store.InboxItemsOfRun(r.ID)
	if err != nil || len(items) == 0 {
		return err
	}
	b := f.cfg.Store.NewLogBatch()
	n := 0
	for _, it := range items {
		if it.RunID == r.ID && it.Resolved == nil {
			at := now()
			it.Resolved = &at
			b.PutInboxItem(it)
			n++
		}
	}
	if n == 0 {
		b.Abort()
		return nil
	}
	return b.Commit()
}

// InboxQuery is a list of the inbox's filters.
type InboxQuery struct {
	Reader     string // the API key reading: is_read is theirs
	Resolved   bool   // resolved items too
	FactoryUID string
	TaskUID    string
	Kinds      []string
}

// Inbox lists items as the SDK reads them, newest first: the open ones,
// or every one.
func (f *Foreman) Inbox(q InboxQuery) ([]factory.InboxWire, error) {
	items, err := f.cfg.Store.InboxItems()
	if err != nil {
		return nil, err
	}
	out := []factory.InboxWire{}
	tasks := map[string]*factory.Task{}
	for _, it := range items {
		if it.Resolved != nil && !q.Resolved || q.FactoryUID != "" && it.FactoryUID != q.FactoryUID ||
			q.TaskUID != "" && it.TaskUID != q.TaskUID || len(q.Kinds) > 0 && !slices.Contains(q.Kinds, it.Kind) {
			continue
		}
		out = append(out, f.wire(it, q.Reader, tasks))
	}
	return out, nil
}

// Item reads one item as the SDK reads it.
func (f *Foreman) Item(uid, reader string) (factory.InboxWire, error) {
	it, err := f.cfg.Store.InboxItem(uid)
	if store.IsNotFound(err) {
		return factory.InboxWire{}, factory.Errorf(factory.ENOTFOUND, "no inbox item %s", uid)
	}
	if err != nil {
		return factory.InboxWire{}, err
	}
	return f.wire(it, reader, map[string]*factory.Task{}), nil
}

func (f *Foreman) wire(it *factory.InboxItem, reader string, tasks map[string]*factory.Task) factory.InboxWire {
	stage, origin := factory.StageTriage, ""
	if it.TaskUID != "" {
		t, ok := tasks[it.TaskUID]
		if !ok {
			t, _ = f.cfg.Store.Task(it.TaskUID)
			tasks[it.TaskUID] = t
		}
		if t != nil {
			stage, origin = t.Stage, t.TicketURL
		}
	}
	return it.Wire(reader, stage, origin)
}

// MarkRead marks items read (or unread) for a reader; each item's outcome
// says whether it was there.
func (f *Foreman) MarkRead(reader string, uids []string, read bool) ([]Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.cfg.Store.NewLogBatch()
	out := make([]Outcome, 0, len(uids))
	for _, uid := range uids {
		it, err := f.cfg.Store.InboxItem(uid)
		if err != nil && !store.IsNotFound(err) {
			b.Abort()
			return nil, err
		}
		out = append(out, Outcome{UID: uid, OK: err == nil})
		if err != nil {
			continue
		}
		has := slices.Contains(it.ReadBy, reader)
		switch {
		case read && !has:
			it.ReadBy = append(it.ReadBy, reader)
		case !read && has:
			it.ReadBy = slices.DeleteFunc(it.ReadBy, func(r string) bool { return r == reader })
		default:
			continue
		}
		b.PutInboxItem(it)
	}
	return out, b.Commit()
}

// Outcome is one item's answer to a read or unread mark (the SDK's
// InboxMarkReadResponse.Outcome).
type Outcome struct {
	UID string `json:"notification_uid"`
	OK  bool   `json:"ok"`
}
