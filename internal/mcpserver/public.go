package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"factory"
	"factory/internal/foreman"
)

// The public tools: the product's (docs/spec/foreman.md), for a local
// coding agent with an API key, and for a run's agent.
func (t *tools) addPublic(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "list_factories", Description: "List the factories on this server, each with its uid (the factory_uid other tools take) and its agents."}, t.listFactories)
	mcp.AddTool(s, &mcp.Tool{Name: "list_tasks", Description: "List a factory's tasks, newest first: each with its factory_task_uid, title, stage, ticket, current run and outputs."}, t.listTasks)
	mcp.AddTool(s, &mcp.Tool{Name: "get_task", Description: "Read one task (by factory_task_uid, a run of it, or its ticket's or pull request's URL): its stage, runs and outputs; with start_working, the git commands to work on its branch locally."}, t.getTask)
	mcp.AddTool(s, &mcp.Tool{Name: "send_task", Description: "Hand a factory work: new work (factory_uid, title, note) starts its foreman; factory_task_uid hands an existing task back to its foreman with the note."}, t.sendTask)
	mcp.AddTool(s, &mcp.Tool{Name: "message_foreman", Description: "Send a task's foreman a message (a status, a question, what you pushed); read replies with get_conversation. It does not move the task."}, t.messageForeman)
	mcp.AddTool(s, &mcp.Tool{Name: "get_conversation", Description: "Read a task's foreman transcript, newest first, a window at a time (before_index pages back)."}, t.getConversation)
	mcp.AddTool(s, &mcp.Tool{Name: "complete_task", Description: "Mark a task COMPLETE, with a summary. A run's agent completes its own task; otherwise name it by factory_task_uid or run_id. Completing a complete task is a no-op."}, t.completeTask)
	mcp.AddTool(s, &mcp.Tool{Name: "validate_factory_files", Description: "Validate factory files (a whole tree or some files) as a plan would: diagnostics at the line, and what would change."}, t.validateFiles)
	mcp.AddTool(s, &mcp.Tool{Name: "get_factory_file_schema", Description: "Read the JSON Schema of a factory file (document: factory, agent, automation, runner, webhook, ...), or the list of documents."}, t.getSchema)
}

type noInput struct{}

func (t *tools) listFactories(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	c := caller(req)
	if err := need(c, factory.ScopeRead); err != nil {
		return nil, nil, err
	}
	fs, err := t.cfg.Store.Factories()
	if err != nil {
		return nil, nil, err
	}
	out := []map[string]any{}
	for _, f := range fs {
		if c.Run != nil && f.UID != c.Run.FactoryUID {
			continue
		}
		res, _ := t.cfg.Store.Resources(f.Name, factory.ResourceAgent)
		agents := []string{}
		for _, r := range res {
			agents = append(agents, r.Key)
		}
		out = append(out, map[string]any{"uid": f.UID, "name": f.Name, "display_name": f.Settings.Name, "description": f.Settings.Description, "agents": agents})
	}
	return nil, map[string]any{"factories": out}, nil
}

type listTasksInput struct {
	FactoryUID string   `json:"factory_uid,omitempty" jsonschema:"the factory (a run's own by default)"`
	Stage      []string `json:"stage,omitempty" jsonschema:"only tasks in these stages (TRIAGE, SPEC, IMPLEMENT, REVIEW, COMPLETE, CANCELLED)"`
	Q          string   `json:"q,omitempty" jsonschema:"a case-insensitive substring of the title"`
	CreatedBy  []string `json:"created_by,omitempty" jsonschema:"only tasks these people or keys created"`
	Cursor     string   `json:"cursor,omitempty" jsonschema:"the next_cursor of the page before"`
}

func (t *tools) listTasks(_ context.Context, req *mcp.CallToolRequest, in listTasksInput) (*mcp.CallToolResult, any, error) {
	c := caller(req)
	if err := need(c, factory.ScopeRead); err != nil {
		return nil, nil, err
	}
	fac, err := t.factoryFor(c, in.FactoryUID)
	if err != nil {
		return nil, nil, err
	}
	q := foreman.TaskQuery{Search: in.Q, CreatedBy: in.CreatedBy, Cursor: in.Cursor, Limit: 25, Full: true, CurrentRun: true}
	for _, s := range in.Stage {
		st, ok := factory.ParseTaskStage(s)
		if !ok {
			return nil, nil, fmt.Errorf("stage: %q is not a stage", s)
		}
		q.Stages = append(q.Stages, st)
	}
	page, err := t.cfg.Foreman.ListTasks(fac, q)
	if err != nil {
		return nil, nil, toolError(err)
	}
	tasks := []map[string]any{}
	for _, it := range page.Tasks {
		tasks = append(tasks, t.taskEntry(it))
	}
	return nil, map[string]any{"tasks": tasks, "has_next_page": page.Info.HasNextPage, "next_cursor": page.Info.NextCursor}, nil
}

// taskEntry is a task as the tools show it.
func (t *tools) taskEntry(it factory.TaskItem) map[string]any {
	e := map[string]any{"factory_task_uid": it.UID, "factory_uid": it.FactoryUID, "title": it.Title, "stage": it.Stage,
		"created_at": it.CreatedAt, "updated_at": it.UpdatedAt, "outputs": it.Outputs}
	if it.Description != nil {
		e["description"] = *it.Description
	}
	if it.TicketSource != "" {
		e["ticket_source"], e["ticket_id"] = it.TicketSource, it.TicketID
	}
	if tk, err := t.cfg.Store.Task(it.UID); err == nil && tk.TicketURL != "" {
		e["trigger_url"] = tk.TicketURL
	}
	if it.CurrentRun != nil {
		e["current_run"], e["run_url"] = it.CurrentRun, t.runURL(it.CurrentRun.RunID)
	}
	return e
}

type getTaskInput struct {
	FactoryTaskUID string `json:"factory_task_uid,omitempty" jsonschema:"the task"`
	RunID          string `json:"run_id,omitempty" jsonschema:"any run of the task"`
	URL            string `json:"url,omitempty" jsonschema:"the task's ticket URL, or one of its pull requests'"`
	StartWorking   bool   `json:"start_working,omitempty" jsonschema:"also give the git commands to work on the task's branch locally"`
	WorkspaceDir   string `json:"workspace_dir,omitempty" jsonschema:"the absolute path of your local clone, for the commands"`
	Branch         string `json:"branch,omitempty" jsonschema:"the branch to work from (default: the task's)"`
}

func (t *tools) getTask(_ context.Context, req *mcp.CallToolRequest, in getTaskInput) (*mcp.CallToolResult, any, error) {
	c := caller(req)
	if err := need(c, factory.ScopeRead); err != nil {
		return nil, nil, err
	}
	task, err := t.findTask(c, in.FactoryTaskUID, in.RunID, in.URL)
	if err != nil {
		return nil, nil, err
	}
	it := t.cfg.Foreman.View(task, true, true, true)
	out := t.taskEntry(it)
	out["summary"] = task.Summary
	runs, err := t.treeOf(task)
	if err != nil {
		return nil, nil, err
	}
	out["runs"] = runs
	if in.StartWorking {
		out["active_runs"], out["next_actions"] = activeRuns(runs), startWorking(task, it, in.WorkspaceDir, in.Branch)
	}
	return nil, out, nil
}

// findTask finds the task a call names, within what the caller may see:
// by UID, by any run of it, or by a URL (its ticket's, an output's); a
// run's agent without any of them means its own task.
func (t *tools) findTask(c *Caller, uid, runID, url string) (*factory.Task, error) {
	switch {
	case uid != "":
		task, err := t.cfg.Store.Task(uid)
		if err != nil || task.Deleted != nil {
			return nil, fmt.Errorf("factory_task_uid: no task %s", uid)
		}
		return task, t.mayTouch(c, task)
	case runID != "":
		r, err := t.cfg.Store.Run(runID)
		if err != nil {
			return nil, fmt.Errorf("run_id: no run %s", runID)
		}
		task, err := t.cfg.Foreman.TaskOfRun(r)
		if err == nil && task == nil {
			err = fmt.Errorf("run_id: run %s belongs to no task", runID)
		}
		if err != nil {
			return nil, err
		}
		return task, t.mayTouch(c, task)
	case url != "":
		return t.taskByURL(c, url)
	case c.Run != nil:
		return t.findTask(c, "", c.Run.ID, "")
	}
	return nil, errors.New("name the task: factory_task_uid, run_id or url")
}

// mayTouch refuses a run's token a task of another factory.
func (t *tools) mayTouch(c *Caller, task *factory.Task) error {
	if c.Run != nil && task.FactoryUID != c.Run.FactoryUID {
		return fmt.Errorf("task %s is of another factory: a run's token acts on its own factory only", task.UID)
	}
	return nil
}

// ownTask refuses a run's token a change of a task other than its own: it
// reads its factory's tasks, and changes its own.
func (t *tools) ownTask(c *Caller, task *factory.Task) error {
	if c.Run == nil {
		return nil
	}
	own, err := t.cfg.Foreman.TaskOfRun(c.Run)
	if err != nil {
		return err
	}
	if own == nil || own.UID != task.UID {
		return fmt.Errorf("task %s is not your run's task: a run's token changes its own task only", task.UID)
	}
	return nil
}

// taskByURL finds the task whose ticket, or one of whose outputs, has the
// URL.
func (t *tools) taskByURL(c *Caller, url string) (*factory.Task, error) {
	fs, err := t.cfg.Store.Factories()
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if c.Run != nil && f.UID != c.Run.FactoryUID {
			continue
		}
		tasks, err := t.cfg.Store.Tasks(f.UID)
		if err != nil {
			return nil, err
		}
		for _, task := range tasks {
			if task.Deleted != nil {
				continue
			}
			if task.TicketURL == url {
				return task, nil
			}
			it := t.cfg.Foreman.View(task, false, true, false)
			if slices.ContainsFunc(it.Outputs, func(a factory.Artifact) bool { return a.Data.URL == url }) {
				return task, nil
			}
		}
	}
	return nil, fmt.Errorf("url: no task has %s as its ticket or an output", url)
}

// treeOf lists a task's runs: its top-level run and those under it.
func (t *tools) treeOf(task *factory.Task) ([]map[string]any, error) {
	root, err := t.cfg.Store.Run(task.RunID)
	if err != nil {
		return nil, err
	}
	all := []*factory.Run{root}
	under, err := t.cfg.Foreman.Descendants(root.ID)
	if err != nil {
		return nil, err
	}
	all = append(all, under...)
	out := []map[string]any{}
	for _, r := range all {
		e := map[string]any{"run_id": r.ID, "title": r.Title, "state": r.State, "agent": agentName(r), "source": r.Source,
			"parent_run_id": r.ParentRunID, "run_url": t.runURL(r.ID), "created_at": r.CreatedAt}
		if r.StatusMessage != nil {
			e["status_message"] = r.StatusMessage.Message
		}
		out = append(out, e)
	}
	return out, nil
}

func agentName(r *factory.Run) string {
	if r.Setup != nil {
		return r.Setup.Agent
	}
	return ""
}

// activeRuns are the runs of a tree that have not ended.
func activeRuns(runs []map[string]any) []map[string]any {
	out := []map[string]any{}
	for _, r := range runs {
		if st, _ := r["state"].(factory.RunState); !st.Terminal() {
			out = append(out, r)
		}
	}
	return out
}

// startWorking are the git commands that put a task's branch in a local
// clone: a worktree of the branch its runs push (or the one asked for).
func startWorking(task *factory.Task, it factory.TaskItem, dir, branch string) []string {
	if branch == "" {
		for _, a := range it.Outputs {
			if a.Type == factory.ArtifactPullRequest && a.Data.Branch != "" {
				branch = a.Data.Branch
				break
			}
		}
	}
	if branch == "" {
		branch = "factory/" + task.RunID
	}
	if dir == "" {
		dir = "."
	}
	wt := dir + "/../" + strings.ReplaceAll(branch, "/", "-")
	return []string{
		fmt.Sprintf("git -C %s fetch origin %s", shellQuote(dir), shellQuote(branch)),
		fmt.Sprintf("git -C %s worktree add %s -B %s FETCH_HEAD", shellQuote(dir), shellQuote(wt), shellQuote(branch)),
		fmt.Sprintf("cd %s", shellQuote(wt)),
	}
}

// shellQuote quotes a word for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
