// Package worker is a worker (docs/workers.md): it claims the turns the
// control plane offers on NATS JetStream, runs them on this machine (a
// process group, or a container), and reports them back. This file is the
// wire both sides speak; the control plane's side is package workers.
// Nothing here reaches the control plane's store: a worker holds only the
// turns it is given.
package worker

import (
	"fmt"
	"strings"
	"time"

	"factory/internal/runtime"
)

// Subjects and streams. Turns are offered on factory.runs.any (any worker)
// and factory.runs.host.<id> (the worker of that --id: a workerHost, or the
// worker that holds a run's workspace). A worker claims a turn with a
// request on factory.claims.<id>, reports it on factory.events.<id>, and
// hears cancel and interrupt on factory.control.<id> (plain NATS).
const (
	RunsStream   = "FACTORY_RUNS"
	EventsStream = "FACTORY_EVENTS"
	AnySubject   = "factory.runs.any"
	AnyConsumer  = "any"
	// ClaimsSubjects are every worker's claims, as the control plane
	// hears them.
	ClaimsSubjects = "factory.claims.*"
	// ApprovalsSubjects are every worker's approvals (a tool call put to
	// a person), as the control plane hears them.
	ApprovalsSubjects = "factory.approvals.*"
)

// HostSubject is where the turns for one worker are offered.
func HostSubject(id string) string { return "factory.runs.host." + id }

// HostConsumer is the durable consumer of one worker's own turns.
func HostConsumer(id string) string { return "host-" + id }

// EventsSubject is where a worker reports its turns.
func EventsSubject(id string) string { return "factory.events." + id }

// ControlSubject is where a worker hears cancel, interrupt and ping.
func ControlSubject(id string) string { return "factory.control." + id }

// ClaimSubject is where a worker claims the turns it took.
func ClaimSubject(id string) string { return "factory.claims." + id }

// ApprovalSubject is where a worker asks a person, through the control
// plane, about a tool call of a turn it runs (permissions ask).
func ApprovalSubject(id string) string { return "factory.approvals." + id }

// InboxPrefix is a NATS user's own inbox: replies to it come there only.
func InboxPrefix(id string) string { return "_INBOX_" + id }

// OutputsBucket is the object store a worker puts its turns' output files
// in (one per worker: it may write to its own only); the control plane
// takes them out when it applies the turn's end.
func OutputsBucket(id string) string { return "FACTORY_OUTPUTS_" + id }

// ControlUser is the control plane's own NATS user.
const ControlUser = "factory-control-plane"

// LocalWorker is the name of the in-process worker of earlier versions:
// the runs recorded with it are the control plane's own (their workspaces
// are there, and their follow-ups run there), so no worker may take it, in
// any case.
const LocalWorker = "local"

// ValidID says whether a worker's name can be used: it is part of
// subjects, and names none of the control plane's own.
func ValidID(id string) bool { return IDProblem(id) == "" }

// IDProblem says why a worker's name cannot be used, or "" when it can.
func IDProblem(id string) string {
	switch {
	case strings.EqualFold(id, LocalWorker):
		return fmt.Sprintf("worker name %q is reserved: runs recorded with it are the control plane's own (its in-process worker of earlier versions); choose another", id)
	case id == ControlUser:
		return fmt.Sprintf("worker name %q is reserved: it is the control plane's own NATS user; choose another", id)
	case id == "" || len(id) > 64:
		return fmt.Sprintf("worker name %q: 1 to 64 of a-z A-Z 0-9 - _", id)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Sprintf("worker name %q: 1 to 64 of a-z A-Z 0-9 - _", id)
		}
	}
	return ""
}

// Assignment is a turn as a worker gets it: the turn itself (only the
// agent's environment travels: the control plane's own never does), and
// the lease the worker renews while it runs it.
type Assignment struct {
	runtime.Turn
	Lease time.Duration `json:"lease"`
}

// SelfCommand stands for the factory binary in a turn's command (the
// built-in demo agent is factory demo-agent): each worker runs its own.
const SelfCommand = "@factory"

// ClaimRequest asks the control plane for a turn a worker took from the
// queue; the worker runs it only when the answer is OK. The control plane
// records the claim (the run is CLAIMED) before it answers.
type ClaimRequest struct {
	RunID   string `json:"run_id"`
	Attempt string `json:"attempt"`
}

// ClaimAnswer is the control plane's answer to a claim: OK, or why not
// (the run was cancelled, another worker has the turn, the turn was
// offered again).
type ClaimAnswer struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
	// Retry says the control plane cannot answer yet (it is starting):
	// the turn stays in the queue for a moment later.
	Retry bool `json:"retry,omitempty"`
}

// ApprovalAsk asks the control plane for a person's answer to a tool call
// of a turn the worker runs. The control plane answers once it has it,
// or, after a while, that it still waits (Pending): the worker asks again,
// and the same request (its Key) finds the same inbox item, across a
// restart of the control plane too.
type ApprovalAsk struct {
	RunID   string                  `json:"run_id"`
	Attempt string                  `json:"attempt"`
	Request runtime.ApprovalRequest `json:"request"`
}

// ApprovalReply is the control plane's answer to an ApprovalAsk: the
// answer, or Pending (ask again), or why there will be none (the turn is
// over).
type ApprovalReply struct {
	Answer  *runtime.ApprovalAnswer `json:"answer,omitempty"`
	Pending bool                    `json:"pending,omitempty"`
	Error   string                  `json:"error,omitempty"`
}

// Event is what a worker reports of a turn it claimed: started (its agent
// runs), message, heartbeat (the lease renewed), done (with the result and
// the files the agent left in its output folder).
type Event struct {
	RunID   string            `json:"run_id"`
	Attempt string            `json:"attempt"`
	Worker  string            `json:"worker"`
	Kind    string            `json:"kind"`
	Time    time.Time         `json:"time"`
	Message string            `json:"message,omitempty"`
	Result  *runtime.Result   `json:"result,omitempty"`
	Outputs map[string][]byte `json:"outputs,omitempty"`
	// OutputObjects name the turn's output files in the worker's object
	// store (attempt/path), where Outputs would not hold them.
	OutputObjects []string `json:"output_objects,omitempty"`
}

// Control asks the worker running a turn to stop it.
type Control struct {
	RunID   string `json:"run_id"`
	Attempt string `json:"attempt"`
	Action  string `json:"action"` // cancel, interrupt, or ping (are you there?)
}

// Permissions are the subjects a NATS user may publish and subscribe to,
// everything else denied; a user may answer the requests it hears
// (AllowResponses: a worker answers the control plane's presence checks).
type Permissions struct {
	Publish        []string `json:"publish"`
	Subscribe      []string `json:"subscribe"`
	AllowResponses bool     `json:"allow_responses"`
}

// WorkerPermissions deny by default: a worker pulls from the shared queue
// and its own, acknowledges what it took, claims it, publishes its own
// events, and hears its own control subject; replies come to its own
// inbox. A NATS cluster of its own gives each worker's user these
// (docs/workers.md).
func WorkerPermissions(id string) Permissions {
	return Permissions{
		Publish: []string{
			"$JS.API.CONSUMER.MSG.NEXT." + RunsStream + "." + AnyConsumer,
			"$JS.API.CONSUMER.MSG.NEXT." + RunsStream + "." + HostConsumer(id),
			"$JS.API.CONSUMER.INFO." + RunsStream + "." + AnyConsumer,
			"$JS.API.CONSUMER.INFO." + RunsStream + "." + HostConsumer(id),
			"$JS.ACK." + RunsStream + "." + AnyConsumer + ".>",
			"$JS.ACK." + RunsStream + "." + HostConsumer(id) + ".>",
			EventsSubject(id),
			ClaimSubject(id),
			ApprovalSubject(id),
			// Its own object store: bind it, put files (chunks, then
			// the meta), read a name's meta, purge a failed put's chunks.
			"$JS.API.STREAM.INFO.OBJ_" + OutputsBucket(id),
			"$JS.API.STREAM.MSG.GET.OBJ_" + OutputsBucket(id),
			"$JS.API.DIRECT.GET.OBJ_" + OutputsBucket(id) + ".>",
			"$JS.API.STREAM.PURGE.OBJ_" + OutputsBucket(id),
			"$O." + OutputsBucket(id) + ".>",
		},
		Subscribe:      []string{InboxPrefix(id) + ".>", ControlSubject(id)},
		AllowResponses: true,
	}
}

// Credentials are one NATS user's: a worker's (from factory workers
// create) or the control plane's.
type Credentials struct {
	User     string `json:"user"`
	Password string `json:"password,omitempty"`
	// On a NATS cluster of its own (serve --nats) the cluster's operator
	// makes the users: a JWT credentials file or an nkey seed file, on
	// the machine that connects; or a user and password, the password
	// read from a file or the environment (never the command line).
	CredsFile string `json:"-"`
	NkeyFile  string `json:"-"`
	// PasswordUser is the cluster's user that Password is for, when it is
	// not User (the control plane's user on a cluster is the operator's
	// choice; User stays ControlUser).
	PasswordUser string `json:"-"`
	// NkeySeed is the worker's own nkey (factory workers create --nkey),
	// instead of a password: its seed signs the server's challenge.
	NkeySeed string `json:"nkey_seed,omitempty"`
}

// CredentialsFile is what factory workers create prints and factory
// worker --creds reads. On a NATS cluster of its own it has no password:
// the cluster's operator makes the worker's user, with Permissions.
type CredentialsFile struct {
	Credentials
	URL         string       `json:"nats_url"`
	Permissions *Permissions `json:"permissions,omitempty"`
}
