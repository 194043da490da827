package service

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"regexp"
	"slices"
	"strings"
	"time"

	"factory"
	"factory/internal/store"
)

// keyName is what an API key's name may be: something a list shows.
var keyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// APIKeys lists every key's record; never a key.
func (s *Service) APIKeys(ctx context.Context) ([]*factory.APIKey, error) {
	keys, err := s.Store.APIKeys()
	if keys == nil && err == nil {
		keys = []*factory.APIKey{}
	}
	return keys, err
}

// CreateAPIKey makes a key of a scope. The key is returned once and kept
// nowhere: the store holds its SHA-256.
func (s *Service) CreateAPIKey(ctx context.Context, req factory.APIKeyRequest) (*factory.NewAPIKey, error) {
	name, scope := req.Name, req.Scope
	if !keyName.MatchString(name) {
		return nil, factory.Errorf(factory.EINVALID, "API key name %q: 1 to 64 letters, digits and . _ @ -, starting with a letter or digit", name)
	}
	if !slices.Contains(factory.Scopes, scope) {
		return nil, factory.Errorf(factory.EINVALID, "scope %q: must be one of %s", scope, strings.Join(factory.Scopes, ", "))
	}
	for _, sec := range []string{req.GitHubTokenSecret, req.GitLabTokenSecret} {
		if sec == "" {
			continue
		}
		if _, err := s.Store.Secret(sec); errors.Is(err, store.ErrNotFound) {
			return nil, factory.Errorf(factory.EINVALID, "secret %s does not exist: create it first (factory secrets create %s --from-stdin)", sec, sec)
		} else if err != nil {
			return nil, err
		}
	}
	key := newAPIKey()
	rec := &factory.APIKey{Name: name, Scope: scope, Prefix: key[:8], CreatedAt: time.Now().UTC(),
		GitHubTokenSecret: req.GitHubTokenSecret, GitLabTokenSecret: req.GitLabTokenSecret}
	b := s.Store.NewBatch()
	b.PutAPIKey(key, rec)
	if err := b.Commit(); err != nil {
		return nil, err
	}
	return &factory.NewAPIKey{Key: key, APIKey: rec}, nil
}

// RevokeAPIKey revokes a key at once, given the key itself.
func (s *Service) RevokeAPIKey(ctx context.Context, key string) (*factory.APIKey, error) {
	k, err := s.Store.APIKeyByValue(key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no such API key")
	}
	if err != nil {
		return nil, err
	}
	if k.RevokedAt == nil {
		now := time.Now().UTC()
		k.RevokedAt = &now
		b := s.Store.NewBatch()
		b.PutAPIKey(key, k)
		if err := b.Commit(); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// newAPIKey returns a key: "fk_" and 256 random bits.
func newAPIKey() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return "fk_" + base64.RawURLEncoding.EncodeToString(b)
}
