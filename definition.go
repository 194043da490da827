package factory

import (
	"encoding/json"
	"strings"
	"time"
)

// Auth modes of a webhook (seed-spec §5).
const (
	AuthToken     = "token"
	AuthURLToken  = "url_token"
	AuthSignature = "signature"
)

// SchemeStandardWebhooks is the one signature scheme whose secret the
// service may generate (docs/spec/definitions.md). v1alpha1 names it
// standard_webhooks, which this project reads as the same scheme; a
// webhook keeps the spelling its file uses.
const SchemeStandardWebhooks = "standard-webhooks"

// WebhookSpec is what webhooks/<key>.yaml says, with defaults applied.
type WebhookSpec struct {
	Name             string `json:"name"`
	Description      string `json:"description,omitempty"`
	AuthMode         string `json:"authMode"`
	SignatureScheme  string `json:"signatureScheme,omitempty"`
	SecretName       string `json:"secretName,omitempty"`
	DeliveryIDHeader string `json:"deliveryIdHeader,omitempty"`
	Enabled          bool   `json:"enabled"`
	// EventSource (extension) names the provider whose events the webhook
	// carries; "" follows the signature scheme.
	EventSource string `json:"eventSource,omitempty"`
}

// GeneratesSecret reports whether the service generates this webhook's
// secret, which it does when no secretName is given (docs/spec/definitions.md).
func (w *WebhookSpec) GeneratesSecret() bool { return w.SecretName == "" }

// AutomationSpec is what automations/<key>.md says, with defaults applied.
type AutomationSpec struct {
	Title    string          `json:"title"`
	Enabled  bool            `json:"enabled"`
	Triggers []Trigger       `json:"triggers"`
	Config   json.RawMessage `json:"config,omitempty"` // AmbientAgentConfig, canonical JSON
	Prompt   string          `json:"prompt"`
	// Agent names the agent that runs it ("" is the foreman, or no agent
	// in a factory without agents); Exec overrides the agent's settings.
	Agent string        `json:"agent,omitempty"`
	Exec  *ExecSettings `json:"exec,omitempty"`
	// NoWriteBack and Fresh are writeBack: false and continueWorkItem:
	// false: its runs do not report back to where they came from; a later
	// event on the same issue or pull request starts another run.
	NoWriteBack bool `json:"no_write_back,omitempty"`
	Fresh       bool `json:"fresh,omitempty"`
}

// Trigger providers (docs/spec/triggers.md). Webhook triggers fire
// today; the others validate, and fire as their sources are built.
const (
	ProviderWebhook  = "webhook"
	ProviderSchedule = "schedule"
	ProviderGitHub   = "github"
	ProviderGitLab   = "gitlab"
	ProviderLinear   = "linear"
	ProviderSlack    = "slack"
	ProviderJira     = "jira"
	ProviderFactory  = "factory"
	// ProviderTeams is Microsoft Teams (docs/spec/talkback.md);
	// ProviderAzureDevOps is Azure DevOps Services' service hooks.
	ProviderTeams       = "teams"
	ProviderAzureDevOps = "azure_devops"
)

// Trigger starts a run when an event of its provider matches it: for the
// webhook provider, a delivery of a selected webhook whose payload matches
// the payload filter.
type Trigger struct {
	Provider string           `json:"provider"`
	Event    string           `json:"event"`
	Filter   TriggerFilter    `json:"filter"`
	Schedule *TriggerSchedule `json:"schedule,omitempty"`
}

// TriggerFilter selects webhooks by UID, events by the provider's filter
// keys, and deliveries by payload.
type TriggerFilter struct {
	WebhookIDs []string            `json:"webhook_ids"`
	Keys       map[string]ValueSet `json:"keys,omitempty"`
	Payload    json.RawMessage     `json:"payload,omitempty"` // canonical JSON
}

// ValueSet is one filter key's values: a list (any of) is In.
type ValueSet struct {
	In    []string `json:"in,omitempty"`
	NotIn []string `json:"not_in,omitempty"`
}

// TriggerSchedule is a schedule trigger's cron, in UTC.
type TriggerSchedule struct {
	Name string `json:"name,omitempty"`
	Cron string `json:"cron"`
}

// Settings is what factory.yaml says: optional in the flat layout, where
// only description and webhookBaseUrl are used; the v1alpha1 format's
// keys otherwise (docs/spec/v1alpha1.md). Keys whose meaning this server
// only keeps and shows are canonical JSON.
type Settings struct {
	SchemaVersion      string           `json:"schemaVersion,omitempty"`
	Name               string           `json:"name,omitempty"`
	Description        string           `json:"description,omitempty"`
	Alias              string           `json:"alias,omitempty"`
	CredentialStrategy string           `json:"credentialStrategy,omitempty"`
	Repositories       []Repository     `json:"repositories,omitempty"`
	Secrets            []string         `json:"secrets,omitempty"`
	MCPServers         json.RawMessage  `json:"mcpServers,omitempty"`
	CloudProviders     json.RawMessage  `json:"cloudProviders,omitempty"`
	Integrations       json.RawMessage  `json:"integrations,omitempty"`
	CodeForges         []string         `json:"codeForges,omitempty"`
	AgentDefaults      *ExecSettings    `json:"agentDefaults,omitempty"`
	ScorerDefaults     *ScorerDefaults  `json:"scorerDefaults,omitempty"`
	SelfImprovement    *SelfImprovement `json:"selfImprovement,omitempty"`
	WebhookBaseURL     string           `json:"webhookBaseUrl,omitempty"`
	// SpecApproval (extension; docs/spec/foreman.md): "required" (the
	// default) keeps a task from IMPLEMENT until a person approved its
	// spec; "none" does not.
	SpecApproval string `json:"specApproval,omitempty"`
	// Orchestration (extension) bounds how deep agents dispatch agents.
	Orchestration *Orchestration `json:"orchestration,omitempty"`
	// Notifications (extension; docs/spec/talkback.md) send the run-status
	// events of the factory's runs to webhooks.
	Notifications []NotificationRoute `json:"notifications,omitempty"`
}

// Repository is a repository a factory works on: owner/name (a GitLab
// owner is the full namespace; an Azure DevOps owner is
// <organization>/<project>).
type Repository struct {
	Owner string `json:"owner"`
	Name  string `json:"name"`
}

// ScorerDefaults is factory.yaml's scorerDefaults: the judge model and the
// share of runs scored, and sparse execution settings for scorers (a key
// left out inherits agentDefaults'); the measure service's judge runs
// use them, and the API shows them.
type ScorerDefaults struct {
	Model      string          `json:"model,omitempty"`
	SampleRate *float64        `json:"sampleRate,omitempty"`
	Runner     string          `json:"runner,omitempty"`
	Secrets    []string        `json:"secrets,omitempty"`
	MCPServers json.RawMessage `json:"mcpServers,omitempty"`
}

// SelfImprovement is factory.yaml's selfImprovement: who reviews the pull
// requests of self-improvement runs (none, admins, team, or the custom
// reviewerEmails), and how many failing scored runs start one.
type SelfImprovement struct {
	ReviewerType       string   `json:"reviewerType"`
	FailedRunThreshold int      `json:"failedRunThreshold,omitempty"`
	ReviewerEmails     []string `json:"reviewerEmails,omitempty"`
}

// Code forges of factory.yaml's codeForges (the API's code_forge).
const (
	ForgeGitHub      = "GITHUB"
	ForgeGitLab      = "GITLAB"
	ForgeAzureDevOps = "AZURE_DEVOPS"
	ForgeNone        = "NONE"
)

// Integration is one entry of factory.yaml's integrations: its type and
// the settings under the key named for it.
type Integration struct {
	Type  string `json:"type"`
	Slack *struct {
		AutoRespondToThreadReplies *bool `json:"autoRespondToThreadReplies,omitempty"`
		Credentials
	} `json:"slack,omitempty"`
	Teams *struct {
		AutoRespondToThreadReplies *bool `json:"autoRespondToThreadReplies,omitempty"`
		Credentials
	} `json:"microsoft-teams,omitempty"`
	Linear *struct {
		TeamIDs []string `json:"teamIds,omitempty"`
		Credentials
	} `json:"linear,omitempty"`
	Jira *struct {
		ProjectKeys []string `json:"projectKeys,omitempty"`
		Credentials
	} `json:"jira,omitempty"`
}

// Credentials names the secrets of the entry's settings (extension;
// docs/spec/talkback.md).
func (in *Integration) Credentials() Credentials {
	switch {
	case in.Slack != nil:
		return in.Slack.Credentials
	case in.Teams != nil:
		return in.Teams.Credentials
	case in.Linear != nil:
		return in.Linear.Credentials
	case in.Jira != nil:
		return in.Jira.Credentials
	}
	return Credentials{}
}

// IntegrationList reads integrations (validated by the schema); nil when
// factory.yaml declares none.
func (s *Settings) IntegrationList() []Integration {
	if len(s.Integrations) == 0 {
		return nil
	}
	var out []Integration
	_ = json.Unmarshal(s.Integrations, &out)
	return out
}

// Orchestration is factory.yaml's orchestration (extension).
type Orchestration struct {
	MaxDepth int `json:"maxDepth,omitempty"`
}

// DefaultMaxDepth is how many levels of runs a foreman's dispatches may
// go below it, unless factory.yaml says otherwise.
const DefaultMaxDepth = 3

// MaxDepth is how deep dispatches may go in the factory.
func (s *Settings) MaxDepth() int {
	if s.Orchestration != nil && s.Orchestration.MaxDepth > 0 {
		return s.Orchestration.MaxDepth
	}
	return DefaultMaxDepth
}

// SpecApprovalRequired reports whether a task needs an approved spec
// before IMPLEMENT.
func (s *Settings) SpecApprovalRequired() bool { return s.SpecApproval != "none" }

// Factory is the sync status and identity of one factory, in the manner of
// a Flux source's status: what was last applied, what was last attempted,
// and why that failed.
type Factory struct {
	Name       string `json:"name"`
	UID        string `json:"uid"`
	ForemanUID string `json:"foreman_uid"`
	Source     string `json:"source"`

	// Revision is the last applied revision; the state in the store is it.
	Revision  string    `json:"revision"`
	AppliedAt time.Time `json:"applied_at"`
	// AttemptedRevision and SyncedAt describe the last sync, good or bad.
	AttemptedRevision string    `json:"attempted_revision"`
	SyncedAt          time.Time `json:"synced_at"`
	Ready             bool      `json:"ready"`
	Error             string    `json:"error,omitempty"`

	Settings  Settings  `json:"settings"`
	CreatedAt time.Time `json:"created_at"`
}

// Webhook is an applied webhook.
type Webhook struct {
	Factory string      `json:"factory"`
	Key     string      `json:"key"`
	UID     string      `json:"uid"`
	Spec    WebhookSpec `json:"spec"`
	// SecretName is the managed secret in force: the spec's secretName, or
	// the generated webhook-<factory>-<key>.
	SecretName string `json:"secret_name"`
	// SecretVersion is the secret's version picked up at the last sync
	// (docs/spec/definitions.md: rotation takes effect on the next sync).
	SecretVersion  int       `json:"secret_version"`
	SecretSyncedAt time.Time `json:"secret_synced_at"`
	Suspended      bool      `json:"suspended"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	// DeletedAt is set on the tombstone kept after the file is deleted, so
	// the UID keeps answering 404 and its delivery log stays readable.
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

// Active reports whether senders are answered at all: enabled in the file,
// not suspended, not deleted.
func (w *Webhook) Active() bool {
	return w.DeletedAt == nil && w.Spec.Enabled && !w.Suspended
}

// Automation is an applied automation.
type Automation struct {
	Factory   string         `json:"factory"`
	Key       string         `json:"key"`
	UID       string         `json:"uid"`
	File      string         `json:"file,omitempty"`
	Spec      AutomationSpec `json:"spec"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

// Secret is a managed secret's metadata. Its value is sealed and stored
// apart, one record per version.
type Secret struct {
	Name      string    `json:"name"`
	Version   int       `json:"version"`
	URLSafe   bool      `json:"url_safe"`
	Generated bool      `json:"generated"`
	Format    string    `json:"format,omitempty"` // of a generated secret: token or standard-webhooks
	Revealed  bool      `json:"revealed"`
	CreatedAt time.Time `json:"created_at"`
	RotatedAt time.Time `json:"rotated_at"`
}

// WebhookRef locates a webhook by UID.
type WebhookRef struct {
	Factory string `json:"factory"`
	Key     string `json:"key"`
	Deleted bool   `json:"deleted,omitempty"`
}

// CredentialHeader reports whether a request header carries a credential:
// Authorization, Proxy-Authorization, Cookie, or one of the signature
// headers of the supported schemes. Such a header may not name a delivery's
// identity (docs/spec/v1alpha1.md), which is stored and shown.
func CredentialHeader(name string) bool {
	switch strings.ToLower(name) {
	case "authorization", "proxy-authorization", "cookie",
		"x-hub-signature", "x-hub-signature-256", "x-gitlab-token", "x-slack-signature", "linear-signature",
		"stripe-signature", "x-shopify-hmac-sha256", "webhook-signature", "svix-signature",
		"x-pagerduty-signature", "sentry-hook-signature", "x-vercel-signature":
		return true
	}
	return false
}
