package factory

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// RunState is where a run stands (docs/spec/agents-api.md).
type RunState string

// Run states (docs/spec/agents-api.md).
const (
	// StatePending and StateClaimed are the product's
	// (docs/spec/platform-api.md): accepted but not yet queued for an executor, and
	// taken by an executor whose agent is not running yet. This server
	// queues at once and starts at once, so no run is in them yet; lists
	// accept them as filters.
	StatePending    RunState = "PENDING"
	StateClaimed    RunState = "CLAIMED"
	StateQueued     RunState = "QUEUED"
	StateInProgress RunState = "INPROGRESS"
	StateSucceeded  RunState = "SUCCEEDED"
	StateFailed     RunState = "FAILED"
	StateCancelled  RunState = "CANCELLED"
	StateError      RunState = "ERROR"
	StateBlocked    RunState = "BLOCKED"
)

// RunStates lists every state, in the order a run may pass through them.
var RunStates = []RunState{StatePending, StateQueued, StateClaimed, StateInProgress, StateBlocked, StateSucceeded, StateFailed, StateCancelled, StateError}

// Terminal reports whether a run in this state has ended (a follow-up can
// continue it).
func (s RunState) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateCancelled, StateError:
		return true
	}
	return false
}

// Run sources: what created a run, spelled as the product spells them
// (docs/spec/platform-api.md). Factory dispatch is API, with the run's
// factory_uid.
const (
	SourceAPI           = "API"
	SourceCLI           = "CLI"
	SourceCustomWebhook = "CUSTOM_WEBHOOK"
	SourceScheduled     = "SCHEDULED_AGENT"
)

// RunSourceNames are the sources a run list can filter by, as the API
// spells them.
var RunSourceNames = []string{SourceAPI, SourceCLI, SourceCustomWebhook, SourceScheduled, SourceGitHub, SourceGitLab, SourceLinear,
	SourceSlack, SourceJira, SourceTeams, SourceAzureDevOps, SourceOrchestration, SourceMCP}

// legacySources are the spellings of runs stored before the product's:
// they read back under the new names.
var legacySources = map[string]string{"WEBHOOK": SourceCustomWebhook, "FACTORY": SourceAPI}

// SourceName is a stored source as the API shows it.
func SourceName(stored string) string {
	if n, ok := legacySources[stored]; ok {
		return n
	}
	return stored
}

// StoredSources are the stored spellings a source filter matches: a
// custom webhook's runs were stored as WEBHOOK before, and the old name is
// still a filter (old clients). FACTORY finds the runs stored under it;
// API does not (those read back as API, but a filter on API finds the
// runs stored as API: dispatches since, and direct creates).
func StoredSources(name string) []string {
	switch name {
	case "WEBHOOK", SourceCustomWebhook:
		return []string{SourceCustomWebhook, "WEBHOOK"}
	}
	return []string{name}
}

// Run is an agent run (docs/spec/agents-api.md's RunItem, and what executing it
// needs).
type Run struct {
	ID        string     `json:"run_id"`
	Title     string     `json:"title"`
	Prompt    string     `json:"prompt"`
	State     RunState   `json:"state"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	// FinishedAt is when the run last ended; nil while it runs or waits.
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	Config      json.RawMessage `json:"agent_config,omitempty"`
	Environment string          `json:"environment_id,omitempty"`
	// Worker is the worker (docs/spec/workers.md) that took the run's
	// latest turn, and holds its workspace: the run's next turn goes to
	// it. Empty when the server ran it itself.
	Worker string `json:"worker,omitempty"`
	// Current is the run's latest turn while it is in flight; nil between
	// turns.
	Current *TurnRecord `json:"current_turn,omitempty"`
	// RemoteTurn and ClaimedTurn are what runs stored before Current: the
	// attempt published to the workers' queue, and the one a worker took.
	// They are read (a run left in flight by an older version is followed
	// by them), never written.
	RemoteTurn    string            `json:"remote_turn,omitempty"`
	ClaimedTurn   string            `json:"claimed_turn,omitempty"`
	Source        string            `json:"source,omitempty"`
	StatusMessage *StatusMessage    `json:"status_message,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	Creator       *Creator          `json:"creator,omitempty"`
	FactoryUID    string            `json:"factory_uid,omitempty"`
	AutomationID  string            `json:"automation_id,omitempty"`
	DeliveryID    string            `json:"delivery_id,omitempty"`
	Attachments   []Attachment      `json:"attachments,omitempty"`
	// Turns counts the turns run so far; a follow-up to a finished run
	// starts the next one.
	Turns int `json:"turns"`
	// Events counts the run's timeline entries (the next one's number).
	Events int `json:"event_count"`
	// Messages and MessageBytes count the status messages the run kept,
	// in all its turns (MaxRunMessages, MaxRunMessageBytes).
	Messages     int   `json:"messages,omitempty"`
	MessageBytes int64 `json:"message_bytes,omitempty"`
	// Process is the agent process of the turn in progress, so that a
	// server that died under it can kill what is left at its next start.
	Process *ProcessRef `json:"process,omitempty"`
	// ParentRunID is the run that started this one; Ancestors are its
	// parent, the parent's parent, and so on (at most MaxRunDepth), for
	// the ancestor_run_id filter. The root is the last of them.
	ParentRunID string   `json:"parent_run_id,omitempty"`
	Ancestors   []string `json:"ancestors,omitempty"`
	Skill       string   `json:"skill,omitempty"`
	// ConversationID is the conversation the run belongs to: given at
	// creation, else the run's own.
	ConversationID string       `json:"conversation_id,omitempty"`
	Schedule       *RunSchedule `json:"schedule,omitempty"`
	// ScheduledAt is the instant a scheduled run fired for.
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
	TriggerURL  string     `json:"trigger_url,omitempty"`
	// TraceID is the trace the run's creation belongs to (a delivery's,
	// when an automation started it; set when tracing is on and the trace
	// is sampled); Traceparent is its creation span (W3C trace context),
	// the parent of its turns' spans.
	TraceID     string `json:"trace_id,omitempty"`
	Traceparent string `json:"traceparent,omitempty"`
	// Artifacts are what the run produced; ArtifactDigests (what each
	// was, by its file path or URL) and ArtifactBytes keep a later turn
	// from reporting the same again and the run within its limits.
	Artifacts       []Artifact        `json:"artifacts,omitempty"`
	ArtifactDigests map[string]string `json:"artifact_digests,omitempty"`
	ArtifactBytes   int64             `json:"artifact_bytes,omitempty"`
	// Usage is what the run consumed, as its harness reported it; nil
	// until one has.
	Usage *RequestUsage `json:"usage,omitempty"`
	// Setup is what a run of a factory's agent brings to its workspace
	// before the agent starts: the agent, its harness, its skills and its
	// runner's setup commands (docs/definitions.md, "What agents do").
	Setup *RunSetup `json:"setup,omitempty"`
	// Repositories are the repositories the run works on, cloned into its
	// workspace on its branch (Branch()); Origin is the issue or pull
	// request it came from and reports to, and ReportComment the comment
	// it keeps there up to date.
	Repositories  []RepoCheckout `json:"repositories,omitempty"`
	Origin        *Origin        `json:"origin,omitempty"`
	ReportComment string         `json:"report_comment,omitempty"`
	// CreatorSecrets name, by code host, the managed secrets holding the
	// tokens of the person who created the run (its API key's): a factory
	// whose credentialStrategy is CREATOR reaches its repositories with
	// them. Names only; values are read when a turn starts.
	CreatorSecrets map[string]string `json:"creator_secrets,omitempty"`
	// ReactedTo is the last comment the run's write-back reacted to (the
	// origin's comment, or a later one that continued the run).
	ReactedTo int64 `json:"reacted_to,omitempty"`
	// Talkback is what the run's write-back has said where it came from;
	// Webhook is its own run-status webhook (docs/spec/talkback.md).
	Talkback *Talkback   `json:"talkback,omitempty"`
	Webhook  *RunWebhook `json:"webhook,omitempty"`
	// Asking is the question the run's agent asked a person (ask_human,
	// docs/spec/foreman.md): its turn ends BLOCKED, not SUCCEEDED, until
	// the answer comes as a follow-up.
	Asking *Asking `json:"asking,omitempty"`
	// AgentSession is the ACP session of the run's last turn: the next
	// turn loads it when its agent can (docs/spec/harnesses.md).
	AgentSession string `json:"agent_session,omitempty"`
	// Spent is what the run consumed against its budget (Setup.Budget);
	// Exceeded, the limit it ran past, once it has.
	Spent    *Spent          `json:"spent,omitempty"`
	Exceeded *BudgetExceeded `json:"budget_exceeded,omitempty"`

	// steps are the states the run went through since it was read
	// (MoveTo); the store checks them before it writes the run.
	steps []RunState
}

// Asking is a question waiting for a person: the inbox item, and what it
// asks.
type Asking struct {
	Item     string `json:"item"`
	Question string `json:"question"`
}

// TurnRecord is a run's turn in flight, as the run's state machine knows
// it: its attempt (every event of the turn names it; events of another
// attempt change nothing), the follow-up it carries, and whether it was
// handed to the workers' queue (Remote) and asked to stop (Stopped: a
// cancel recorded before the turn ended; a claim of it is refused).
type TurnRecord struct {
	Attempt  string `json:"attempt"`
	FollowUp string `json:"follow_up,omitempty"`
	Remote   bool   `json:"remote,omitempty"`
	Stopped  bool   `json:"stopped,omitempty"`
	// Messages and MessageBytes count the turn's status messages kept;
	// Limited says they reached a bound (the rest are dropped).
	Messages     int   `json:"messages,omitempty"`
	MessageBytes int64 `json:"message_bytes,omitempty"`
	Limited      bool  `json:"limited,omitempty"`
	// Approvals are the inbox items of the tool calls the turn's agent
	// waits for a person to approve: the run is BLOCKED while there are
	// any, its turn still live.
	Approvals []string `json:"approvals,omitempty"`
	// Started is when the turn's agent started: the run's time against
	// its budget counts from it.
	Started *time.Time `json:"started,omitempty"`
}

// Live reports whether the turn of attempt is the run's current one and
// still running (BLOCKED on an approval included): its events may change
// the run.
func (r *Run) Live(attempt string) bool {
	return r.Current != nil && r.Current.Attempt == attempt &&
		(r.State == StateClaimed || r.State == StateInProgress || r.State == StateBlocked)
}

// Approving reports whether the run is BLOCKED on a tool call's approval:
// its turn goes on, waiting for a person.
func (r *Run) Approving() bool { return r.State == StateBlocked && r.Current != nil }

// RunSetup is the agent a run executes and how its workspace is prepared.
type RunSetup struct {
	// WorkerHost is the worker the run goes to (workerHost of the resolved
	// settings; "" or warp: any).
	WorkerHost string   `json:"worker_host,omitempty"`
	Agent      string   `json:"agent,omitempty"`
	AgentUID   string   `json:"agent_uid,omitempty"`
	Harness    *Harness `json:"harness,omitempty"`
	Runner     string   `json:"runner,omitempty"`
	// SetupCommands run in order in the workspace, with sh -c, before
	// the first turn; the first that fails ends the run FAILED
	// (environment_setup_failed).
	SetupCommands []string `json:"setup_commands,omitempty"`
	// DockerImage and InstanceShape are the runner's: a worker's docker
	// backend runs the run in a container of that image, that size.
	DockerImage   string         `json:"docker_image,omitempty"`
	InstanceShape *InstanceShape `json:"instance_shape,omitempty"`
	// MCPServers are the MCP servers offered to the agent's ACP session
	// (factory-wide, then the resolved settings'), by name: {command, args,
	// env} or {url, headers}; a {warpId} server names the product's
	// registry, which this server does not have, and is not offered.
	MCPServers map[string]json.RawMessage `json:"mcp_servers,omitempty"`
	// Files are the skills' files, by path in the workspace
	// (.agents/skills/<skill>/...); their bytes are stored with the run.
	Files []string `json:"files,omitempty"`
	// Secrets are the managed secrets granted to the agent (factory-wide,
	// then the resolved execution settings', then the harness's auth),
	// by name: their values are read when the run starts, never stored
	// with it.
	Secrets []string `json:"secrets,omitempty"`
	// Permissions is the agent's policy for its tool calls (allow, deny,
	// ask), over its environment's; Budget bounds what the run consumes.
	Permissions string  `json:"permissions,omitempty"`
	Budget      *Budget `json:"budget,omitempty"`
}

// Branch is the run's branch in its repositories: its own, or its tree's.
// The runs of one tree (a task's foreman and the agents it dispatched)
// share their root's branch: the implementer pushes it, the reviewer
// checks it out.
func (r *Run) Branch() string { return "factory/" + r.RootRunID() }

// SkillsDirInWorkspace is where a run's skills are laid out: the folder
// agents look in (Agent Skills: .agents/skills/<name>/SKILL.md).
const SkillsDirInWorkspace = ".agents/skills"

// MaxRunDepth bounds a tree of runs: a run's parent chain is at most this
// long.
const MaxRunDepth = 32

// RunSchedule is the schedule that created a run, as it was then.
type RunSchedule struct {
	CronSchedule string `json:"cron_schedule"`
	ScheduleID   string `json:"schedule_id"`
	ScheduleName string `json:"schedule_name"`
}

// RootRunID is the run at the root of the run's tree: itself when it has
// no parent.
func (r *Run) RootRunID() string {
	if len(r.Ancestors) > 0 {
		return r.Ancestors[len(r.Ancestors)-1]
	}
	return r.ID
}

// Conversation is the run's conversation ID.
func (r *Run) Conversation() string {
	if r.ConversationID != "" {
		return r.ConversationID
	}
	return derivedUUID("conversation\x00" + r.ID)
}

// Executor is who executes runs here: this server, as a service account.
var Executor = Creator{Type: "service_account", UID: "factory-server", DisplayName: "factory server"}

// Worker is the worker an executor is, "" for this server: a worker
// executes as a service account named for it.
func (c *Creator) Worker() string {
	if c == nil || c.UID == Executor.UID {
		return ""
	}
	return c.UID
}

// ProcessRef names a process group precisely enough to find it again: its
// leader's PID and the leader's start time (in clock ticks since boot, as
// /proc says it), which tell it from a later process with the same PID.
type ProcessRef struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// Creator is who created a run.
type Creator struct {
	Type        string `json:"type"`
	UID         string `json:"uid"`
	DisplayName string `json:"display_name,omitempty"`
}

// StatusMessage is the latest thing a run reported. ErrorCode is this
// project's code as the run was stored; the API shows the SDKs' nearest
// one (Public), with this one in Detail.
type StatusMessage struct {
	Message   string `json:"message"`
	ErrorCode string `json:"error_code,omitempty"`
	Retryable bool   `json:"retryable,omitempty"`
	// Detail is the finer cause behind ErrorCode, when the API's code is
	// coarser than the stored one (worker_lost behind
	// resource_unavailable).
	Detail string `json:"detail,omitempty"`
}

// ErrorCodes are the platform API's error codes, the only ones a run's
// status_message.error_code takes (ErrorCode of the newest SDKs:
// src/resources/agent/agent.ts, types/error_code.py).
var ErrorCodes = []string{"insufficient_credits", "feature_not_available", "external_authentication_required", "not_authorized",
	"invalid_request", "resource_not_found", "budget_exceeded", "integration_disabled", "integration_not_configured",
	"operation_not_supported", "environment_setup_failed", "content_policy_violation", "conflict", "authentication_required",
	"resource_unavailable", "agent_stream_network_error", "agent_stream_failure", "internal_error"}

// finerErrorCodes map this project's run error codes to the platform's
// nearest: the agent's own failure is the agent's stream failing; a lost
// worker or a limit of the machine is a resource that was not there to
// finish; a missing secret or environment is a resource not found; a
// harness the server does not run is an integration not configured.
var finerErrorCodes = map[string]string{
	"agent_process_failed":   "agent_stream_failure",
	"infrastructure_timeout": "resource_unavailable",
	"worker_lost":            "resource_unavailable",
	"secret_unavailable":     "resource_not_found",
	"unknown_environment":    "resource_not_found",
	"harness_not_configured": "integration_not_configured",
	"checkout_failed":        "environment_setup_failed",
}

// PlatformErrorCode is the platform's code for one of this project's: the
// code itself when the platform has it, its nearest otherwise, and
// internal_error for a code this table does not know.
func PlatformErrorCode(code string) string {
	for _, c := range ErrorCodes {
		if c == code {
			return code
		}
	}
	if c, ok := finerErrorCodes[code]; ok {
		return c
	}
	return "internal_error"
}

// Public is the status message as the API shows it: error_code from the
// platform's codes, the stored code in detail when that differs.
func (m *StatusMessage) Public() *StatusMessage {
	if m == nil {
		return nil
	}
	out := *m
	if m.ErrorCode != "" {
		if out.ErrorCode = PlatformErrorCode(m.ErrorCode); out.ErrorCode != m.ErrorCode && out.Detail == "" {
			out.Detail = m.ErrorCode
		}
	}
	return &out
}

// RequestUsage is what a run consumed, as the SDKs' RunItem.request_usage
// types it; every field is optional (absent: not measured).
type RequestUsage struct {
	TotalTokens      *int64                     `json:"total_tokens,omitempty"`
	ModelTokenUsage  []ModelTokenUsage          `json:"model_token_usage,omitempty"`
	UsageByCategory  map[string]json.RawMessage `json:"usage_by_category,omitempty"`
	InferenceCostUSD *float64                   `json:"inference_cost_usd,omitempty"`
	ComputeCostUSD   *float64                   `json:"compute_cost_usd,omitempty"`
	PlatformCostUSD  *float64                   `json:"platform_cost_usd,omitempty"`
	InferenceCost    *float64                   `json:"inference_cost,omitempty"`
	ComputeCost      *float64                   `json:"compute_cost,omitempty"`
	PlatformCost     *float64                   `json:"platform_cost,omitempty"`
}

// ModelTokenUsage is the tokens one model consumed; usage_type is warp,
// byok or custom_endpoint.
type ModelTokenUsage struct {
	ModelID          string           `json:"model_id"`
	TotalTokens      int64            `json:"total_tokens"`
	UsageType        string           `json:"usage_type"`
	TokensByCategory map[string]int64 `json:"tokens_by_category,omitempty"`
}

// Attachment is a file given to the run, stored in its workspace.
type Attachment struct {
	Name     string `json:"file_name"`
	MimeType string `json:"mime_type,omitempty"`
	Size     int64  `json:"size"`
}

// RunEvent is one entry of a run's timeline.
type RunEvent struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // created, started, message, followup, finished
	Message string    `json:"message,omitempty"`
	State   RunState  `json:"state,omitempty"`
	// Data is the event's detail beside its message (an approval's tool
	// call and options, a budget's limit and use), in its payload.
	Data map[string]any `json:"data,omitempty"`
}

// RunItem is a run as the API shows it.
type RunItem struct {
	RunID     string     `json:"run_id"`
	TaskID    string     `json:"task_id"`
	Title     string     `json:"title"`
	Prompt    string     `json:"prompt"`
	State     RunState   `json:"state"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	// FinishedAt is null until the run is terminal (the current SDKs
	// require the key).
	FinishedAt *time.Time `json:"finished_at"`
	// RootRunID is the run at the root of its tree: itself when it has no
	// parent.
	RootRunID   string `json:"root_run_id"`
	ParentRunID string `json:"parent_run_id,omitempty"`
	// RunTime is how long the run has run, as an ISO 8601 duration
	// (PT1M30.5S), from its start to its end or to now.
	RunTime       string            `json:"run_time,omitempty"`
	AgentConfig   json.RawMessage   `json:"agent_config,omitempty"`
	Source        string            `json:"source,omitempty"`
	Creator       *Creator          `json:"creator,omitempty"`
	StatusMessage *StatusMessage    `json:"status_message,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	FactoryUID    string            `json:"factory_uid,omitempty"`
	AutomationID  string            `json:"automation_id,omitempty"`
	DeliveryID    string            `json:"delivery_id,omitempty"`
	Attachments   []Attachment      `json:"attachments,omitempty"`
	// Artifacts is what the run produced; always a list.
	Artifacts      []Artifact   `json:"artifacts"`
	ConversationID string       `json:"conversation_id"`
	AgentSkill     *AgentSkill  `json:"agent_skill,omitempty"`
	Schedule       *RunSchedule `json:"schedule,omitempty"`
	ScheduledAt    *time.Time   `json:"scheduled_at,omitempty"`
	TriggerURL     string       `json:"trigger_url,omitempty"`
	// TraceID is the OpenTelemetry trace of the run's creation and turns,
	// when tracing is on and sampled it.
	TraceID string `json:"trace_id,omitempty"`
	// SubmittedPrompt is what the agent was given: the prompt with the
	// automation's envelope, as PROMPT.md holds it.
	SubmittedPrompt      string   `json:"submitted_prompt"`
	ExecutionLocation    string   `json:"execution_location"`
	Executor             *Creator `json:"executor"`
	IsRunTypeCancellable bool     `json:"is_run_type_cancellable"`
	// RequestUsage is null until the run's harness has reported what it
	// consumed (the SDKs require the key).
	RequestUsage *RequestUsage `json:"request_usage"`
}

// AgentSkill is the skill a run used.
type AgentSkill struct {
	Name     string `json:"name,omitempty"`
	FullPath string `json:"full_path,omitempty"`
}

// Execution locations: every run here executes on a server or worker.
const ExecutionRemote = "REMOTE"

// Item is the API view of a run.
func (r *Run) Item() RunItem {
	it := RunItem{RunID: r.ID, TaskID: r.ID, Title: r.Title, Prompt: r.Prompt, State: r.State, CreatedAt: r.CreatedAt,
		UpdatedAt: r.UpdatedAt, StartedAt: r.StartedAt, AgentConfig: r.Config, Source: r.Source, Creator: r.Creator,
		StatusMessage: r.StatusMessage.Public(), Metadata: r.Metadata, FactoryUID: r.FactoryUID, AutomationID: r.AutomationID,
		DeliveryID: r.DeliveryID, Attachments: r.Attachments, RootRunID: r.RootRunID(), ParentRunID: r.ParentRunID,
		Artifacts: r.Artifacts, ConversationID: r.Conversation(), Schedule: r.Schedule, ScheduledAt: r.ScheduledAt, TriggerURL: r.TriggerURL, TraceID: r.TraceID,
		SubmittedPrompt: r.Prompt, ExecutionLocation: ExecutionRemote, IsRunTypeCancellable: true, RequestUsage: r.Usage}
	it.Source = SourceName(r.Source)
	executor := Executor
	if r.Worker != "" {
		// A worker executes as a service account of this server (the SDKs
		// know user and service_account only).
		executor = Creator{Type: "service_account", UID: r.Worker, DisplayName: "worker " + r.Worker}
	}
	it.Executor = &executor
	if it.Artifacts == nil {
		it.Artifacts = []Artifact{}
	}
	if r.Skill != "" {
		it.AgentSkill = &AgentSkill{Name: r.Skill, FullPath: r.Skill}
	}
	if r.State.Terminal() {
		it.FinishedAt = r.FinishedAt
	}
	if r.StartedAt != nil {
		end := time.Now()
		if it.FinishedAt != nil {
			end = *it.FinishedAt
		}
		it.RunTime = isoDuration(end.Sub(*r.StartedAt))
	}
	return it
}

// isoDuration writes a duration as ISO 8601 does (PT1H2M3.5S).
func isoDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	h, m := d/time.Hour, (d%time.Hour)/time.Minute
	sec := float64(d%time.Minute) / float64(time.Second)
	out := "PT"
	if h > 0 {
		out += strconv.FormatInt(int64(h), 10) + "H"
	}
	if m > 0 {
		out += strconv.FormatInt(int64(m), 10) + "M"
	}
	if sec > 0 || out == "PT" {
		out += strconv.FormatFloat(sec, 'f', -1, 64) + "S"
	}
	return out
}

// Terminal reports whether the run has ended (a follow-up can continue it).
func (r *RunItem) Terminal() bool { return r.State.Terminal() }

// ParseRunState reads a state as the API spells it.
func ParseRunState(s string) (RunState, bool) {
	for _, st := range RunStates {
		if string(st) == s {
			return st, true
		}
	}
	return "", false
}

// RunRequest is the body of a run's creation (the SDKs' RunAgentRequest).
// Unknown fields are ignored: SDKs are newer than servers.
type RunRequest struct {
	Prompt           string            `json:"prompt,omitempty"`
	Title            string            `json:"title,omitempty"`
	Config           map[string]any    `json:"config,omitempty"`
	Skill            string            `json:"skill,omitempty"`
	AgentIdentityUID string            `json:"agent_identity_uid,omitempty"`
	ConversationID   string            `json:"conversation_id,omitempty"`
	ParentRunID      string            `json:"parent_run_id,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	Attachments      []RunAttachment   `json:"attachments,omitempty"`
	// Mode is normal (the default), plan or orchestrate; this server
	// checks it and runs every mode as normal.
	Mode string `json:"mode,omitempty"`
	// Webhook (extension) sends the run's run-status events to a URL.
	Webhook *RunWebhookRequest `json:"webhook,omitempty"`
}

// RunAttachment is a file sent with a new run; Data is base64.
type RunAttachment struct {
	FileName string `json:"file_name"`
	MimeType string `json:"mime_type,omitempty"`
	Data     string `json:"data"`
}

// TimelineEvent is a timeline entry as the current SDKs read it
// (event_type, event_uuid, occurred_at, run_id, payload), with this
// server's fields of RunEvent beside them for older clients.
type TimelineEvent struct {
	EventType  string         `json:"event_type"`
	EventUUID  string         `json:"event_uuid"`
	OccurredAt time.Time      `json:"occurred_at"`
	RunID      string         `json:"run_id"`
	Payload    map[string]any `json:"payload,omitempty"`
	RunEvent
}

// Timeline is a run's events as the current SDKs read them: the product's
// event types for the run's own milestones (oz_run_created,
// oz_run_claimed, agent_started, oz_run_done, oz_run_failed, oz_run_errored,
// oz_run_cancelled, oz_run_blocked), this server's for the rest
// (status_message, followup), each with its detail in payload.
func Timeline(runID string, events []*RunEvent) []TimelineEvent {
	out := make([]TimelineEvent, 0, len(events))
	for i, e := range events {
		if te, ok := TimelineEntry(runID, i, e); ok {
			out = append(out, te)
		}
	}
	return out
}

// TimelineEntry is the run's event at position i as a timeline entry;
// false for the server's own steps that the timeline does not show (a
// turn handed to the workers' queue: dispatched).
func TimelineEntry(runID string, i int, e *RunEvent) (TimelineEvent, bool) {
	if e.Kind == "dispatched" {
		return TimelineEvent{}, false
	}
	te := TimelineEvent{EventType: eventType(e), EventUUID: eventUUID(runID, i), OccurredAt: e.Time, RunID: runID, RunEvent: *e}
	te.Payload = map[string]any{}
	if e.Message != "" {
		te.Payload["message"] = e.Message
	}
	if e.State != "" {
		te.Payload["state"] = e.State
	}
	for k, v := range e.Data {
		te.Payload[k] = v
	}
	if len(te.Payload) == 0 {
		te.Payload = nil
	}
	return te, true
}

func eventType(e *RunEvent) string {
	switch e.Kind {
	case "created":
		return "oz_run_created"
	case "claimed":
		return "oz_run_claimed"
	case "started":
		return "agent_started"
	case "message":
		// The executors' prefixes tell tool calls, plans and permission
		// decisions from the agent's own messages.
		for prefix, typ := range messageEventTypes {
			if strings.HasPrefix(e.Message, prefix) {
				return typ
			}
		}
		return "status_message"
	case "followup":
		return "followup"
	case "finished":
		switch e.State {
		case StateSucceeded:
			return "oz_run_done"
		case StateFailed:
			return "oz_run_failed"
		case StateCancelled:
			return "oz_run_cancelled"
		case StateBlocked:
			return "oz_run_blocked"
		}
		return "oz_run_errored"
	}
	return e.Kind
}

// TimelineEventTypes are every event type a timeline can hold: the names
// of a run's event stream's events.
var TimelineEventTypes = []string{"oz_run_created", "oz_run_claimed", "agent_started", "status_message", "tool_call", "plan", "permission_decision",
	"artifact_problem", "checkout_skipped", "write_back_failed", "followup", EventApprovalRequested, EventApprovalAnswered, EventBudgetExceeded,
	"oz_run_done", "oz_run_failed", "oz_run_cancelled", "oz_run_blocked", "oz_run_errored"}

// Timeline events of their own kind: a tool call put to a person and its
// answer (permissions ask), a budget run out.
const (
	EventApprovalRequested = "approval_requested"
	EventApprovalAnswered  = "approval_answered"
	EventBudgetExceeded    = "budget_exceeded"
)

// messageEventTypes are the event types of status messages by prefix.
var messageEventTypes = map[string]string{"[tool] ": "tool_call", "[plan] ": "plan", "[permission] ": "permission_decision",
	"artifacts: ": "artifact_problem", CheckoutSkipped: "checkout_skipped", WriteBackFailed: "write_back_failed"}

// Prefixes of the server's own status messages that the timeline shows as
// events of their own: a repository not cloned (its host has no
// credential here), a report to the run's origin that failed.
const (
	CheckoutSkipped = "[checkout skipped] "
	WriteBackFailed = "[write-back failed] "
)

// eventUUID is an event's UUID, derived from its run and place, so that
// it is the same at every read: the SHA-256 of both, as a version 5
// style UUID.
func eventUUID(runID string, seq int) string {
	return derivedUUID(runID + "\x00" + strconv.Itoa(seq))
}

// derivedUUID is the UUID a string always gives: its SHA-256, with the
// bits of a version 5 UUID.
func derivedUUID(s string) string {
	h := sha256.Sum256([]byte(s))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return formatUUID([16]byte(h[:16]))
}
