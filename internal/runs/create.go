package runs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"factory"
	"factory/internal/runtime"
	"factory/internal/store"
	"factory/internal/tracing"
)

// CreateRequest is a run to create.
type CreateRequest struct {
	// ID, when set, makes Create idempotent: a run with this ID that
	// exists already is returned as it is (automation runs derive their
	// ID from the delivery and the automation).
	ID string
	// ErrorOnUnknownEnvironment records a run whose environment does not
	// exist as ERROR, naming it, instead of refusing it (automation runs:
	// there is no caller to refuse).
	ErrorOnUnknownEnvironment            bool
	Prompt, Title, Environment, Source   string
	Config                               json.RawMessage
	Metadata                             map[string]string
	Creator                              *factory.Creator
	FactoryUID, AutomationID, DeliveryID string
	Attachments                          []AttachmentData
	IdleTimeout                          time.Duration
	// Skill, the parent's chain (ParentRunID first, the root last), the
	// conversation, the schedule and the trigger's URL, as the run shows
	// them.
	Skill, ConversationID, TriggerURL string
	Ancestors                         []string
	Schedule                          *factory.RunSchedule
	ScheduledAt                       *time.Time
	// Setup prepares the workspace of a factory agent's run; SetupFiles
	// are the bytes of its Files, by path in the workspace.
	Setup      *factory.RunSetup
	SetupFiles map[string][]byte
	// FailWith, when set, records the run as FAILED at once with this
	// status (an agent whose harness no environment runs).
	FailWith *factory.StatusMessage
	// Repositories are the repositories the run works on; nil for a run
	// of a factory: every repository it lists (factory.CheckoutsFor).
	// Origin is the issue or pull request it came from.
	Repositories []factory.RepoCheckout
	Origin       *factory.Origin
	// CreatorSecrets name the creator's own code host tokens
	// (factory.Run.CreatorSecrets).
	CreatorSecrets map[string]string
	// Webhook is the run's own run-status webhook (its secret sealed).
	Webhook *factory.RunWebhook
	// Traceparent, when set, is the span the run's creation span is a
	// child of (a delivery's evaluation), as a W3C traceparent.
	Traceparent string
}

// AttachmentData is an attachment's name, type and content.
type AttachmentData struct {
	Name, MimeType string
	Data           []byte
}

// ErrAttachmentName is the error of an attachment name a workspace cannot
// hold as given.
var ErrAttachmentName = runtime.ErrAttachmentName

// CheckAttachmentName accepts a name that the workspace holds as given
// (runtime.CheckAttachmentName).
func CheckAttachmentName(name string) error { return runtime.CheckAttachmentName(name) }

// Create stores a new run, QUEUED, with its attachments, in one synced
// batch, and queues it. Its workspace is laid out when its turn starts,
// where it runs.
func (m *Manager) Create(req CreateRequest) (*factory.Run, error) {
	runs, err := m.CreateMany([]CreateRequest{req}, nil)
	if err != nil {
		return nil, err
	}
	return runs[0], nil
}

// CreateMany creates several runs in one synced batch, with extra writes
// of the caller's (an evaluated delivery's record and its removal from the
// queue): all of them are durable together, or none is.
func (m *Manager) CreateMany(reqs []CreateRequest, extra func(*store.Batch)) ([]*factory.Run, error) {
	b := m.cfg.Store.NewLogBatch()
	runs := make([]*factory.Run, 0, len(reqs))
	var queue, made []*factory.Run
	spans := make([]tracing.Span, 0, len(reqs))
	defer func() {
		for _, s := range spans {
			s.End()
		}
	}()
	for _, req := range reqs {
		span := m.startCreate(req)
		spans = append(spans, span)
		r, fresh, err := m.prepare(b, req, span)
		if err != nil {
			span.Fail(err)
			b.Abort()
			return nil, err
		}
		runs = append(runs, r)
		if fresh {
			made = append(made, r)
		}
		if fresh && r.State == factory.StateQueued {
			queue = append(queue, r)
		}
	}
	if extra != nil {
		extra(b)
	}
	if err := b.Commit(); err != nil {
		for _, s := range spans {
			s.Fail(err)
		}
		return nil, err
	}
	for _, r := range made {
		m.logRun(r, "run created")
		m.changed(r)
	}
	for _, r := range queue {
		m.enqueue(r)
	}
	return runs, nil
}

// prepare adds a new run's writes to a batch; an existing run with the
// request's ID is returned as it is (fresh is false). A run is accepted
// (PENDING) and queued at once, or refused before it is queued (FAILED,
// ERROR), through the table of states as every later step.
func (m *Manager) prepare(b *store.Batch, req CreateRequest, span tracing.Span) (r *factory.Run, fresh bool, err error) {
	if req.ID != "" {
		if r, err := m.cfg.Store.Run(req.ID); err == nil {
			span.Set(tracing.String("factory.run.id", r.ID), tracing.String("factory.run.existing", "true"))
			return r, false, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, false, err
		}
	}
	env := req.Environment
	if env == "" {
		env = m.cfg.DefaultEnvironment
	}
	_, known := m.cfg.Environments[env]
	if !known && !req.ErrorOnUnknownEnvironment {
		return nil, false, fmt.Errorf("%w %q", ErrUnknownEnvironment, env)
	}
	now := time.Now().UTC()
	id := req.ID
	if id == "" {
		id = factory.NewUID(factory.PrefixRun)
	}
	r = &factory.Run{ID: id, Title: req.Title, Prompt: req.Prompt, State: factory.StatePending, CreatedAt: now, UpdatedAt: now,
		Config: req.Config, Environment: env, Source: req.Source, Metadata: req.Metadata,
		FactoryUID: req.FactoryUID, AutomationID: req.AutomationID, DeliveryID: req.DeliveryID, Creator: req.Creator,
		Skill: req.Skill, ConversationID: req.ConversationID, TriggerURL: req.TriggerURL, Ancestors: req.Ancestors,
		Schedule: req.Schedule, ScheduledAt: req.ScheduledAt, Setup: req.Setup, Repositories: req.Repositories, Origin: req.Origin,
		CreatorSecrets: req.CreatorSecrets, Webhook: req.Webhook, TraceID: span.TraceID(), Traceparent: span.Traceparent()}
	span.Set(tracing.String("factory.run.id", id))
	if r.Repositories == nil && r.FactoryUID != "" {
		if r.Repositories, err = m.listedRepositories(r.FactoryUID); err != nil {
			return nil, false, err
		}
	}
	if err := putSetupFiles(b, id, req.Setup, req.SetupFiles); err != nil {
		return nil, false, err
	}
	if len(r.Ancestors) > 0 {
		r.ParentRunID = r.Ancestors[0]
	}
	if r.Title == "" {
		r.Title = TitleOf(req.Prompt)
	}
	if err := putAttachments(b, r, req.Attachments); err != nil {
		return nil, false, err
	}
	end := func(state factory.RunState, status *factory.StatusMessage) error {
		if err := r.MoveTo(state); err != nil {
			return err
		}
		r.StatusMessage, r.FinishedAt = status, &now
		b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "finished", State: state, Message: status.Message})
		return nil
	}
	b.AddRunEvent(r, factory.RunEvent{Time: now, Kind: "created", State: factory.StateQueued})
	switch {
	case req.FailWith != nil:
		err = end(factory.StateFailed, req.FailWith)
	case !known:
		msg := fmt.Sprintf("environment %q does not exist: the server's configuration defines none by that name", env)
		err = end(factory.StateError, &factory.StatusMessage{Message: msg, ErrorCode: "unknown_environment"})
	default:
		err = r.MoveTo(factory.StateQueued)
	}
	if err != nil {
		return nil, false, err
	}
	r.ForgetSteps()
	b.PutRun(r, nil)
	if o := r.Origin; o != nil && o.WorkItem != "" && r.FactoryUID != "" {
		if _, err := m.cfg.Store.WorkItem(r.FactoryUID, o.WorkItem); errors.Is(err, store.ErrNotFound) {
			b.PutWorkItem(r.FactoryUID, o.WorkItem, r.ID) // the work item's root run
		}
	}
	if k := r.Origin.OnceKey(); k != "" {
		b.MarkFollowUp(r.ID, k) // the message that started it is not its follow-up too
	}
	return r, true, nil
}

// startCreate starts a run's creation span, the child of the request's
// Traceparent (a delivery's evaluation) or a trace's root.
func (m *Manager) startCreate(req CreateRequest) tracing.Span {
	if m.cfg.Tracer == nil {
		return tracing.Span{}
	}
	_, span := m.cfg.Tracer.StartFrom(req.Traceparent, "run.create", tracing.String("factory.run.source", req.Source))
	if req.AutomationID != "" {
		span.Set(tracing.String("factory.automation.id", req.AutomationID), tracing.String("factory.delivery.id", req.DeliveryID))
	}
	if req.FactoryUID != "" {
		span.Set(tracing.String("factory.uid", req.FactoryUID))
	}
	return span
}

// putAttachments stores a new run's attachments with it.
func putAttachments(b *store.Batch, r *factory.Run, atts []AttachmentData) error {
	seen := map[string]bool{}
	for _, a := range atts {
		name := a.Name
		if err := CheckAttachmentName(name); err != nil {
			return err
		}
		if seen[name] {
			return fmt.Errorf("%w: %q is given twice", ErrAttachmentName, name)
		}
		seen[name] = true
		b.PutRunAttachment(r.ID, name, a.Data)
		r.Attachments = append(r.Attachments, factory.Attachment{Name: name, MimeType: a.MimeType, Size: int64(len(a.Data))})
	}
	return nil
}

// setupFilePrefix keeps a run's setup files apart from its attachments in
// the store: an attachment's name holds no '/'.
const setupFilePrefix = "setup/"

// putSetupFiles stores the setup's files with the run, refusing a path that
// would leave the skills folder.
func putSetupFiles(b *store.Batch, id string, s *factory.RunSetup, files map[string][]byte) error {
	if s == nil {
		return nil
	}
	for _, p := range s.Files {
		if err := runtime.CheckSkillPath(p); err != nil {
			return err
		}
		b.PutRunAttachment(id, setupFilePrefix+p, files[p])
	}
	return nil
}

// TitleOf is the title of a run given none: its prompt's first line,
// without Markdown heading marks, at most 80 bytes.
func TitleOf(prompt string) string {
	line := strings.TrimSpace(prompt)
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimLeft(line, "# ")
	if len(line) > 80 {
		line = line[:77] + "..."
	}
	if line == "" {
		return "Untitled run"
	}
	return line
}

// listedRepositories are the repositories a factory lists, for a run of it
// that no event of a repository started.
func (m *Manager) listedRepositories(factoryUID string) ([]factory.RepoCheckout, error) {
	fs, err := m.cfg.Store.Factories()
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.UID == factoryUID {
			return factory.CheckoutsFor(&f.Settings, nil), nil
		}
	}
	return nil, nil
}
