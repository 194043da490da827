// Package runtime executes runs: an agent process working on a prompt in a
// workspace. This file holds what every executor shares; the run store,
// queue and Agents API build on it.
package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"factory"
)

// Turn is one turn of a run: everything a host needs to run it (the
// prompt and files to lay out, the agent's command and environment, the
// runner's setup, image and shape, where it must run), built once from the
// store by the run manager. It is serialisable and travels to a worker as
// it is; what is only this machine's (where the run's folder is, the user
// the agent runs as, the hook told when it starts) is not sent.
type Turn struct {
	RunID string `json:"run_id"`
	// Attempt names this turn: every event of it names it, and the
	// run's state machine takes events of its current attempt only.
	Attempt string `json:"attempt"`
	// Number counts the run's turns from 1; a follow-up that continues
	// a finished run starts the next.
	Number   int    `json:"number"`
	Prompt   string `json:"prompt"`
	FollowUp string `json:"follow_up,omitempty"` // the message of a continued run's turn
	// Attachments are the run's files by name, laid out beside
	// PROMPT.md and in attachments/ where the workspace lacks them; Files
	// are the agent's skills' files by path in the workspace.
	Attachments map[string][]byte `json:"attachments,omitempty"`
	Files       map[string][]byte `json:"files,omitempty"`
	// Executor is how Command runs: ExecutorExec (a command, the prompt
	// on its stdin) or ExecutorACP (an agent over the Agent Client
	// Protocol, answering permission requests by Permissions, offered
	// the MCP servers).
	Executor    string                     `json:"executor"`
	Command     []string                   `json:"command"`
	Permissions string                     `json:"permissions,omitempty"`
	MCPServers  map[string]json.RawMessage `json:"mcp_servers,omitempty"`
	Env         []string                   `json:"env,omitempty"` // KEY=VALUE added to the agent's environment
	// IdleTimeout ends the turn FAILED after this long without output;
	// Timeout after this long in all. Zero means no limit.
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	Timeout     time.Duration `json:"timeout,omitempty"`
	// Setup are the runner's setup commands (Runner names it), run in
	// the workspace before the agent on the run's first turn only; Image
	// and Shape are its container's (a worker's docker backend).
	Setup  []string               `json:"setup,omitempty"`
	Runner string                 `json:"runner,omitempty"`
	Image  string                 `json:"image,omitempty"`
	Shape  *factory.InstanceShape `json:"shape,omitempty"`
	// Worker is the worker the turn must run on: the one that holds a
	// continued run's workspace, or the one the run names; "" any.
	Worker string `json:"worker,omitempty"`
	// Checkout are the run's repositories, cloned into the workspace
	// before the setup commands (those not there yet); their tokens are in
	// Env.
	Checkout []Checkout `json:"checkout,omitempty"`
	// Session is the ACP session of the run's previous turn: the turn
	// loads it (session/load) when the agent offers that.
	Session string `json:"session,omitempty"`
	// HomeFiles are laid out in the run's own HOME (Home) before the
	// agent starts, by path inside it: a harness's settings.
	HomeFiles map[string][]byte `json:"home,omitempty"`
	// BudgetTime is what the run's budget (maxDuration) leaves of its
	// time: the turn ends FAILED, budget_exceeded, when it runs out. Zero
	// means no budget.
	BudgetTime time.Duration `json:"budget_time,omitempty"`

	// Dir is the run's folder on the machine that runs the turn (its
	// workspace, output and logs are in it); set by the host.
	Dir string `json:"-"`
	// RunAs, when set, is the user the agent process runs as (the
	// control plane's own host only).
	RunAs *syscall.Credential `json:"-"`
	// Started, when set, is told the agent's process group as soon as it
	// has started (0 when it is not this machine's: a container's).
	Started func(pid int) `json:"-"`
	// Confine, when set, confines the agent and its setup commands to
	// the run's own folders (Confinement; this machine's processes only).
	Confine *Confinement `json:"-"`

	// ws is the workspace as LayOut opened and checked it: the turn's
	// every file operation in it goes through this root.
	ws *os.Root
	// Approve, when set, puts a tool call to a person (permissions ask)
	// and waits for the answer.
	Approve Approver `json:"-"`
}

// Executors a turn names.
const (
	ExecutorExec = "exec"
	ExecutorACP  = "acp"
)

// Workspace is the agent's working directory: Dir's workspace.
func (t *Turn) Workspace() string { return filepath.Join(t.Dir, "workspace") }

// OutputDir is where the agent leaves what it produced
// ($FACTORY_OUTPUT_DIR), collected as the run's artifacts after each turn:
// beside the workspace, so that a repository checked out there does not
// see it.
func (t *Turn) OutputDir() string { return filepath.Join(t.Dir, "output") }

// Home is the run's own home folder, beside the workspace: the agent's
// HOME where it is confined (a container, Landlock, another user), so
// that it needs nothing of the machine's user's.
func (t *Turn) Home() string { return filepath.Join(t.Dir, "home") }

// PromptFile is PROMPT.md in the workspace.
func (t *Turn) PromptFile() string { return filepath.Join(t.Workspace(), "PROMPT.md") }

// AttachmentsDir is the workspace's attachments/.
func (t *Turn) AttachmentsDir() string { return filepath.Join(t.Workspace(), "attachments") }

// Event is something a turn reported: a status message of its agent, or a
// step of the turn (Phase): a worker claimed it (Worker), its agent started
// (PID, when it is this machine's process).
type Event struct {
	Time    time.Time
	Message string
	Phase   string
	Worker  string
	PID     int
}

// Phases of a turn: CLAIMED once a worker took it, INPROGRESS once its
// agent runs.
const (
	PhaseClaimed = "claimed"
	PhaseStarted = "started"
)

// Result is how a turn ended.
type Result struct {
	State   factory.RunState // SUCCEEDED, FAILED, CANCELLED or ERROR
	Message string           // why, for a status message
	// Stderr is the end of the agent's standard error, kept for diagnosis.
	Stderr string
	// Code is the error code of a turn that did not succeed, from the
	// platform API's catalog; empty takes the state's (ERROR:
	// internal_error, FAILED: agent_process_failed).
	Code string
	// Links are the pull requests and references the agent named in its
	// messages (the ACP executor reads them from resource links).
	Links []factory.Artifact
	// Dropped counts the status messages the turn's host dropped over the
	// turn's bounds (a worker's: LimitOutput).
	Dropped *Dropped `json:"dropped,omitempty"`
	// Session is the ACP session the turn used: the run's next turn loads
	// it.
	Session string `json:"session,omitempty"`
}

// Error codes of runs (docs/spec/platform-api.md, Errors).
const (
	CodeInternal              = "internal_error"
	CodeAgentProcessFailed    = "agent_process_failed"
	CodeInfrastructureTimeout = "infrastructure_timeout"
	CodeBudgetExceeded        = "budget_exceeded"
)

// Executor runs turns. Run blocks until the turn ends; cancelling ctx
// cancels the turn (the result is then CANCELLED). events is called from
// one goroutine at a time, in order.
type Executor interface {
	Run(ctx context.Context, t Turn, events func(Event)) Result
}

// Why a turn is stopped, as its context's cause.
var (
	// ErrShutdown: the server (or the worker) stops. A turn of this
	// machine ends ERROR, retryable; one that goes on on a worker is
	// followed again after the restart.
	ErrShutdown = errors.New("the server stopped while the run was in progress")
	// ErrInterrupted: an interrupt. The turn ends BLOCKED, not CANCELLED,
	// and a follow-up continues the run.
	ErrInterrupted = errors.New("interrupted")
)

// StopError is a cause that ends a turn FAILED with a code of its own:
// the run's budget ran out.
type StopError struct {
	Code, Message string
}

func (e *StopError) Error() string { return e.Message }

// errShutdown and errInterrupted are the causes under their old names.
var errShutdown, errInterrupted = ErrShutdown, ErrInterrupted

// Describe says what an environment's executor runs, as a turn names it:
// its kind (ExecutorExec or ExecutorACP), its command, and an ACP agent's
// permissions policy. ok is false for an executor of another kind (a
// test's).
func Describe(ex Executor) (kind string, command []string, permissions string, ok bool) {
	switch e := ex.(type) {
	case *ExecExecutor:
		return ExecutorExec, e.Command, "", true
	case *ACPExecutor:
		return ExecutorACP, e.Command, e.Permissions, true
	}
	return "", nil, "", false
}

// ExecutorFor is the executor a turn names, with its command: what a worker
// runs it with.
func ExecutorFor(t *Turn) Executor {
	if t.Executor == ExecutorACP {
		return &ACPExecutor{Command: t.Command, Permissions: t.Permissions}
	}
	return &ExecExecutor{Command: t.Command}
}
