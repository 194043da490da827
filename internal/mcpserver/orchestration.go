package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"factory"
	"factory/internal/foreman"
)

// The orchestration tools: for a run's agent only (its token), acting on
// its own task and the runs under it.
func (t *tools) addOrchestration(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "dispatch_agent", Description: "Start one of this factory's agents as your child run, on your task's repositories and branch. " +
		"With wait, the call answers when the child ends (its state, last message and outputs); without, you hear of its end as a message."}, t.dispatchAgent)
	mcp.AddTool(s, &mcp.Tool{Name: "get_run", Description: "Read a run of your task: its state, last message and outputs."}, t.getRun)
	mcp.AddTool(s, &mcp.Tool{Name: "message_run", Description: "Send a run you dispatched a follow-up: it continues its own conversation."}, t.messageRun)
	mcp.AddTool(s, &mcp.Tool{Name: "set_stage", Description: "Move your task to a stage: TRIAGE, SPEC, IMPLEMENT, REVIEW, COMPLETE or CANCELLED. IMPLEMENT needs an approved spec where the factory requires one."}, t.setStage)
	mcp.AddTool(s, &mcp.Tool{Name: "ask_human", Description: "Ask a person (kind question, spec_review or pr_review). Your run waits, BLOCKED, after this turn: end your turn; the answer comes as your next message."}, t.askHuman)
}

// runOnly refuses an API key the orchestration tools.
func runOnly(c *Caller) (*factory.Run, error) {
	if c.Run == nil {
		return nil, errors.New("this tool is for a factory run's agent: connect with the run's token (FACTORY_RUN_TOKEN)")
	}
	return c.Run, nil
}

type dispatchInput struct {
	Agent  string `json:"agent" jsonschema:"the agent of this factory to run (list_factories lists them)"`
	Prompt string `json:"prompt" jsonschema:"what the agent is to do"`
	Title  string `json:"title,omitempty" jsonschema:"the child run's title"`
	Stage  string `json:"stage,omitempty" jsonschema:"move the task to this stage first"`
	Wait   bool   `json:"wait,omitempty" jsonschema:"answer when the child ends, not when it starts"`
}

func (t *tools) dispatchAgent(ctx context.Context, req *mcp.CallToolRequest, in dispatchInput) (*mcp.CallToolResult, any, error) {
	me, err := runOnly(caller(req))
	if err != nil {
		return nil, nil, err
	}
	child, err := t.cfg.Foreman.Dispatch(me, foreman.Dispatch{Agent: in.Agent, Prompt: in.Prompt, Title: in.Title, Stage: in.Stage})
	if err != nil {
		return nil, nil, toolError(err)
	}
	if !in.Wait {
		return nil, t.runEntry(child, "the run started: you hear of its end as a message; get_run reads it meanwhile"), nil
	}
	wctx, cancel := context.WithTimeout(ctx, t.cfg.WaitMax)
	defer cancel()
	r, ended, err := t.cfg.Foreman.Wait(wctx, child.ID)
	if err != nil {
		return nil, nil, err
	}
	note := "the run ended"
	if !ended {
		note = "the run is still going: you hear of its end as a message; get_run reads it meanwhile"
	} else if r.State == factory.StateBlocked {
		note = "the run waits for a person's answer; you hear of its end as a message"
	}
	return nil, t.runEntry(r, note), nil
}

// runEntry is a run as the orchestration tools show it.
func (t *tools) runEntry(r *factory.Run, note string) map[string]any {
	e := map[string]any{"run_id": r.ID, "agent": agentName(r), "state": r.State, "run_url": t.runURL(r.ID), "note": note}
	if r.StatusMessage != nil {
		e["message"] = r.StatusMessage.Message
		if r.StatusMessage.ErrorCode != "" {
			e["error_code"] = r.StatusMessage.ErrorCode
		}
	}
	if r.Asking != nil {
		e["waiting_for_answer_to"] = r.Asking.Question
	}
	outputs := []map[string]any{}
	for _, a := range r.Artifacts {
		outputs = append(outputs, map[string]any{"type": a.Type, "url": a.Data.URL, "title": a.Data.Title, "branch": a.Data.Branch})
	}
	e["outputs"] = outputs
	return e
}

type runInput struct {
	RunID string `json:"run_id" jsonschema:"a run of your task"`
}

func (t *tools) getRun(_ context.Context, req *mcp.CallToolRequest, in runInput) (*mcp.CallToolResult, any, error) {
	me, err := runOnly(caller(req))
	if err != nil {
		return nil, nil, err
	}
	r, err := t.cfg.Foreman.ChildRun(me, in.RunID)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return nil, t.runEntry(r, ""), nil
}

type messageRunInput struct {
	RunID   string `json:"run_id" jsonschema:"a run you dispatched"`
	Message string `json:"message" jsonschema:"the follow-up"`
}

func (t *tools) messageRun(_ context.Context, req *mcp.CallToolRequest, in messageRunInput) (*mcp.CallToolResult, any, error) {
	me, err := runOnly(caller(req))
	if err != nil {
		return nil, nil, err
	}
	r, err := t.cfg.Foreman.MessageRun(me, in.RunID, in.Message)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return nil, t.runEntry(r, "the follow-up is queued: the run continues its conversation"), nil
}

type stageInput struct {
	Stage string `json:"stage" jsonschema:"TRIAGE, SPEC, IMPLEMENT, REVIEW, COMPLETE or CANCELLED"`
	Note  string `json:"note,omitempty" jsonschema:"why, for the timeline"`
}

func (t *tools) setStage(_ context.Context, req *mcp.CallToolRequest, in stageInput) (*mcp.CallToolResult, any, error) {
	me, err := runOnly(caller(req))
	if err != nil {
		return nil, nil, err
	}
	task, err := t.cfg.Foreman.SetStage(me, in.Stage)
	if err != nil {
		return nil, nil, toolError(err)
	}
	if in.Note != "" {
		t.cfg.Foreman.Note(me.ID, fmt.Sprintf("[set_stage %s] %s", task.Stage, in.Note))
	}
	return nil, map[string]any{"factory_task_uid": task.UID, "stage": task.Stage}, nil
}

type askInput struct {
	Question string   `json:"question" jsonschema:"what you ask"`
	Kind     string   `json:"kind,omitempty" jsonschema:"question (default), spec_review or pr_review"`
	Options  []string `json:"options,omitempty" jsonschema:"the answers to choose from (a spec review's are approve and request_changes)"`
	URLs     []string `json:"urls,omitempty" jsonschema:"links the person needs (a pull request)"`
}

func (t *tools) askHuman(_ context.Context, req *mcp.CallToolRequest, in askInput) (*mcp.CallToolResult, any, error) {
	me, err := runOnly(caller(req))
	if err != nil {
		return nil, nil, err
	}
	a := foreman.Ask{Question: in.Question, Kind: in.Kind, Options: in.Options}
	for _, u := range in.URLs {
		a.Links = append(a.Links, factory.InboxLink{URL: u})
	}
	it, err := t.cfg.Foreman.Ask(me, a)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return nil, map[string]any{"inbox_item_uid": it.UID, "kind": it.Kind, "options": it.Options,
		"note": "asked: end your turn now; your run waits BLOCKED and the answer comes as your next message"}, nil
}
