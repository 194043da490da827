package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"factory"
)

// Task is a factory task as the API shows it.
type Task = factory.TaskItem

// TaskPage is one page of a factory's tasks.
type TaskPage struct {
	Tasks    []Task   `json:"tasks"`
	PageInfo PageInfo `json:"page_info"`
}

// ListTasks reads one page of a factory's tasks (by UID or name); query
// holds the list parameters (stage, q, limit, cursor, include_current_run,
// full_list, ...).
func (c *Client) ListTasks(ctx context.Context, factoryUID string, query url.Values, opts ...Option) (*TaskPage, error) {
	out := &TaskPage{}
	return out, c.Do(ctx, http.MethodGet, "/v1/factory/"+url.PathEscape(factoryUID)+"/tasks?"+query.Encode(), nil, out, opts...)
}

// GetTask reads one task, with its current run and outputs.
func (c *Client) GetTask(ctx context.Context, factoryUID, taskUID string, opts ...Option) (*Task, error) {
	out := &Task{}
	return out, c.Do(ctx, http.MethodGet, "/v1/factory/"+url.PathEscape(factoryUID)+"/tasks/"+url.PathEscape(taskUID), nil, out, opts...)
}

// SetTaskStage moves a task to a stage.
func (c *Client) SetTaskStage(ctx context.Context, factoryUID, taskUID string, stage factory.TaskStage, opts ...Option) (*Task, error) {
	b, _ := json.Marshal(map[string]any{"stage": stage})
	out := &Task{}
	return out, c.Do(ctx, http.MethodPatch, "/v1/factory/"+url.PathEscape(factoryUID)+"/tasks/"+url.PathEscape(taskUID), bytes.NewReader(b), out, opts...)
}

// CancelTask cancels a task and every run of its tree.
func (c *Client) CancelTask(ctx context.Context, factoryUID, taskUID string, opts ...Option) (*Task, error) {
	out := &Task{}
	return out, c.Do(ctx, http.MethodPost, "/v1/factory/"+url.PathEscape(factoryUID)+"/tasks/"+url.PathEscape(taskUID)+"/cancel", nil, out, opts...)
}

// InboxItem is an inbox item as the API shows it.
type InboxItem = factory.InboxWire

// Inbox lists the inbox's open items, newest first (query: include_resolved,
// factory_uid, factory_task_uid, kind).
func (c *Client) Inbox(ctx context.Context, query url.Values, opts ...Option) ([]InboxItem, error) {
	var out struct {
		Items []InboxItem `json:"items"`
	}
	return out.Items, c.Do(ctx, http.MethodGet, "/v1/factory-inbox?"+query.Encode(), nil, &out, opts...)
}

// AnswerInboxItem answers a question or a review; the run that asked
// continues with the answer.
func (c *Client) AnswerInboxItem(ctx context.Context, uid, answer, comment string, opts ...Option) (*InboxItem, error) {
	b, _ := json.Marshal(map[string]string{"answer": answer, "comment": comment})
	out := &InboxItem{}
	return out, c.Do(ctx, http.MethodPost, "/v1/factory-inbox/items/"+url.PathEscape(uid)+"/answer", bytes.NewReader(b), out, opts...)
}
