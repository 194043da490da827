package foreman

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"factory"
	"factory/internal/automations"
	"factory/internal/runs"
	"factory/internal/store"
)

// Dispatch is a dispatch_agent call.
type Dispatch struct {
	Agent, Prompt, Title string
	// Stage, when set, moves the task there first (spec approval
	// permitting).
	Stage string
}

// Dispatch starts a child run of the caller: the named agent of the
// caller's factory, one level below it (parent_run_id the caller, the
// same root), source ORCHESTRATION, on the tree's repositories and branch.
// A dispatch deeper than the factory's orchestration.maxDepth, of an agent
// the factory does not have, or into IMPLEMENT before the spec is approved
// is refused with a message the agent can act on.
func (f *Foreman) Dispatch(caller *factory.Run, d Dispatch) (*factory.Run, error) {
	fac, err := f.factory(caller.FactoryUID)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(d.Prompt) == "" {
		return nil, factory.Errorf(factory.EINVALID, "prompt: say what the agent is to do")
	}
	if depth, max := len(caller.Ancestors)+1, fac.Settings.MaxDepth(); depth > max {
		return nil, factory.Errorf(factory.EINVALID, "a run %d levels below its task's top-level run may not dispatch: this factory allows %d (orchestration.maxDepth); do the work yourself, or report back to your parent", depth-1, max)
	}
	if d.Stage != "" {
		if _, err := f.SetStage(caller, d.Stage); err != nil {
			return nil, err
		}
	}
	ag, err := automations.ResolveAgent(f.cfg.Store, f.cfg.Runs, fac, d.Agent, nil)
	if err != nil {
		return nil, factory.Errorf(factory.EINVALID, "agent: %v; this factory's agents: %s", err, strings.Join(f.agentNames(fac), ", "))
	}
	if ag == nil {
		return nil, factory.Errorf(factory.EINVALID, "agent: factory %s defines no agents to dispatch", fac.Name)
	}
	req := runs.CreateRequest{Prompt: d.Prompt, Title: d.Title, Source: factory.SourceOrchestration, FactoryUID: fac.UID,
		Ancestors: append([]string{caller.ID}, caller.Ancestors...), Repositories: caller.Repositories, Creator: caller.Creator,
		CreatorSecrets: caller.CreatorSecrets, Metadata: map[string]string{"agent": ag.Name()}}
	if req.Title == "" {
		req.Title = ag.Name() + ": " + runs.TitleOf(d.Prompt)
	}
	if req.Repositories == nil {
		req.Repositories = []factory.RepoCheckout{} // the caller's (none), not every repository of the factory
	}
	ag.Apply(&req)
	return f.cfg.Runs.Create(req)
}

// agentNames are the factory's agents, by name.
func (f *Foreman) agentNames(fac *factory.Factory) []string {
	res, err := f.cfg.Store.Resources(fac.Name, factory.ResourceAgent)
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range res {
		out = append(out, r.Key)
	}
	slices.Sort(out)
	return out
}

// Wait waits for a run to end (or to wait for a person: BLOCKED with a
// question), or for ctx to end; it returns the run as it then is, and
// whether it ended. A run that ends while nobody waits for it is told to
// its parent as a follow-up (tellParent); one a Wait saw is not.
func (f *Foreman) Wait(ctx context.Context, id string) (*factory.Run, bool, error) {
	ch := make(chan *factory.Run, 1)
	f.wmu.Lock()
	f.waiting[id] = append(f.waiting[id], ch)
	f.wmu.Unlock()
	defer f.unwait(id, ch)
	r, err := f.cfg.Store.Run(id)
	if err != nil {
		return nil, false, err
	}
	if settled(r) {
		return r, true, nil
	}
	select {
	case r := <-ch:
		return r, true, nil
	case <-ctx.Done():
		r, err := f.cfg.Store.Run(id)
		return r, false, err
	}
}

// settled reports whether a run has ended, or waits for a person.
func settled(r *factory.Run) bool {
	return r.State.Terminal() || r.State == factory.StateBlocked
}

func (f *Foreman) unwait(id string, ch chan *factory.Run) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.waiting[id] = slices.DeleteFunc(f.waiting[id], func(c chan *factory.Run) bool { return c == ch })
	if len(f.waiting[id]) == 0 {
		delete(f.waiting, id)
	}
}

// wake answers the Waits on a run that settled; it reports whether any
// did.
func (f *Foreman) wake(r *factory.Run) bool {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	chs := f.waiting[r.ID]
	for _, ch := range chs {
		select {
		case ch <- r:
		default:
		}
	}
	return len(chs) > 0
}

// tellParent sends a child's end to its parent as a follow-up, once per
// turn of the child: the foreman hears of every child it did not wait
// for.
func (f *Foreman) tellParent(r *factory.Run) {
	msg := ChildReport(r)
	key := fmt.Sprintf("child:%s:%d", r.ID, r.Turns)
	err := f.cfg.Runs.ContinueWith(r.ParentRunID, key, msg, nil, nil)
	if err != nil && !errors.Is(err, runs.ErrNotFound) {
		f.cfg.Log.Error("telling a parent run of its child's end", "run", r.ParentRunID, "child", r.ID, "err", err)
	}
}

// ChildReport is how a child's end reads to its parent: its state, what
// it said last, and what it produced.
func ChildReport(r *factory.Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s (%s) ended %s.", r.ID, agentOf(r), r.State)
	if r.State == factory.StateBlocked && r.Asking != nil {
		fmt.Fprintf(&b, " It waits for a person's answer to: %s", r.Asking.Question)
	}
	if m := r.StatusMessage; m != nil && m.Message != "" {
		fmt.Fprintf(&b, "\nIts last message: %s", m.Message)
	}
	for _, a := range r.Artifacts {
		if a.Data.URL != "" {
			fmt.Fprintf(&b, "\n- %s %s", a.Type, a.Data.URL)
		}
	}
	return b.String()
}

// agentOf is the agent a run ran.
func agentOf(r *factory.Run) string {
	if r.Setup != nil && r.Setup.Agent != "" {
		return r.Setup.Agent
	}
	return "agent"
}

// ChildRun reads a run of the caller's tree (its own, or one under its
// task's top-level run), refusing any other.
func (f *Foreman) ChildRun(caller *factory.Run, id string) (*factory.Run, error) {
	r, err := f.cfg.Store.Run(id)
	if store.IsNotFound(err) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no run %s", id)
	}
	if err != nil {
		return nil, err
	}
	if r.ID != caller.ID && r.RootRunID() != caller.RootRunID() {
		return nil, factory.Errorf(factory.EFORBIDDEN, "run %s is not of your task's runs", id)
	}
	return r, nil
}

// MessageRun sends a follow-up to a run of the caller's tree: the child
// continues its own conversation.
func (f *Foreman) MessageRun(caller *factory.Run, id, message string) (*factory.Run, error) {
	if strings.TrimSpace(message) == "" {
		return nil, factory.Errorf(factory.EINVALID, "message: say something")
	}
	if id == caller.ID {
		return nil, factory.Errorf(factory.EINVALID, "run_id: that is your own run; message a run you dispatched")
	}
	if _, err := f.ChildRun(caller, id); err != nil {
		return nil, err
	}
	r, _, err := f.cfg.Runs.SendFollowUp(id, message, nil)
	return r, err
}

// SetStage moves the caller's task to a stage; IMPLEMENT waits for an
// approved spec where the factory requires one.
func (f *Foreman) SetStage(caller *factory.Run, stage string) (*factory.Task, error) {
	st, ok := factory.ParseTaskStage(stage)
	if !ok {
		return nil, factory.Errorf(factory.EINVALID, "stage: %q is not one of TRIAGE, SPEC, IMPLEMENT, REVIEW, COMPLETE, CANCELLED", stage)
	}
	t, fac, err := f.callerTask(caller)
	if err != nil {
		return nil, err
	}
	if st == factory.StageImplement && fac.Settings.SpecApprovalRequired() && !t.SpecApproved {
		return nil, &factory.Error{Code: factory.ECONFLICT, Final: true, Message: "the spec is not approved: this factory requires a person's approval before IMPLEMENT " +
			"(specApproval: required). Ask for it with ask_human kind spec_review, end your turn, and go on when the answer is approve"}
	}
	return f.UpdateTask(fac, t.UID, TaskFields{Stage: &st})
}

// callerTask is the task a run works for, and its factory.
func (f *Foreman) callerTask(caller *factory.Run) (*factory.Task, *factory.Factory, error) {
	t, err := f.TaskOfRun(caller)
	if err != nil {
		return nil, nil, err
	}
	if t == nil {
		return nil, nil, factory.Errorf(factory.EINVALID, "run %s works for no task: only a task's runs have stages", caller.ID)
	}
	fac, err := f.factory(t.FactoryUID)
	return t, fac, err
}

// Complete marks a task COMPLETE with a summary; completing a complete
// task again changes nothing.
func (f *Foreman) Complete(fac *factory.Factory, uid, summary string) (*factory.Task, error) {
	t, from, err := f.changeTask(fac, uid, func(t *factory.Task) error {
		t.Stage = factory.StageComplete
		if summary != "" {
			t.Summary = summary
		}
		return nil
	})
	if err == nil {
		f.stageChanged(fac, t, from)
	}
	return t, err
}

// SendTask hands a factory work (docs/spec/foreman.md, send_task): a new
// task's foreman run, or an existing task's top-level run continued with
// the note. by is who sends it.
func (f *Foreman) SendTask(fac *factory.Factory, taskUID, title, prompt string, by *factory.Creator, creatorSecrets map[string]string) (*factory.Run, *factory.Task, error) {
	if strings.TrimSpace(prompt) == "" {
		return nil, nil, factory.Errorf(factory.EINVALID, "note: say what the factory is to do")
	}
	if taskUID != "" {
		t, err := f.Task(fac, taskUID)
		if err != nil {
			return nil, nil, err
		}
		cur, err := f.currentRun(t)
		if err != nil {
			return nil, nil, err
		}
		r, _, err := f.cfg.Runs.SendFollowUp(cur.ID, prompt, nil)
		return r, t, err
	}
	if strings.TrimSpace(title) == "" {
		return nil, nil, factory.Errorf(factory.EINVALID, "title: required for new work")
	}
	req := runs.CreateRequest{Prompt: prompt, Title: title, Source: factory.SourceMCP, FactoryUID: fac.UID, Creator: by, CreatorSecrets: creatorSecrets}
	ag, err := automations.ResolveAgent(f.cfg.Store, f.cfg.Runs, fac, "", nil)
	if err != nil {
		return nil, nil, err
	}
	if ag != nil {
		ag.Apply(&req)
	}
	r, err := f.cfg.Runs.Create(req)
	if err != nil {
		return nil, nil, err
	}
	t, err := f.bind(fac, r.Conversation(), r, TaskFields{Title: &title}, by)
	return r, t, err
}

// Note adds a line to a run's timeline.
func (f *Foreman) Note(runID, msg string) {
	_, err := f.cfg.Store.UpdateRun(runID, false, func(r *factory.Run, b *store.Batch) error {
		b.AddRunEvent(r, factory.RunEvent{Time: now(), Kind: "message", Message: msg})
		return nil
	})
	if err != nil {
		f.cfg.Log.Error("noting on a run's timeline", "run", runID, "err", err)
	}
}

// MessageForeman sends a task's current top-level run a message: a
// follow-up in its conversation. The stage stays.
func (f *Foreman) MessageForeman(t *factory.Task, message string) (*factory.Run, error) {
	cur, err := f.currentRun(t)
	if err != nil {
		return nil, err
	}
	r, _, err := f.cfg.Runs.SendFollowUp(cur.ID, message, nil)
	return r, err
}

// Descendants are the runs under a run, oldest first.
func (f *Foreman) Descendants(id string) ([]*factory.Run, error) {
	var out []*factory.Run
	q := store.RunQuery{Equal: map[string]string{"ancestor": id}, SortBy: "created_at", Asc: true, Limit: 1000}
	for {
		page, err := f.cfg.Store.ListRuns(q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Runs...)
		if !page.More {
			return out, nil
		}
		q.After = page.Last
	}
}
