package factory

import (
	"encoding/json"
	"strings"
	"time"
)

// FactoryObject is a factory as the newest SDKs type it (Factory, GET
// /v1/factory/{uid}; docs/spec/platform-api.md, Additions), with this
// server's status beside it. Nullable fields are null when factory.yaml
// does not set them; a flat-layout factory (no factory.yaml) has the
// defaults of each.
type FactoryObject struct {
	UID string `json:"uid"`
	// Name is factory.yaml's name, else the server's key (Key).
	Name               string                  `json:"name"`
	Alias              *string                 `json:"alias"`
	AvatarURL          *string                 `json:"avatar_url"`
	Description        *string                 `json:"description"`
	TeamUID            string                  `json:"team_uid"`
	CodeForge          string                  `json:"code_forge"`
	CodeForges         []string                `json:"code_forges"`
	Repositories       []FactoryRepository     `json:"repositories"`
	Integrations       []map[string]any        `json:"integrations"`
	AgentDefaults      FactoryAgentDefaults    `json:"agent_defaults"`
	ScorerDefaults     map[string]any          `json:"scorer_defaults"`
	Scoring            FactoryScoring          `json:"scoring"`
	SelfImprovement    *FactorySelfImprovement `json:"self_improvement,omitempty"`
	CredentialStrategy string                  `json:"credential_strategy"`
	DefaultEnvironment *string                 `json:"default_environment"`
	DefaultModel       *string                 `json:"default_model"`
	CreatedAt          time.Time               `json:"created_at"`
	UpdatedAt          time.Time               `json:"updated_at"`

	// This server's: the key the server config names the factory by, the
	// foreman's UID, and the sync status.
	Key        string     `json:"key"`
	ForemanUID string     `json:"foreman_uid"`
	Source     string     `json:"source"`
	Revision   string     `json:"revision"`
	SyncedAt   *time.Time `json:"synced_at"`
	Ready      bool       `json:"ready"`
}

// FactoryRepository is a repository as the API shows it: repo is
// factory.yaml's name (kept as name too, for older clients).
type FactoryRepository struct {
	Owner            string            `json:"owner"`
	Repo             string            `json:"repo"`
	Name             string            `json:"name"`
	CodeForge        string            `json:"code_forge"`
	ProviderMetadata map[string]string `json:"provider_metadata,omitempty"`
}

// FactoryAgentDefaults is agentDefaults as the API shows it, with the
// factory-wide secrets and MCP servers folded in (they apply to every
// agent).
type FactoryAgentDefaults struct {
	DefaultRunnerUID   string                    `json:"default_runner_uid"`
	MCPServers         map[string]map[string]any `json:"mcp_servers"`
	Secrets            []SecretRef               `json:"secrets"`
	WorkerHost         string                    `json:"worker_host"`
	Harness            *HarnessObject            `json:"harness,omitempty"`
	HarnessAuthSecrets map[string]string         `json:"harness_auth_secrets,omitempty"`
}

// SecretRef names a managed secret, as the API does.
type SecretRef struct {
	Name string `json:"name"`
}

// HarnessObject is a harness as the API types it.
type HarnessObject struct {
	Type           string `json:"type"`
	ModelID        string `json:"model_id,omitempty"`
	ReasoningLevel string `json:"reasoning_level,omitempty"`
}

// FactoryScoring is the model managed scorers use by default.
type FactoryScoring struct {
	DefaultModel *string `json:"default_model"`
}

// FactorySelfImprovement is selfImprovement as the API shows it.
type FactorySelfImprovement struct {
	ReviewerType       string   `json:"reviewer_type"`
	FailedRunThreshold int      `json:"failed_run_threshold,omitempty"`
	ReviewerEmails     []string `json:"reviewer_emails,omitempty"`
}

// ObjectContext is what a factory's API object needs beyond its record:
// the team it belongs to (one per server) and its runners' UIDs by name.
type ObjectContext struct {
	TeamUID    string
	RunnerUIDs map[string]string
}

// TeamPrefix is the prefix of the one team a server has.
const TeamPrefix = "tm_"

// Object is the factory as the newest SDKs read it.
func (f *Factory) Object(ctx ObjectContext) FactoryObject {
	st := &f.Settings
	o := FactoryObject{UID: f.UID, Name: f.Name, TeamUID: ctx.TeamUID, CreatedAt: f.CreatedAt, UpdatedAt: f.AppliedAt,
		Key: f.Name, ForemanUID: f.ForemanUID, Source: f.Source, Revision: f.Revision, Ready: f.Ready,
		CredentialStrategy: "EXECUTOR", ScorerDefaults: map[string]any{}}
	if st.Name != "" {
		o.Name = st.Name
	}
	if o.UpdatedAt.IsZero() {
		o.UpdatedAt = f.CreatedAt
	}
	if !f.SyncedAt.IsZero() {
		t := f.SyncedAt
		o.SyncedAt = &t
	}
	o.Alias, o.Description = optional(st.Alias), optional(st.Description)
	if st.CredentialStrategy != "" {
		o.CredentialStrategy = st.CredentialStrategy
	}
	o.CodeForge, o.CodeForges = st.forges()
	o.Repositories = st.repositoryObjects(o.CodeForge)
	o.Integrations = st.integrationObjects()
	o.AgentDefaults = st.AgentDefaultsObject(ctx.RunnerUIDs)
	if d := st.AgentDefaults; d != nil {
		o.DefaultEnvironment = optional(d.EnvironmentID)
		if h := d.EffectiveHarness(); h != nil {
			o.DefaultModel = optional(h.Model)
		}
	}
	if sd := st.ScorerDefaults; sd != nil {
		o.ScorerDefaults = sd.object(ctx.RunnerUIDs)
		o.Scoring.DefaultModel = optional(sd.Model)
	}
	if si := st.SelfImprovement; si != nil {
		o.SelfImprovement = &FactorySelfImprovement{ReviewerType: si.ReviewerType, FailedRunThreshold: si.FailedRunThreshold,
			ReviewerEmails: si.ReviewerEmails}
	}
	return o
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// forges is the factory's primary code forge and its list: codeForges as
// declared; else GITHUB for a factory with repositories (v1alpha1's
// repositories are GitHub's unless it says otherwise) and NONE without.
func (s *Settings) forges() (string, []string) {
	if len(s.CodeForges) > 0 {
		return s.CodeForges[0], s.CodeForges
	}
	if len(s.Repositories) > 0 {
		return ForgeGitHub, []string{ForgeGitHub}
	}
	return ForgeNone, []string{ForgeNone}
}

// repositoryObjects shows each repository with its forge: the factory's
// primary one. An Azure DevOps repository's owner is
// <organization>/<project>, which provider_metadata spells out.
func (s *Settings) repositoryObjects(forge string) []FactoryRepository {
	out := []FactoryRepository{}
	if forge == ForgeNone {
		forge = ForgeGitHub
	}
	for _, r := range s.Repositories {
		fr := FactoryRepository{Owner: r.Owner, Repo: r.Name, Name: r.Name, CodeForge: forge}
		if forge == ForgeAzureDevOps {
			org, project, _ := strings.Cut(r.Owner, "/")
			fr.ProviderMetadata = map[string]string{"organization": org, "project": project, "repository": r.Name}
		}
		out = append(out, fr)
	}
	return out
}

// integrationObjects shows integrations as the API does ({type, <type>:
// settings} in snake case); nil when factory.yaml declares none.
func (s *Settings) integrationObjects() []map[string]any {
	list := s.IntegrationList()
	if list == nil {
		return nil
	}
	out := []map[string]any{}
	for _, in := range list {
		o := map[string]any{"type": in.Type}
		switch {
		case in.Slack != nil:
			o["slack"] = map[string]any{"auto_respond_to_thread_replies": in.Slack.AutoRespondToThreadReplies}
		case in.Teams != nil:
			o["microsoft-teams"] = map[string]any{"auto_respond_to_thread_replies": in.Teams.AutoRespondToThreadReplies}
		case in.Linear != nil:
			o["linear"] = map[string]any{"team_ids": nonNil(in.Linear.TeamIDs)}
		case in.Jira != nil:
			o["jira"] = map[string]any{"project_keys": nonNil(in.Jira.ProjectKeys)}
		}
		out = append(out, o)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// AgentDefaultsObject is agentDefaults as the API shows it: the runner by
// its UID, secrets and MCP servers with the factory-wide ones first.
func (s *Settings) AgentDefaultsObject(runnerUIDs map[string]string) FactoryAgentDefaults {
	o := FactoryAgentDefaults{MCPServers: mcpObjects(s.MCPServers), Secrets: secretRefs(s.Secrets)}
	d := s.AgentDefaults
	if d == nil {
		return o
	}
	o.DefaultRunnerUID, o.WorkerHost = runnerUIDs[d.Runner], d.WorkerHost
	for name, srv := range mcpObjects(mustJSON(d.MCPServers)) {
		o.MCPServers[name] = srv
	}
	for _, r := range secretRefs(d.Secrets) {
		if !containsRef(o.Secrets, r.Name) {
			o.Secrets = append(o.Secrets, r)
		}
	}
	if h := d.EffectiveHarness(); h != nil {
		o.Harness = &HarnessObject{Type: h.Type, ModelID: h.Model, ReasoningLevel: h.ReasoningLevel}
		if h.Auth != nil && h.Auth.Source == "managedSecret" && (h.Type == HarnessClaude || h.Type == HarnessCodex) {
			o.HarnessAuthSecrets = map[string]string{h.Type + "_auth_secret_name": h.Auth.SecretName}
		}
	}
	return o
}

// object is scorerDefaults as the API shows it: only the keys set (an
// omitted one inherits agentDefaults'), and the share of runs scored
// beside them.
func (sd *ScorerDefaults) object(runnerUIDs map[string]string) map[string]any {
	o := map[string]any{}
	if sd.Runner != "" {
		o["default_runner_uid"] = runnerUIDs[sd.Runner]
	}
	if sd.Secrets != nil {
		o["secrets"] = secretRefs(sd.Secrets)
	}
	if sd.MCPServers != nil {
		o["mcp_servers"] = mcpObjects(sd.MCPServers)
	}
	if sd.SampleRate != nil {
		o["sample_rate"] = *sd.SampleRate
	}
	return o
}

func secretRefs(names []string) []SecretRef {
	out := []SecretRef{}
	for _, n := range names {
		out = append(out, SecretRef{Name: n})
	}
	return out
}

func containsRef(refs []SecretRef, name string) bool {
	for _, r := range refs {
		if r.Name == name {
			return true
		}
	}
	return false
}

func mustJSON(m map[string]json.RawMessage) json.RawMessage {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	return b
}

// mcpObjects shows MCP servers as the API's McpServerConfig: {warp_id},
// {command, args, env} or {url, headers}.
func mcpObjects(raw json.RawMessage) map[string]map[string]any {
	out := map[string]map[string]any{}
	var in map[string]map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &in) != nil {
		return out
	}
	for n, fields := range in {
		srv := map[string]any{}
		for k, v := range fields {
			if k == "warpId" {
				k = "warp_id"
			}
			srv[k] = v
		}
		out[n] = srv
	}
	return out
}
