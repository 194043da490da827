package factory

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Delivery log labels, spelled as seed-spec §2.5 spells them.
const (
	LabelAccepted         = "Accepted"
	LabelDuplicate        = "Duplicate"
	LabelRejectedAuth     = "Rejected (auth)"
	LabelRejectedJSON     = "Rejected (invalid JSON)"
	LabelRejectedTooLarge = "Rejected (too large)"
)

// Delivery is one request to a webhook's ingress URL, as its log shows it.
type Delivery struct {
	ID             string    `json:"delivery_id"`
	WebhookUID     string    `json:"webhook_uid"`
	Label          string    `json:"label"`
	Size           int64     `json:"size"`
	Time           time.Time `json:"time"`
	IdentitySource string    `json:"identity_source,omitempty"`
	Identity       string    `json:"identity,omitempty"`
	ClientAddr     string    `json:"client_addr"`
	// Reason says why a request was rejected (never a secret).
	Reason string `json:"reason,omitempty"`
	// DuplicateOf is the accepted delivery a duplicate repeats.
	DuplicateOf string `json:"duplicate_of,omitempty"`
	// RedeliveryOf is the delivery an operator delivered again.
	RedeliveryOf string   `json:"redelivery_of,omitempty"`
	RunIDs       []string `json:"run_ids"`
	// EventType is the provider's own name of the event, from its header
	// (X-GitHub-Event, X-Gitlab-Event), for the provider's webhooks.
	EventType string `json:"event_type,omitempty"`
	// Event is a provider delivery normalized (set when it is evaluated);
	// Outcome says why an accepted delivery started nothing, when it did
	// not (a ping, a repository the factory does not list, a payload that
	// lacks what its event needs).
	Event   *ProviderEvent `json:"event,omitempty"`
	Outcome string         `json:"outcome,omitempty"`
	// TraceID is the trace of the delivery's request (set when tracing is
	// on and the trace is sampled); Traceparent continues it when the
	// delivery is evaluated (W3C trace context).
	TraceID     string `json:"trace_id,omitempty"`
	Traceparent string `json:"traceparent,omitempty"`
}

// API key scopes (docs/spec/agents-api.md): runs for the Agents API, read
// for reading everything but secrets (pull-request checks, dashboards),
// admin for everything.
const (
	ScopeRuns  = "runs"
	ScopeRead  = "read"
	ScopeAdmin = "admin"
)

// Scopes lists the scopes a key can have.
var Scopes = []string{ScopeRuns, ScopeRead, ScopeAdmin}

// APIKey is an API key's record. The key itself is never stored: only its
// SHA-256, under which the record is found.
type APIKey struct {
	Name      string     `json:"name"`
	Scope     string     `json:"scope"`
	Prefix    string     `json:"prefix"` // the first characters, to tell keys apart in lists
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// GitHubTokenSecret and GitLabTokenSecret name managed secrets holding
	// the key's person's own tokens: the runs the key creates reach the
	// code hosts with them where a factory's credentialStrategy is
	// CREATOR (docs/codehosts.md).
	GitHubTokenSecret string `json:"github_token_secret,omitempty"`
	GitLabTokenSecret string `json:"gitlab_token_secret,omitempty"`
}

// Creator is who a key's runs are created by: a service account named
// after the key (never the key itself).
func (k *APIKey) Creator() *Creator {
	h := sha256.Sum256([]byte(k.Prefix))
	return &Creator{Type: "service_account", UID: "ak_" + hex.EncodeToString(h[:])[:16], DisplayName: k.Name}
}

// CreatorSecrets name, by code host, the managed secrets of the key's
// person's own tokens (Run.CreatorSecrets); nil when it names none.
func (k *APIKey) CreatorSecrets() map[string]string {
	out := map[string]string{}
	if k.GitHubTokenSecret != "" {
		out[ProviderGitHub] = k.GitHubTokenSecret
	}
	if k.GitLabTokenSecret != "" {
		out[ProviderGitLab] = k.GitLabTokenSecret
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// APIKeyRequest is a key to create: its name and scope, and the secrets
// of its person's own code host tokens.
type APIKeyRequest struct {
	Name              string `json:"name"`
	Scope             string `json:"scope"`
	GitHubTokenSecret string `json:"github_token_secret,omitempty"`
	GitLabTokenSecret string `json:"gitlab_token_secret,omitempty"`
}

// Allows reports whether the key grants one of the scopes: admin grants
// everything.
func (k *APIKey) Allows(scopes ...string) bool {
	if k.RevokedAt != nil {
		return false
	}
	for _, s := range scopes {
		if k.Scope == ScopeAdmin || k.Scope == s {
			return true
		}
	}
	return false
}

// NewAPIKey is a created key: the key itself, shown once, and its record.
type NewAPIKey struct {
	Key    string  `json:"key"`
	APIKey *APIKey `json:"api_key"`
}
