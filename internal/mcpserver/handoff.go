package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"factory"
)

type sendTaskInput struct {
	FactoryUID     string `json:"factory_uid,omitempty" jsonschema:"the factory, for new work"`
	FactoryTaskUID string `json:"factory_task_uid,omitempty" jsonschema:"an existing task to hand back to its foreman"`
	Title          string `json:"title,omitempty" jsonschema:"the title of new work"`
	Note           string `json:"note" jsonschema:"what the factory is to do: the goal, what is done, what remains, how to check it"`
	Branch         string `json:"branch,omitempty" jsonschema:"a pushed branch to continue from"`
	PRURL          string `json:"pr_url,omitempty" jsonschema:"a pull request to continue"`
	StageHint      string `json:"stage_hint,omitempty" jsonschema:"where the foreman should pick up (it may override)"`
	TicketRef      string `json:"ticket_ref,omitempty" jsonschema:"the work's ticket as <source>:<id>"`
	TicketURL      string `json:"ticket_url,omitempty" jsonschema:"the ticket's URL"`
}

func (t *tools) sendTask(_ context.Context, req *mcp.CallToolRequest, in sendTaskInput) (*mcp.CallToolResult, any, error) {
	c := caller(req)
	if err := need(c, factory.ScopeRuns); err != nil {
		return nil, nil, err
	}
	if c.Run != nil && in.FactoryTaskUID == "" {
		// New work from a run would be a tree of its own: outside its
		// task (its cancel would not reach it) and past the factory's
		// orchestration.maxDepth. A run dispatches (dispatch_agent) or
		// hands its own task back.
		return nil, nil, errors.New("send_task: a run may hand back its own task (factory_task_uid), not start new work; dispatch_agent starts a child run")
	}
	facUID := in.FactoryUID
	if in.FactoryTaskUID != "" {
		task, err := t.findTask(c, in.FactoryTaskUID, "", "")
		if err == nil {
			err = t.ownTask(c, task)
		}
		if err != nil {
			return nil, nil, err
		}
		facUID = task.FactoryUID
	}
	fac, err := t.factoryFor(c, facUID)
	if err != nil {
		return nil, nil, err
	}
	if in.TicketRef != "" && !strings.Contains(in.TicketRef, ":") {
		return nil, nil, errors.New(`ticket_ref: must be "<source>:<id>"`)
	}
	by, secrets := c.creator()
	r, task, err := t.cfg.Foreman.SendTask(fac, in.FactoryTaskUID, in.Title, handoffPrompt(in), by, secrets)
	if err != nil {
		return nil, nil, toolError(err)
	}
	ticket := in.TicketRef
	if ticket == "" {
		ticket = "adhoc:" + r.ID
	}
	out := map[string]any{"run_id": r.ID, "run_url": t.runURL(r.ID), "state": r.State, "ticket_ref": ticket}
	if task != nil {
		out["factory_task_uid"] = task.UID
	}
	return nil, out, nil
}

// handoffPrompt is the foreman's prompt of a hand-off: the note, then
// the references it came with.
func handoffPrompt(in sendTaskInput) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(in.Note))
	for _, kv := range [][2]string{{"Branch", in.Branch}, {"Pull request", in.PRURL}, {"Suggested stage", in.StageHint},
		{"Ticket", in.TicketRef}, {"Ticket URL", in.TicketURL}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, "\n%s: %s", kv[0], kv[1])
		}
	}
	return b.String()
}

// creator is who a caller's runs are created by, and the secrets of their
// own code host tokens.
func (c *Caller) creator() (*factory.Creator, map[string]string) {
	if c.Run != nil {
		return c.Run.Creator, c.Run.CreatorSecrets
	}
	return c.Key.Creator(), c.Key.CreatorSecrets()
}

type messageInput struct {
	FactoryTaskUID string `json:"factory_task_uid" jsonschema:"the task whose foreman to message"`
	Message        string `json:"message" jsonschema:"the message"`
}

func (t *tools) messageForeman(_ context.Context, req *mcp.CallToolRequest, in messageInput) (*mcp.CallToolResult, any, error) {
	c := caller(req)
	if err := need(c, factory.ScopeRuns); err != nil {
		return nil, nil, err
	}
	task, err := t.findTask(c, in.FactoryTaskUID, "", "")
	if err == nil {
		err = t.ownTask(c, task)
	}
	if err != nil {
		return nil, nil, err
	}
	if strings.TrimSpace(in.Message) == "" {
		return nil, nil, errors.New("message: say something")
	}
	r, err := t.cfg.Foreman.MessageForeman(task, in.Message)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return nil, map[string]any{"run_id": r.ID, "state": r.State, "run_url": t.runURL(r.ID)}, nil
}

type conversationInput struct {
	FactoryTaskUID string `json:"factory_task_uid" jsonschema:"the task"`
	BeforeIndex    *int   `json:"before_index,omitempty" jsonschema:"the next_before_index of the window before"`
}

// conversationWindow is how many turns get_conversation gives at once.
const conversationWindow = 50

func (t *tools) getConversation(_ context.Context, req *mcp.CallToolRequest, in conversationInput) (*mcp.CallToolResult, any, error) {
	c := caller(req)
	if err := need(c, factory.ScopeRead); err != nil {
		return nil, nil, err
	}
	task, err := t.findTask(c, in.FactoryTaskUID, "", "")
	if err != nil {
		return nil, nil, err
	}
	evs, err := t.cfg.Store.RunEvents(task.RunID)
	if err != nil {
		return nil, nil, err
	}
	end := len(evs)
	if in.BeforeIndex != nil && *in.BeforeIndex >= 0 && *in.BeforeIndex < end {
		end = *in.BeforeIndex
	}
	start := max(0, end-conversationWindow)
	turns := []map[string]any{}
	for i := end - 1; i >= start; i-- {
		e := evs[i]
		turns = append(turns, map[string]any{"index": i, "type": e.Kind, "message": e.Message, "state": e.State, "timestamp": e.Time})
	}
	out := map[string]any{"run_id": task.RunID, "turns": turns, "truncated": start > 0, "has_more_before": start > 0,
		"download_url": strings.TrimRight(t.cfg.PublicURL(), "/") + "/v1/agent/runs/" + task.RunID + "/timeline"}
	if start > 0 {
		out["next_before_index"] = start
	}
	return nil, out, nil
}

type completeInput struct {
	FactoryTaskUID string `json:"factory_task_uid,omitempty" jsonschema:"the task (a run's agent: its own by default)"`
	RunID          string `json:"run_id,omitempty" jsonschema:"any run of the task"`
	Summary        string `json:"summary,omitempty" jsonschema:"what was done"`
}

func (t *tools) completeTask(_ context.Context, req *mcp.CallToolRequest, in completeInput) (*mcp.CallToolResult, any, error) {
	c := caller(req)
	if err := need(c, factory.ScopeRuns); err != nil {
		return nil, nil, err
	}
	task, err := t.findTask(c, in.FactoryTaskUID, in.RunID, "")
	if err == nil {
		err = t.ownTask(c, task)
	}
	if err != nil {
		return nil, nil, err
	}
	fac, err := t.factoryFor(c, task.FactoryUID)
	if err != nil {
		return nil, nil, err
	}
	task, err = t.cfg.Foreman.Complete(fac, task.UID, in.Summary)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return nil, map[string]any{"factory_task_uid": task.UID, "stage": task.Stage, "summary": task.Summary}, nil
}

type validateInput struct {
	Files []struct {
		Path    string `json:"path" jsonschema:"the file's path in the tree, such as agents/triage/agent.md"`
		Content string `json:"content" jsonschema:"the file's content"`
	} `json:"files" jsonschema:"the files to check"`
}

func (t *tools) validateFiles(ctx context.Context, req *mcp.CallToolRequest, in validateInput) (*mcp.CallToolResult, any, error) {
	if err := need(caller(req), factory.ScopeRead); err != nil {
		return nil, nil, err
	}
	if len(in.Files) == 0 {
		return nil, nil, errors.New("files: give at least one {path, content}")
	}
	files := map[string][]byte{}
	for _, f := range in.Files {
		if _, dup := files[f.Path]; dup {
			return nil, nil, fmt.Errorf("files: %s is given twice", f.Path)
		}
		files[f.Path] = []byte(f.Content)
	}
	out, err := t.cfg.Validate(ctx, files)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return nil, out, nil
}

type schemaInput struct {
	Document string `json:"document,omitempty" jsonschema:"the document: factory, agent, automation, runner, skill, webhook, scorer, ... (none: the list)"`
}

func (t *tools) getSchema(_ context.Context, req *mcp.CallToolRequest, in schemaInput) (*mcp.CallToolResult, any, error) {
	if err := need(caller(req), factory.ScopeRead); err != nil {
		return nil, nil, err
	}
	out, err := t.cfg.Schema(strings.TrimSuffix(in.Document, ".json"))
	if err != nil {
		return nil, nil, toolError(err)
	}
	return nil, out, nil
}
