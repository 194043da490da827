package runtime

import (
	"encoding/json"
	"time"

	"factory/store"
)

// RunItem is a run as the API shows it.
type RunItem struct {
	RunID         string               `json:"run_id"`
	TaskID        string               `json:"task_id"`
	Title         string               `json:"title"`
	Prompt        string               `json:"prompt"`
	State         string               `json:"state"`
	CreatedAt     time.Time            `json:"created_at"`
	UpdatedAt     time.Time            `json:"updated_at"`
	StartedAt     *time.Time           `json:"started_at,omitempty"`
	AgentConfig   json.RawMessage      `json:"agent_config,omitempty"`
	Source        string               `json:"source,omitempty"`
	Creator       *store.Creator       `json:"creator,omitempty"`
	StatusMessage *store.StatusMessage `json:"status_message,omitempty"`
	Metadata      map[string]string    `json:"metadata,omitempty"`
	FactoryUID    string               `json:"factory_uid,omitempty"`
	AutomationID  string               `json:"automation_id,omitempty"`
	DeliveryID    string               `json:"delivery_id,omitempty"`
	Attachments   []store.Attachment   `json:"attachments,omitempty"`
}

// Item is the API view of a run.
func Item(r *store.Run) RunItem {
	return RunItem{RunID: r.ID, TaskID: r.ID, Title: r.Title, Prompt: r.Prompt, State: r.State, CreatedAt: r.CreatedAt,
		UpdatedAt: r.UpdatedAt, StartedAt: r.StartedAt, AgentConfig: r.Config, Source: r.Source, Creator: r.Creator,
		StatusMessage: r.StatusMessage, Metadata: r.Metadata, FactoryUID: r.FactoryUID, AutomationID: r.AutomationID,
		DeliveryID: r.DeliveryID, Attachments: r.Attachments}
}

// Terminal reports whether the run has ended (a follow-up can continue it).
func (r *RunItem) Terminal() bool { return terminal(r.State) }
