package foreman

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"factory"
	"factory/internal/cursor"
	"factory/internal/runs"
	"factory/internal/store"
)

// TaskFields are what a create or an update sets: nil leaves a field as
// it is.
type TaskFields struct {
	Title       *string
	Description *string
	Stage       *factory.TaskStage
}

// notFound is the error of a task that is not there for the caller.
func notFound(uid string) error {
	return factory.Errorf(factory.ENOTFOUND, "no task %s in this factory", uid)
}

// CreateTask binds a task to a conversation that has a run of the
// factory, and no live task (docs/spec/foreman.md). The stage defaults to
// TRIAGE.
func (f *Foreman) CreateTask(fac *factory.Factory, conversationID string, in TaskFields, author *factory.Creator) (*factory.Task, error) {
	if in.Title == nil || strings.TrimSpace(*in.Title) == "" {
		return nil, factory.Errorf(factory.EINVALID, "title: required, and not empty")
	}
	if conversationID == "" {
		return nil, factory.Errorf(factory.EINVALID, "conversation_id: required")
	}
	run, err := f.latestRunOf(conversationID)
	if err != nil {
		return nil, err
	}
	if run == nil || run.FactoryUID != fac.UID {
		return nil, factory.Errorf(factory.EINVALID, "conversation_id: conversation %s has no run of factory %s", conversationID, fac.UID)
	}
	return f.bind(fac, conversationID, run, in, author)
}

// bind creates a task bound to a conversation whose latest run is run.
func (f *Foreman) bind(fac *factory.Factory, conversationID string, run *factory.Run, in TaskFields, author *factory.Creator) (*factory.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t, err := f.cfg.Store.TaskByConversation(conversationID); err == nil {
		return nil, &factory.Error{Code: factory.ECONFLICT, Message: fmt.Sprintf("conversation %s is bound to task %s already", conversationID, t.UID), Final: true}
	} else if !store.IsNotFound(err) {
		return nil, err
	}
	t := &factory.Task{UID: factory.NewUID(factory.PrefixTask), FactoryUID: fac.UID, ConversationID: conversationID,
		RunID: run.ID, Stage: factory.StageTriage, Title: strings.TrimSpace(*in.Title), CreatedAt: now(), Author: author}
	t.UpdatedAt = t.CreatedAt
	if in.Description != nil {
		t.Description = *in.Description
	}
	if in.Stage != nil {
		t.Stage = *in.Stage
	}
	if t.Author == nil {
		t.Author = run.Creator
	}
	return t, f.putTask(t)
}

// latestRunOf is the newest run of a conversation, or nil.
func (f *Foreman) latestRunOf(conversationID string) (*factory.Run, error) {
	if r, err := f.cfg.Store.Run(conversationID); err == nil && r.Conversation() == conversationID {
		return r, nil // a run ID given for its own conversation
	}
	page, err := f.cfg.Store.ListRuns(store.RunQuery{Equal: map[string]string{"conversation": conversationID}, SortBy: "created_at", Limit: 1})
	if err != nil || len(page.Runs) == 0 {
		return nil, err
	}
	return page.Runs[0], nil
}

func (f *Foreman) putTask(t *factory.Task) error {
	b := f.cfg.Store.NewLogBatch()
	b.PutTask(t)
	return b.Commit()
}

// taskForWorkItem creates the task of a work item's root run, once: its
// title is the run's, its ticket the work item.
func (f *Foreman) taskForWorkItem(r *factory.Run) (*factory.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	conv := r.Conversation()
	if t, err := f.cfg.Store.TaskByConversation(conv); err == nil || !store.IsNotFound(err) {
		return t, err
	}
	o := r.Origin
	source, id, _ := strings.Cut(o.WorkItem, ":")
	t := &factory.Task{UID: factory.DerivedID(factory.PrefixTask, r.FactoryUID, o.WorkItem, r.ID), FactoryUID: r.FactoryUID,
		ConversationID: conv, RunID: r.ID, Stage: factory.StageTriage, Title: cmp.Or(r.Title, o.WorkItem), CreatedAt: now(),
		Author: r.Creator, TicketSource: source, TicketID: id, TicketURL: r.TriggerURL}
	t.UpdatedAt = t.CreatedAt
	return t, f.putTask(t)
}

// Task reads a live task of a factory.
func (f *Foreman) Task(fac *factory.Factory, uid string) (*factory.Task, error) {
	t, err := f.cfg.Store.Task(uid)
	if store.IsNotFound(err) || err == nil && (t.FactoryUID != fac.UID || t.Deleted != nil) {
		return nil, notFound(uid)
	}
	return t, err
}

// TaskByConversation is the live task of a factory bound to a
// conversation.
func (f *Foreman) TaskByConversation(fac *factory.Factory, conversationID string) (*factory.Task, error) {
	t, err := f.cfg.Store.TaskByConversation(conversationID)
	if store.IsNotFound(err) || err == nil && t.FactoryUID != fac.UID {
		return nil, factory.Errorf(factory.ENOTFOUND, "no task of this factory is bound to conversation %s", conversationID)
	}
	return t, err
}

// TaskOfRun is the live task that owns a run: the task bound to the
// conversation of the run's root (nil, nil when there is none).
func (f *Foreman) TaskOfRun(r *factory.Run) (*factory.Task, error) {
	root := r
	if id := r.RootRunID(); id != r.ID {
		var err error
		if root, err = f.cfg.Store.Run(id); err != nil {
			return nil, err
		}
	}
	t, err := f.cfg.Store.TaskByConversation(root.Conversation())
	if store.IsNotFound(err) {
		return nil, nil
	}
	return t, err
}

// TaskByRun is the live task of a factory that owns a run (any run of its
// tree).
func (f *Foreman) TaskByRun(fac *factory.Factory, runID string) (*factory.Task, error) {
	r, err := f.cfg.Store.Run(runID)
	if store.IsNotFound(err) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no run %s", runID)
	}
	if err != nil {
		return nil, err
	}
	t, err := f.TaskOfRun(r)
	if err == nil && (t == nil || t.FactoryUID != fac.UID) {
		return nil, factory.Errorf(factory.ENOTFOUND, "run %s belongs to no task of this factory", runID)
	}
	return t, err
}

// UpdateTask changes a task's title, description or stage; last write
// wins. A stage change fires the factory's work_item_stage_changed.
func (f *Foreman) UpdateTask(fac *factory.Factory, uid string, in TaskFields) (*factory.Task, error) {
	if in.Title != nil && strings.TrimSpace(*in.Title) == "" {
		return nil, factory.Errorf(factory.EINVALID, "title: must not be empty")
	}
	t, from, err := f.changeTask(fac, uid, func(t *factory.Task) error {
		if in.Title != nil {
			t.Title = strings.TrimSpace(*in.Title)
		}
		if in.Description != nil {
			t.Description = *in.Description
		}
		if in.Stage != nil {
			t.Stage = *in.Stage
		}
		return nil
	})
	if err == nil {
		f.stageChanged(fac, t, from)
	}
	return t, err
}

// changeTask reads a live task, changes it and writes it, returning its
// stage before.
func (f *Foreman) changeTask(fac *factory.Factory, uid string, change func(*factory.Task) error) (*factory.Task, factory.TaskStage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.Task(fac, uid)
	if err != nil {
		return nil, "", err
	}
	from := t.Stage
	if err := change(t); err != nil {
		return nil, "", err
	}
	t.UpdatedAt = now()
	return t, from, f.putTask(t)
}

// DeleteTask soft-deletes a task: it leaves every list and read, and its
// conversation may be bound again. Its runs and artifacts stay.
func (f *Foreman) DeleteTask(fac *factory.Factory, uid string) error {
	_, _, err := f.changeTask(fac, uid, func(t *factory.Task) error {
		at := now()
		t.Deleted = &at
		return nil
	})
	return err
}

// CancelTask cancels the task's current top-level run and every run
// under it that has not ended, and moves the task to CANCELLED.
func (f *Foreman) CancelTask(fac *factory.Factory, uid string) (*factory.Task, error) {
	t, err := f.Task(fac, uid)
	if err != nil {
		return nil, err
	}
	if cur, err := f.currentRun(t); err == nil && cur != nil {
		f.cancelTree(cur)
	}
	t, from, err := f.changeTask(fac, uid, func(t *factory.Task) error {
		t.Stage = factory.StageCancelled
		return nil
	})
	if err == nil {
		f.stageChanged(fac, t, from)
	}
	return t, err
}

// cancelTree cancels a run and every descendant that has not ended,
// children first (so that none of them reports to a parent that goes on).
func (f *Foreman) cancelTree(root *factory.Run) {
	live := []factory.RunState{factory.StatePending, factory.StateQueued, factory.StateClaimed, factory.StateInProgress, factory.StateBlocked}
	q := store.RunQuery{Equal: map[string]string{"ancestor": root.ID}, States: live, SortBy: "created_at", Limit: 1000}
	for {
		page, err := f.cfg.Store.ListRuns(q)
		if err != nil {
			f.cfg.Log.Error("listing a task's runs to cancel them", "run", root.ID, "err", err)
			break
		}
		for _, r := range page.Runs {
			f.cancelOne(r.ID)
		}
		if !page.More {
			break
		}
		q.After = page.Last
	}
	f.cancelOne(root.ID)
}

func (f *Foreman) cancelOne(id string) {
	if _, err := f.cfg.Runs.Cancel(id); err != nil && !isEnded(err) {
		f.cfg.Log.Error("cancelling a task's run", "run", id, "err", err)
	}
}

// currentRun is the task's current top-level run: the newest run of its
// conversation.
func (f *Foreman) currentRun(t *factory.Task) (*factory.Run, error) {
	r, err := f.latestRunOf(t.ConversationID)
	if r == nil && err == nil {
		r, err = f.cfg.Store.Run(t.RunID)
	}
	return r, err
}

// View is a task as the SDKs read it: its current run where asked, and
// outputs where asked (the artifacts of its whole run tree, newest first).
func (f *Foreman) View(t *factory.Task, current, outputs, ticket bool) factory.TaskItem {
	it := t.Item(ticket)
	if !current && !outputs {
		return it
	}
	cur, err := f.currentRun(t)
	if err != nil || cur == nil {
		return it
	}
	if current {
		it.CurrentRun = &factory.TaskRun{RunID: cur.ID, State: cur.State, IsRunTypeCancellable: true}
	}
	if outputs {
		it.Outputs = f.outputs(cur)
	}
	return it
}

// outputTypes are the artifacts a task shows as its outputs.
var outputTypes = []factory.ArtifactType{factory.ArtifactPullRequest, factory.ArtifactExternalReference, factory.ArtifactScreenshot, factory.ArtifactFile}

// outputs are the artifacts of a run and its descendants, newest first.
func (f *Foreman) outputs(root *factory.Run) []factory.Artifact {
	out := slices.Clone(root.Artifacts)
	q := store.RunQuery{Equal: map[string]string{"ancestor": root.ID}, SortBy: "created_at", Limit: 1000}
	if page, err := f.cfg.Store.ListRuns(q); err == nil {
		for _, r := range page.Runs {
			out = append(out, r.Artifacts...)
		}
	}
	out = slices.DeleteFunc(out, func(a factory.Artifact) bool { return !slices.Contains(outputTypes, a.Type) })
	slices.SortStableFunc(out, func(a, b factory.Artifact) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out
}

// TaskQuery is a list of tasks' filters (the SDKs' TaskListParams).
type TaskQuery struct {
	Stages                      []factory.TaskStage
	Search                      string
	CreatedAfter, CreatedBefore time.Time
	UpdatedAfter                time.Time
	CreatedBy                   []string
	SortBy                      string // created_at (default) or updated_at
	Asc                         bool
	Cursor                      string
	Limit                       int
	Full, CurrentRun            bool
}

// TaskPage is a page of tasks.
type TaskPage struct {
	Tasks []factory.TaskItem `json:"tasks"`
	Info  struct {
		HasNextPage bool   `json:"has_next_page"`
		NextCursor  string `json:"next_cursor,omitempty"`
	} `json:"page_info"`
}

// ListTasks lists a factory's live tasks.
func (f *Foreman) ListTasks(fac *factory.Factory, q TaskQuery) (*TaskPage, error) {
	all, err := f.cfg.Store.Tasks(fac.UID)
	if err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(t *factory.Task) bool { return !q.keeps(t) })
	at := func(t *factory.Task) time.Time {
		if q.SortBy == "updated_at" {
			return t.UpdatedAt
		}
		return t.CreatedAt
	}
	slices.SortFunc(all, func(a, b *factory.Task) int {
		c := cmp.Or(at(a).Compare(at(b)), strings.Compare(a.UID, b.UID))
		if !q.Asc {
			c = -c
		}
		return c
	})
	start := 0
	if q.Cursor != "" {
		pos, err := cursor.Open(f.cfg.Key, "tasks:"+fac.UID, q.Cursor)
		if err != nil {
			return nil, factory.Errorf(factory.EINVALID, "cursor: not one this server gave")
		}
		start = len(all)
		for i, t := range all {
			if t.UID == pos {
				start = i + 1
			}
		}
	}
	limit := q.Limit
	if limit <= 0 || limit > 100 {
		limit = 50
	}
	page := &TaskPage{Tasks: []factory.TaskItem{}}
	end := min(start+limit, len(all))
	for _, t := range all[start:end] {
		page.Tasks = append(page.Tasks, f.View(t, q.CurrentRun, q.Full, q.Full))
	}
	if end < len(all) {
		page.Info.HasNextPage = true
		page.Info.NextCursor = cursor.Seal(f.cfg.Key, "tasks:"+fac.UID, all[end-1].UID)
	}
	return page, nil
}

// keeps reports whether a task passes the query's filters.
func (q *TaskQuery) keeps(t *factory.Task) bool {
	switch {
	case t.Deleted != nil:
		return false
	case len(q.Stages) > 0 && !slices.Contains(q.Stages, t.Stage):
		return false
	case q.Search != "" && !strings.Contains(strings.ToLower(t.Title), strings.ToLower(q.Search)):
		return false
	case !q.CreatedAfter.IsZero() && !t.CreatedAt.After(q.CreatedAfter):
		return false
	case !q.CreatedBefore.IsZero() && !t.CreatedAt.Before(q.CreatedBefore):
		return false
	case !q.UpdatedAfter.IsZero() && !t.UpdatedAt.After(q.UpdatedAfter):
		return false
	}
	if len(q.CreatedBy) > 0 {
		return t.Author != nil && (slices.Contains(q.CreatedBy, t.Author.UID) || slices.Contains(q.CreatedBy, t.Author.DisplayName))
	}
	return true
}

// stageChanged fires the factory's work_item_stage_changed for a change
// of a task's stage (docs/spec/foreman.md).
func (f *Foreman) stageChanged(fac *factory.Factory, t *factory.Task, from factory.TaskStage) {
	if from == t.Stage || f.cfg.Fire == nil {
		return
	}
	payload, err := json.Marshal(map[string]any{"task": t.Item(true), "from": from, "to": t.Stage})
	if err != nil {
		return
	}
	ev := &factory.ProviderEvent{Provider: factory.ProviderFactory, Event: "work_item_stage_changed", Where: t.Title,
		Fields: map[string][]string{"stages": {string(t.Stage)}, "from_stages": {string(from)}}}
	f.cfg.Fire(fac, ev, payload)
}

// rootEnded moves a task whose top-level run was cancelled to CANCELLED.
func (f *Foreman) rootEnded(r *factory.Run) {
	if r.State != factory.StateCancelled {
		return
	}
	t, err := f.TaskOfRun(r)
	if err != nil || t == nil || t.Stage == factory.StageCancelled || t.Stage == factory.StageComplete {
		return
	}
	if cur, err := f.currentRun(t); err != nil || cur == nil || cur.ID != r.ID {
		return
	}
	fac, err := f.factory(t.FactoryUID)
	if err != nil {
		return
	}
	f.cancelTree(r) // its descendants too
	t, from, err := f.changeTask(fac, t.UID, func(t *factory.Task) error {
		t.Stage = factory.StageCancelled
		return nil
	})
	if err == nil {
		f.stageChanged(fac, t, from)
	}
}

// factory reads a factory by its UID.
func (f *Foreman) factory(uid string) (*factory.Factory, error) {
	fs, err := f.cfg.Store.Factories()
	if err != nil {
		return nil, err
	}
	for _, fac := range fs {
		if fac.UID == uid {
			return fac, nil
		}
	}
	return nil, factory.Errorf(factory.ENOTFOUND, "no factory %s", uid)
}

// isEnded reports whether a run manager's error says the run had ended.
func isEnded(err error) bool { return errors.Is(err, runs.ErrTerminal) }
