package factory

import (
	"encoding/json"
	"time"
)

// Auth modes of a webhook (seed-spec §5).
const (
	AuthToken     = "token"
	AuthURLToken  = "url_token"
	AuthSignature = "signature"
)

// SchemeStandardWebhooks is the one signature scheme whose secret the
// service may generate (docs/spec/definitions.md).
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
}

// Trigger providers. Only webhook triggers fire today; the others are
// named so that the trigger type can be written for all of them.
const (
	ProviderWebhook  = "webhook"
	ProviderSchedule = "schedule"
)

// Trigger starts a run when an event of its provider matches it: for the
// webhook provider, a delivery of a selected webhook whose payload matches
// the payload filter.
type Trigger struct {
	Provider string        `json:"provider"`
	Event    string        `json:"event"`
	Filter   TriggerFilter `json:"filter"`
}

// TriggerFilter selects webhooks by UID and deliveries by payload.
type TriggerFilter struct {
	WebhookIDs []string        `json:"webhook_ids"`
	Payload    json.RawMessage `json:"payload,omitempty"` // canonical JSON
}

// Settings is what the optional factory.yaml says.
type Settings struct {
	Description    string `json:"description,omitempty"`
	WebhookBaseURL string `json:"webhookBaseUrl,omitempty"`
}

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
