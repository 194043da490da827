package factory

import (
	"strings"
	"time"
)

// TaskStage is where a factory task stands (docs/spec/foreman.md): the
// factory's agent roles, then the two ends. Any stage may be written at
// any time.
type TaskStage string

// Task stages, as the SDKs spell them.
const (
	StageTriage    TaskStage = "TRIAGE"
	StageSpec      TaskStage = "SPEC"
	StageImplement TaskStage = "IMPLEMENT"
	StageReview    TaskStage = "REVIEW"
	StageComplete  TaskStage = "COMPLETE"
	StageCancelled TaskStage = "CANCELLED"
)

// TaskStages lists every stage, in the order work moves through them.
var TaskStages = []TaskStage{StageTriage, StageSpec, StageImplement, StageReview, StageComplete, StageCancelled}

// ParseTaskStage reads a stage as the API spells it (any case: agents
// write "implement").
func ParseTaskStage(s string) (TaskStage, bool) {
	for _, st := range TaskStages {
		if strings.EqualFold(string(st), strings.TrimSpace(s)) {
			return st, true
		}
	}
	return "", false
}

// Task is a factory task: the unit of work of a factory, bound to the
// conversation of its root run. A work item gets one when its root run is
// created; the API and send_task make others.
type Task struct {
	UID            string    `json:"uid"`
	FactoryUID     string    `json:"factory_uid"`
	ConversationID string    `json:"conversation_id"`
	RunID          string    `json:"run_id"` // the root run at creation
	Stage          TaskStage `json:"stage"`
	Title          string    `json:"title"`
	Description    string    `json:"description,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	Author         *Creator  `json:"author,omitempty"`
	// TicketSource and TicketID name the work item (github,
	// owner/repo#12); TicketURL links to it.
	TicketSource string `json:"ticket_source,omitempty"`
	TicketID     string `json:"ticket_id,omitempty"`
	TicketURL    string `json:"ticket_url,omitempty"`
	// Deleted is when the task was soft-deleted: it is in no list and no
	// read, and its conversation may be bound again.
	Deleted *time.Time `json:"deleted_at,omitempty"`
	// Summary is what complete_task said.
	Summary string `json:"summary,omitempty"`
	// SpecApproved is set when a person approved the task's latest spec
	// review; a later spec review clears it.
	SpecApproved bool `json:"spec_approved,omitempty"`
	// SpecReview is the inbox item of the task's latest spec review: only
	// its approval lets the task into IMPLEMENT (an older one's answer
	// reaches its run, and approves nothing).
	SpecReview string `json:"spec_review,omitempty"`
}

// TaskItem is a task as the SDKs read it (src/resources/factories/tasks.ts).
type TaskItem struct {
	UID            string     `json:"uid"`
	FactoryUID     string     `json:"factory_uid"`
	ConversationID string     `json:"conversation_id"`
	RunID          string     `json:"run_id"`
	Stage          TaskStage  `json:"stage"`
	Title          string     `json:"title"`
	Description    *string    `json:"description"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	Author         *Creator   `json:"author,omitempty"`
	CurrentRun     *TaskRun   `json:"current_run,omitempty"`
	Outputs        []Artifact `json:"outputs,omitempty"`
	TicketID       string     `json:"ticket_id,omitempty"`
	TicketSource   string     `json:"ticket_source,omitempty"`
}

// TaskRun is a task's current top-level run.
type TaskRun struct {
	RunID                string   `json:"run_id"`
	State                RunState `json:"state"`
	IsRunTypeCancellable bool     `json:"is_run_type_cancellable"`
}

// Item is the task as the SDKs read it, without its current run and
// outputs (the caller adds those where asked); ticket says whether the
// ticket's metadata is shown (single reads, full lists).
func (t *Task) Item(ticket bool) TaskItem {
	it := TaskItem{UID: t.UID, FactoryUID: t.FactoryUID, ConversationID: t.ConversationID, RunID: t.RunID, Stage: t.Stage,
		Title: t.Title, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Author: t.Author}
	if t.Description != "" {
		d := t.Description
		it.Description = &d
	}
	if ticket {
		it.TicketID, it.TicketSource = t.TicketID, t.TicketSource
	}
	return it
}

// Inbox item kinds: the Python SDK's (InboxItem.kind), and approval, a
// tool call awaiting a person's answer (docs/spec/foreman.md).
const (
	InboxQuestion         = "question"
	InboxAnsweredQuestion = "answer_question"
	InboxSpecReview       = "spec_review"
	InboxPRReview         = "pr_review"
	InboxBlocked          = "blocked"
	InboxFailed           = "failed"
	InboxApproval         = "approval"
)

// AskKinds are the kinds of question ask_human asks.
var AskKinds = []string{InboxQuestion, InboxSpecReview, InboxPRReview}

// Spec review answers.
const (
	AnswerApprove        = "approve"
	AnswerRequestChanges = "request_changes"
)

// InboxItem is something a person is asked, or told: a question an agent
// asked (ask_human), a spec or pull request to review, a tool call
// awaiting approval, a run that failed. It is resolved when answered, or
// when its run ends.
type InboxItem struct {
	UID        string    `json:"uid"`
	FactoryUID string    `json:"factory_uid"`
	TaskUID    string    `json:"task_uid,omitempty"`
	RunID      string    `json:"run_id"`
	Kind       string    `json:"kind"`
	Title      string    `json:"title"`
	Body       string    `json:"body,omitempty"`
	Options    []string  `json:"options,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	// ReadBy are the API keys (by ID) that marked the item read.
	ReadBy     []string   `json:"read_by,omitempty"`
	Resolved   *time.Time `json:"resolved_at,omitempty"`
	Answer     string     `json:"answer,omitempty"`
	Comment    string     `json:"comment,omitempty"`
	AnsweredBy *Creator   `json:"answered_by,omitempty"`
	// Approval is the tool call an approval is about.
	Approval *Approval `json:"approval,omitempty"`
	// Links are the artifacts a review is about (a pull request).
	Links []InboxLink `json:"links,omitempty"`
}

// InboxLink is a link an item carries.
type InboxLink struct {
	URL   string `json:"url"`
	Title string `json:"title,omitempty"`
}

// Approval is a tool call an agent asked permission for, and the answers
// it offered.
type Approval struct {
	ToolCallID string           `json:"tool_call_id"`
	Title      string           `json:"title"`
	Kind       string           `json:"tool_kind,omitempty"`
	Arguments  string           `json:"arguments,omitempty"`
	Options    []ApprovalOption `json:"options"`
	// Chosen is the option answered, and Timeout says the answer was
	// the timeout's.
	Chosen  string `json:"chosen,omitempty"`
	Timeout bool   `json:"timeout,omitempty"`
}

// ApprovalOption is one answer an agent offered for a tool call.
type ApprovalOption struct {
	ID   string `json:"option_id"`
	Name string `json:"name"`
	Kind string `json:"kind"` // allow_once, allow_always, reject_once, reject_always
}

// InboxWire is an inbox item as the Python SDK reads it
// (types/factories/inbox_item.py), with this server's additions after.
type InboxWire struct {
	NotificationUID string           `json:"notification_uid"`
	FactoryTaskUID  string           `json:"factory_task_uid"`
	FactoryUID      string           `json:"factory_uid"`
	Kind            string           `json:"kind"`
	Recipients      []InboxRecipient `json:"recipients"`
	Stage           TaskStage        `json:"stage"`
	Title           string           `json:"title"`
	CreatedAt       time.Time        `json:"created_at"`
	Description     string           `json:"description,omitempty"`
	IsRead          bool             `json:"is_read"`
	Questions       []InboxQuestionW `json:"questions,omitempty"`
	RunID           string           `json:"run_id,omitempty"`
	Artifacts       []InboxLink      `json:"artifacts,omitempty"`
	OriginLink      string           `json:"origin_link,omitempty"`
	URL             string           `json:"url,omitempty"`
	URLs            []string         `json:"urls,omitempty"`
	Resolved        bool             `json:"resolved"`
	Answer          string           `json:"answer,omitempty"`
	Approval        *Approval        `json:"approval,omitempty"`
}

// InboxRecipient is a person an item is for.
type InboxRecipient struct {
	UID   string `json:"uid"`
	Email string `json:"email,omitempty"`
}

// InboxQuestionW is a question of an item, as the SDK reads it.
type InboxQuestionW struct {
	ID                     string   `json:"id"`
	Options                []string `json:"options"`
	Question               string   `json:"question"`
	Type                   string   `json:"type"` // single_select, multi_select
	RecommendedOptionIndex *int     `json:"recommended_option_index,omitempty"`
}

// Wire is the item as the SDK reads it, for a reader (an API key's ID)
// and the stage and origin of its task.
func (it *InboxItem) Wire(reader string, stage TaskStage, origin string) InboxWire {
	w := InboxWire{NotificationUID: it.UID, FactoryTaskUID: it.TaskUID, FactoryUID: it.FactoryUID, Kind: it.Kind,
		Recipients: []InboxRecipient{}, Stage: stage, Title: it.Title, CreatedAt: it.CreatedAt, Description: it.Body,
		RunID: it.RunID, Artifacts: it.Links, OriginLink: origin, Resolved: it.Resolved != nil, Answer: it.Answer,
		Approval: it.Approval}
	for _, r := range it.ReadBy {
		if r == reader {
			w.IsRead = true
		}
	}
	if len(it.Options) > 0 {
		w.Questions = []InboxQuestionW{{ID: it.UID, Options: it.Options, Question: it.Title, Type: "single_select"}}
	}
	for _, l := range it.Links {
		w.URLs = append(w.URLs, l.URL)
	}
	if len(w.URLs) > 0 {
		w.URL = w.URLs[0]
	}
	return w
}

// Sources of a foreman's dispatch (ORCHESTRATION) and of send_task (MCP).
const (
	SourceOrchestration = "ORCHESTRATION"
	SourceMCP           = "MCP"
)

// Task UID and inbox item prefixes.
const (
	PrefixTask  = "task_"
	PrefixInbox = "ntf_"
)
