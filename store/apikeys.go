package store

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// API key scopes (agents-api.md).
const (
	ScopeRuns  = "runs"
	ScopeAdmin = "admin"
)

// APIKey is an API key's record. The key itself is never stored: only its
// SHA-256, under which the record is found.
type APIKey struct {
	Name      string     `json:"name"`
	Scope     string     `json:"scope"`
	Prefix    string     `json:"prefix"` // the first characters, to tell keys apart in lists
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// Allows reports whether the key grants a scope: admin grants everything.
func (k *APIKey) Allows(scope string) bool {
	return k.RevokedAt == nil && (k.Scope == ScopeAdmin || k.Scope == scope)
}

// HashAPIKey is the lookup key of an API key. Keys carry 256 random bits,
// so a plain SHA-256 is enough: there is nothing to brute-force.
func HashAPIKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// APIKeyByValue finds the record of a presented key.
func (s *Store) APIKeyByValue(key string) (*APIKey, error) {
	k := &APIKey{}
	return k, s.getJSON(apiKeyPrefix+HashAPIKey(key), k)
}

// APIKeys lists every key's record.
func (s *Store) APIKeys() ([]*APIKey, error) { return scanJSON[APIKey](s, apiKeyPrefix) }

// PutAPIKey stores the record of a key.
func (b *Batch) PutAPIKey(key string, k *APIKey) { b.putJSON(apiKeyPrefix+HashAPIKey(key), k) }
