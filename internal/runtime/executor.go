// Package runtime executes runs: an agent process working on a prompt in a
// workspace. This file holds what every executor shares; the run store,
// queue and Agents API build on it.
package runtime

import (
	"context"
	"encoding/json"
	"syscall"
	"time"

	"factory"
)

// Turn is one turn of a run: the first prompt, or a follow-up that
// continues a finished run.
type Turn struct {
	RunID          string
	Workspace      string // the run's directory; the agent's working directory
	Prompt         string
	PromptFile     string // PROMPT.md in the workspace
	AttachmentsDir string
	// OutputDir is where the agent leaves what it produced
	// ($FACTORY_OUTPUT_DIR): collected as the run's artifacts after each
	// turn.
	OutputDir string
	FollowUp  string // the follow-up message of a continued run, else ""
	Env       []string
	// IdleTimeout ends the turn FAILED after this long without output;
	// Timeout after this long in all. Zero means no limit.
	IdleTimeout time.Duration
	Timeout     time.Duration
	// Started, when set, is told the agent's process group as soon as it
	// has started (the manager records it durably).
	Started func(pid int)
	// RunAs, when set, is the user the agent process runs as.
	RunAs *syscall.Credential
	// MCPServers are offered to an ACP agent's session, by name.
	MCPServers map[string]json.RawMessage
	// WorkerHost, when the run names one, is the worker it must run on
	// (an executor that runs turns on workers routes by it).
	WorkerHost string
	// Setup, for an executor whose turns run elsewhere (a Resumer), is
	// the run's setup: its skills' files and, when SetupNow (the run's
	// first turn), its runner's setup commands run there, where the
	// workspace is; its image and shape size a container there.
	Setup    *factory.RunSetup
	SetupNow bool
	// Attempt names the turn when it runs elsewhere (a Resumer's): the
	// run records it before the turn is handed over.
	Attempt string
}

// Event is something the agent reported during a turn: a status message;
// or, from an executor whose turns run on workers, a step of the turn
// (Phase): a worker claimed it, its agent started.
type Event struct {
	Time    time.Time
	Message string
	Phase   string
	Worker  string // the worker, for PhaseClaimed
}

// Phases of a turn that runs on a worker: the run is CLAIMED once one took
// it, INPROGRESS once its agent runs.
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
}

// Error codes of runs (docs/spec/platform-api.md, Errors).
const (
	CodeInternal              = "internal_error"
	CodeAgentProcessFailed    = "agent_process_failed"
	CodeInfrastructureTimeout = "infrastructure_timeout"
)

// Resumer is an executor whose turns can outlive the server (they run on
// workers): after a restart, Resume follows a turn that was in progress,
// and returns how it ended; ok false means it cannot (the run then ends
// ERROR, retryable, as any run the server's end interrupted).
//
// Such an executor returns a Result with an empty State when the server
// stops (ctx's cause ErrShutdown) while the turn goes on elsewhere: the run
// is then left in progress, for Resume.
type Resumer interface {
	Resume(ctx context.Context, r *factory.Run, t Turn, events func(Event)) (res Result, ok bool)
}

// Executor runs turns. Run blocks until the turn ends; cancelling ctx
// cancels the turn (the result is then CANCELLED). events is called from
// one goroutine at a time, in order.
type Executor interface {
	Run(ctx context.Context, t Turn, events func(Event)) Result
}
