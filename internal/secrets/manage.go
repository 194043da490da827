package secrets

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"time"

	"factory"

	"factory/internal/store"
)

// Errors of secret management; wrapped with a message that says what to do.
var (
	ErrInvalid  = errors.New("invalid")
	ErrExists   = errors.New("exists")
	ErrNotFound = errors.New("not found")
	ErrInUse    = errors.New("in use")
)

// MaxValueBytes bounds a supplied secret value.
const MaxValueBytes = 64 << 10

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidName reports whether s can name a managed secret.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// Create stores a new secret. A nil value is generated (43 URL-safe
// characters) and returned, for the caller to show once.
func Create(s *store.Store, kr *Keyring, name string, value []byte, requireURLSafe bool, now time.Time) (*factory.Secret, []byte, error) {
	if !ValidName(name) {
		return nil, nil, fmt.Errorf("%w: secret name %q must be a letter or digit, then letters, digits, '.', '_' or '-' (at most 128)", ErrInvalid, name)
	}
	if _, err := s.Secret(name); err == nil {
		return nil, nil, fmt.Errorf("%w: secret %q exists: rotate it with factory secrets rotate %s", ErrExists, name, name)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, nil, err
	}
	value, generated, err := checkValue(value, requireURLSafe, NewToken)
	if err != nil {
		return nil, nil, err
	}
	sec := &factory.Secret{Name: name, Version: 1, URLSafe: URLSafe(value), CreatedAt: now, RotatedAt: now}
	if err := put(s, kr, sec, value); err != nil {
		return nil, nil, err
	}
	return sec, generated, nil
}

// Rotate replaces a secret's value, generating one when value is nil. A
// secret generated for a webhook is rotated by generating again, in its
// format, and its new value can be revealed once.
func Rotate(s *store.Store, kr *Keyring, name string, value []byte, now time.Time) (*factory.Secret, []byte, error) {
	old, err := s.Secret(name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, fmt.Errorf("%w: no secret %q: create it with factory secrets create %s", ErrNotFound, name, name)
	}
	if err != nil {
		return nil, nil, err
	}
	gen := NewToken
	if old.Generated {
		if value != nil {
			return nil, nil, fmt.Errorf("%w: secret %q was generated for a webhook: rotate it without a value, or give the webhook a secretName", ErrInvalid, name)
		}
		if old.Format != "" && old.Format != "token" {
			gen = NewStandardWebhooksSecret
		}
	}
	value, generated, err := checkValue(value, false, gen)
	if err != nil {
		return nil, nil, err
	}
	sec := *old
	sec.Version, sec.RotatedAt, sec.URLSafe, sec.Revealed = old.Version+1, now, URLSafe(value), false
	if err := put(s, kr, &sec, value); err != nil {
		return nil, nil, err
	}
	if sec.Generated {
		generated = nil // revealed through its webhook, once
	}
	return &sec, generated, nil
}

// Delete removes a secret that no webhook uses.
func Delete(s *store.Store, name string) error {
	sec, err := s.Secret(name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: no secret %q", ErrNotFound, name)
	}
	if err != nil {
		return err
	}
	whs, err := s.AllWebhooks()
	if err != nil {
		return err
	}
	for _, w := range whs {
		if w.SecretName == sec.Name {
			return fmt.Errorf("%w: secret %q is used by webhook %s/%s (%s): remove its secretName first", ErrInUse, sec.Name, w.Factory, w.Key, w.UID)
		}
	}
	b := s.NewBatch()
	b.DeleteSecret(sec)
	return b.Commit()
}

func checkValue(value []byte, requireURLSafe bool, gen func() []byte) (v, generated []byte, err error) {
	if value == nil {
		v = gen()
		return v, v, nil
	}
	switch {
	case len(value) == 0:
		return nil, nil, fmt.Errorf("%w: the value is empty", ErrInvalid)
	case len(value) > MaxValueBytes:
		return nil, nil, fmt.Errorf("%w: the value is over %d bytes", ErrInvalid, MaxValueBytes)
	case requireURLSafe && !URLSafe(value):
		return nil, nil, fmt.Errorf("%w: the value is not URL-safe: use at least 32 of A-Z a-z 0-9 - . _ ~", ErrInvalid)
	}
	return value, nil, nil
}

func put(s *store.Store, kr *Keyring, sec *factory.Secret, value []byte) error {
	sealed, err := kr.Seal(sec.Name, value)
	if err != nil {
		return err
	}
	b := s.NewBatch()
	b.PutSecret(sec, sealed)
	return b.Commit()
}

// Current opens the value of a secret's current version: for a credential
// read at each use (a git source's token, a run's granted secrets), so that
// a rotation takes effect at once.
func Current(s *store.Store, kr *Keyring, name string) ([]byte, error) {
	sec, err := s.Secret(name)
	if err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	sealed, err := s.SealedSecret(name, sec.Version)
	if err != nil {
		return nil, err
	}
	return kr.Open(name, sealed)
}

// fingerprintMeta is the store's record of the fingerprint of the key its
// secrets are sealed with.
const fingerprintMeta = "secrets_key_fingerprint"

// StoreFingerprint is the fingerprint of the key a store's secrets are
// sealed with, as the store records it ("" when it records none yet: a
// store no keyring has been checked against).
func StoreFingerprint(s *store.Store) (string, error) { return s.Meta(fingerprintMeta) }

// ForStore loads the keyring of a data directory for its store and checks
// that it is the key the store's secrets are sealed with: a store restored
// on another machine needs the key of the machine it came from, and a
// wrong one would make every secret unreadable. A store that records no
// fingerprint yet (made before stores recorded it) is checked by opening
// one of its secrets, and then records the key's. Without a key, one is
// generated only for a store that needs none.
func ForStore(s *store.Store, dataDir string) (*Keyring, error) {
	want, err := StoreFingerprint(s)
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("%s (or in %s)", filepath.Join(dataDir, KeyFile), KeyEnv)
	if want != "" && !KeyPresent(dataDir) {
		return nil, fmt.Errorf("the store's secrets are sealed with the secrets key of fingerprint %s, and there is no secrets key: put that key in %s and start again (docs/operations.md)", want, where)
	}
	kr, err := LoadKeyring(dataDir)
	if err != nil {
		return nil, err
	}
	got := kr.Fingerprint()
	switch {
	case want == got:
		return kr, nil
	case want != "":
		return nil, fmt.Errorf("the secrets key in %s has fingerprint %s, but the store's secrets are sealed with the key of fingerprint %s: put that key in %s and start again (docs/operations.md)", kr.Source, got, want, where)
	}
	if err := opensOne(s, kr, where); err != nil {
		return nil, err
	}
	b := s.NewLogBatch()
	b.PutMeta(fingerprintMeta, got)
	if err := b.Commit(); err != nil {
		return nil, err
	}
	return kr, nil
}

// opensOne checks that the key opens a secret of the store, if it has any.
func opensOne(s *store.Store, kr *Keyring, where string) error {
	secs, err := s.Secrets()
	if err != nil || len(secs) == 0 {
		return err
	}
	sec := secs[0]
	sealed, err := s.SealedSecret(sec.Name, sec.Version)
	if err != nil {
		return err
	}
	if _, err := kr.Open(sec.Name, sealed); err != nil {
		return fmt.Errorf("the secrets key in %s (fingerprint %s) does not open the store's secret %q: its secrets are sealed with another key; put that key in %s and start again (docs/operations.md)",
			kr.Source, kr.Fingerprint(), sec.Name, where)
	}
	return nil
}
