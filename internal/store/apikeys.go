package store

import (
	"crypto/sha256"
	"encoding/hex"

	"factory"
)

// HashAPIKey is the lookup key of an API key. Keys carry 256 random bits,
// so a plain SHA-256 is enough: there is nothing to brute-force.
func HashAPIKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// APIKeyByValue finds the record of a presented key.
func (s *Store) APIKeyByValue(key string) (*factory.APIKey, error) {
	k := &factory.APIKey{}
	return k, s.getJSON(apiKeyPrefix+HashAPIKey(key), k)
}

// APIKeys lists every key's record.
func (s *Store) APIKeys() ([]*factory.APIKey, error) {
	return scanJSON[factory.APIKey](s, apiKeyPrefix)
}

// PutAPIKey stores the record of a key.
func (b *Batch) PutAPIKey(key string, k *factory.APIKey) { b.putJSON(apiKeyPrefix+HashAPIKey(key), k) }

// APIKeyByHash finds a key's record by its lookup key (HashAPIKey): for a
// dashboard session, which keeps the hash, never the key.
func (s *Store) APIKeyByHash(hash string) (*factory.APIKey, error) {
	k := &factory.APIKey{}
	return k, s.getJSON(apiKeyPrefix+hash, k)
}
