package factory

import (
	"encoding/json"
	"strings"
	"time"
)

// FactoryStatus is what `factory status` and GET /v1/factories/{uid} show
// of one factory (docs/spec/cli.md).
type FactoryStatus struct {
	Name              string     `json:"name"`
	UID               string     `json:"uid"`
	ForemanUID        string     `json:"foreman_uid"`
	Source            string     `json:"source"`
	Revision          string     `json:"revision"`
	AttemptedRevision string     `json:"attempted_revision,omitempty"`
	SyncedAt          *time.Time `json:"synced_at"`
	// CheckedAt is when a running server last read the source and found
	// it applied or refused; absent when the store is read directly.
	CheckedAt   *time.Time         `json:"checked_at,omitempty"`
	Ready       bool               `json:"ready"`
	Error       *string            `json:"error"`
	Webhooks    []WebhookStatus    `json:"webhooks"`
	Automations []AutomationStatus `json:"automations"`
	// The v1alpha1 resources, present when the factory has any.
	Agents          []ResourceStatus `json:"agents,omitempty"`
	Runners         []ResourceStatus `json:"runners,omitempty"`
	Skills          []ResourceStatus `json:"skills,omitempty"`
	Scorers         []ResourceStatus `json:"scorers,omitempty"`
	BenchmarkSuites []ResourceStatus `json:"benchmark_suites,omitempty"`
}

// ResourceStatus is one agent, runner, skill, scorer or benchmark suite in
// a status.
type ResourceStatus struct {
	Name        string `json:"name"`
	UID         string `json:"uid"`
	File        string `json:"file"`
	Description string `json:"description,omitempty"`
	// Of an agent: its type, and the harness and runner it resolves to
	// from the factory's agentDefaults.
	AgentType string   `json:"agent_type,omitempty"`
	Harness   *Harness `json:"harness,omitempty"`
	Runner    string   `json:"runner,omitempty"`
	// Of a runner: its image and how many setup commands it runs.
	DockerImage   string `json:"docker_image,omitempty"`
	SetupCommands int    `json:"setup_commands,omitempty"`
	// Executed is true for scorers and suites: this server runs them
	// (docs/measure.md); older servers said false.
	Executed *bool `json:"executed,omitempty"`
}

// ResourceStatuses fills a status's resource lists.
func (st *FactoryStatus) ResourceStatuses(f *Factory, res []*Resource) {
	for _, r := range res {
		var spec AgentSpec
		var runner RunnerSpec
		_ = json.Unmarshal(r.Spec, &spec)
		_ = json.Unmarshal(r.Spec, &runner)
		rs := ResourceStatus{Name: r.Key, UID: r.UID, File: r.File, Description: spec.Description}
		switch r.Kind {
		case ResourceAgent:
			rs.AgentType = spec.AgentType
			if rs.AgentType == "" {
				rs.AgentType = AgentCustom
			}
			ex := spec.ExecSettings
			if d := f.Settings.AgentDefaults; d != nil {
				ex = d.Resolve(ex)
			}
			rs.Harness, rs.Runner = ex.EffectiveHarness(), ex.Runner
			st.Agents = append(st.Agents, rs)
		case ResourceRunner:
			rs.DockerImage, rs.SetupCommands = runner.Platform.Linux.DockerImage, len(runner.SetupCommands)
			st.Runners = append(st.Runners, rs)
		case ResourceSkill:
			st.Skills = append(st.Skills, rs)
		case ResourceScorer, ResourceSuite:
			yes := true
			rs.Executed = &yes
			if r.Kind == ResourceScorer {
				st.Scorers = append(st.Scorers, rs)
			} else {
				st.BenchmarkSuites = append(st.BenchmarkSuites, rs)
			}
		}
	}
}

// FactorySummary is one factory in GET /v1/factories.
type FactorySummary struct {
	UID        string     `json:"uid"`
	Name       string     `json:"name"`
	ForemanUID string     `json:"foreman_uid"`
	Source     string     `json:"source"`
	Revision   string     `json:"revision"`
	SyncedAt   *time.Time `json:"synced_at"`
	Ready      bool       `json:"ready"`
}

// Summary is the factory's entry in a list of factories.
func Summary(f *Factory) FactorySummary {
	sm := FactorySummary{UID: f.UID, Name: f.Name, ForemanUID: f.ForemanUID, Source: f.Source, Revision: f.Revision, Ready: f.Ready}
	if !f.SyncedAt.IsZero() {
		t := f.SyncedAt
		sm.SyncedAt = &t
	}
	return sm
}

// WebhookStatus is one webhook in a status.
type WebhookStatus struct {
	Name            string     `json:"name"`
	DisplayName     string     `json:"display_name"`
	UID             string     `json:"uid"`
	AuthMode        string     `json:"auth_mode"`
	SignatureScheme *string    `json:"signature_scheme"`
	Enabled         bool       `json:"enabled"`
	Suspended       bool       `json:"suspended"`
	IngressURL      string     `json:"ingress_url"`
	SecretName      string     `json:"secret_name"`
	SecretSyncedAt  *time.Time `json:"secret_synced_at,omitempty"`
}

// AutomationStatus is one automation in a status.
type AutomationStatus struct {
	Name       string   `json:"name"`
	ID         string   `json:"id"`
	Title      string   `json:"title"`
	Enabled    bool     `json:"enabled"`
	WebhookIDs []string `json:"webhook_ids"`
	// Agent is the agent that runs it, when the factory has agents.
	Agent string `json:"agent,omitempty"`
	// Triggers are provider/event, with a schedule's cron.
	Triggers []string `json:"triggers,omitempty"`
	// Schedules are its schedule triggers: when each fires next, when it
	// last fired, and why its last attempt failed.
	Schedules []ScheduleStatus `json:"schedules,omitempty"`
}

// ScheduleStatus is one schedule in a status.
type ScheduleStatus struct {
	ScheduleID   string     `json:"schedule_id"`
	Name         string     `json:"name"`
	CronSchedule string     `json:"cron_schedule"`
	NextFire     *time.Time `json:"next_fire"`
	LastFire     *time.Time `json:"last_fire"`
	LastError    string     `json:"last_error,omitempty"`
}

// DefaultPublicURL is the webhook_base_url before a server has set one:
// the default listen address (docs/spec/cli.md).
const DefaultPublicURL = "http://127.0.0.1:8080"

// IngressURL is a webhook's URL for senders. A url_token URL carries a
// {token} placeholder: the real token is revealed once (docs/spec/ingress.md).
func IngressURL(base string, w *Webhook) string {
	u := strings.TrimRight(base, "/") + "/webhooks/w/" + w.UID
	if w.Spec.AuthMode == AuthURLToken {
		u += "/{token}"
	}
	return u
}

// BuildStatus assembles a status from records.
func BuildStatus(f *Factory, whs []*Webhook, aus []*Automation, publicURL string) *FactoryStatus {
	base := publicURL
	if f.Settings.WebhookBaseURL != "" {
		base = f.Settings.WebhookBaseURL
	}
	st := &FactoryStatus{Name: f.Name, UID: f.UID, ForemanUID: f.ForemanUID, Source: f.Source,
		Revision: f.Revision, Ready: f.Ready, Webhooks: []WebhookStatus{}, Automations: []AutomationStatus{}}
	if f.AttemptedRevision != f.Revision {
		st.AttemptedRevision = f.AttemptedRevision
	}
	if !f.SyncedAt.IsZero() {
		t := f.SyncedAt
		st.SyncedAt = &t
	}
	if f.Error != "" {
		e := f.Error
		st.Error = &e
	}
	for _, w := range whs {
		ws := WebhookStatus{Name: w.Key, DisplayName: w.Spec.Name, UID: w.UID, AuthMode: w.Spec.AuthMode,
			Enabled: w.Spec.Enabled, Suspended: w.Suspended, IngressURL: IngressURL(base, w), SecretName: w.SecretName}
		if w.Spec.SignatureScheme != "" {
			s := w.Spec.SignatureScheme
			ws.SignatureScheme = &s
		}
		if !w.SecretSyncedAt.IsZero() {
			t := w.SecretSyncedAt
			ws.SecretSyncedAt = &t
		}
		st.Webhooks = append(st.Webhooks, ws)
	}
	for _, a := range aus {
		as := AutomationStatus{Name: a.Key, ID: a.UID, Title: a.Spec.Title, Enabled: a.Spec.Enabled, WebhookIDs: []string{}, Agent: a.Spec.Agent}
		for _, t := range a.Spec.Triggers {
			as.WebhookIDs = append(as.WebhookIDs, t.Filter.WebhookIDs...)
			desc := t.Provider + "/" + t.Event
			if t.Schedule != nil {
				desc += " (" + t.Schedule.Cron + ")"
			}
			as.Triggers = append(as.Triggers, desc)
		}
		st.Automations = append(st.Automations, as)
	}
	return st
}
