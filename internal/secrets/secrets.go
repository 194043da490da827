// Package secrets seals managed secrets for the store (AES-256-GCM) and
// generates new ones. The key is the operator's (FACTORY_SECRETS_KEY) or is
// generated on first use into <data>/secrets.key, mode 0600.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"factory"
)

// KeyEnv names the environment variable that carries the operator's key,
// base64 of 32 bytes. It wins over the key file.
const KeyEnv = "FACTORY_SECRETS_KEY"

// KeyFile is the key's file name inside the data directory.
const KeyFile = "secrets.key"

// Keyring seals and opens secret values.
type Keyring struct {
	aead cipher.AEAD
	key  []byte
	// Source says where the key came from: KeyEnv, or the key file's path.
	Source string
}

// LoadKeyring reads the key from the environment or the data directory,
// generating the file on first use.
func LoadKeyring(dataDir string) (*Keyring, error) {
	var key []byte
	source := KeyEnv
	if env := os.Getenv(KeyEnv); env != "" {
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(env))
		if err != nil || len(k) != 32 {
			return nil, fmt.Errorf("%s must be base64 of 32 bytes", KeyEnv)
		}
		key = k
	} else {
		path := filepath.Join(dataDir, KeyFile)
		source = path
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			key = make([]byte, 32)
			if _, err := rand.Read(key); err != nil {
				return nil, err
			}
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return nil, err
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return nil, fmt.Errorf("create secrets key %s: %w", path, err)
			}
			_, err = f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, fmt.Errorf("write secrets key %s: %w", path, err)
			}
		case err != nil:
			return nil, fmt.Errorf("read secrets key: %w", err)
		default:
			k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
			if err != nil || len(k) != 32 {
				return nil, fmt.Errorf("secrets key %s is damaged: want base64 of 32 bytes", path)
			}
			key = k
		}
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Keyring{aead: aead, key: key, Source: source}, nil
}

// KeyPresent reports whether a key is there to load (in the environment
// or the data directory), without generating one.
func KeyPresent(dataDir string) bool {
	if os.Getenv(KeyEnv) != "" {
		return true
	}
	_, err := os.Stat(filepath.Join(dataDir, KeyFile))
	return err == nil
}

// Fingerprint names the key without revealing it: the first 16 hex digits
// of an HMAC-SHA256 under the key. Backups record it, and a store records
// the fingerprint of the key its secrets are sealed with.
func (k *Keyring) Fingerprint() string {
	return hex.EncodeToString(k.Derive("its fingerprint")[:8])
}

// Derive is a key for another purpose, made from the keyring's (HMAC-SHA256
// of the purpose): the embedded NATS server's encryption at rest, say.
// Different purposes give unrelated keys; none reveals the keyring's.
func (k *Keyring) Derive(purpose string) []byte {
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte("factory key for " + purpose))
	return m.Sum(nil)
}

// Seal encrypts a value. The secret's name is bound in as additional data,
// so a sealed value copied under another name does not open.
func (k *Keyring) Seal(name string, value []byte) ([]byte, error) {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return k.aead.Seal(nonce, nonce, value, []byte(name)), nil
}

// Open decrypts a sealed value.
func (k *Keyring) Open(name string, sealed []byte) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed secret is truncated")
	}
	v, err := k.aead.Open(nil, sealed[:n], sealed[n:], []byte(name))
	if err != nil {
		return nil, fmt.Errorf("secret %s does not open with this key (was %s changed?)", name, KeyEnv)
	}
	return v, nil
}

var urlSafe = regexp.MustCompile(`^[A-Za-z0-9._~-]{32,}$`)

// URLSafe reports whether a value can be a url_token secret (docs/spec/definitions.md).
func URLSafe(v []byte) bool { return urlSafe.Match(v) }

// NewToken returns a token or url_token secret: 32 random bytes, base64url
// without padding (43 characters).
func NewToken() []byte {
	return []byte(base64.RawURLEncoding.EncodeToString(random()))
}

// NewStandardWebhooksSecret returns a Standard Webhooks signing secret:
// "whsec_" + base64 of 32 random bytes.
func NewStandardWebhooksSecret() []byte {
	return []byte("whsec_" + base64.StdEncoding.EncodeToString(random()))
}

func random() []byte {
	b := make([]byte, factory.GeneratedSecretBytes)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return b
}
