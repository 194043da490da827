package ingress

import (
	"crypto/sha256"
	"net/http"
	"time"
)

// gitlab is GitLab's scheme: X-Gitlab-Token carries the secret itself,
// compared in constant time. It is decided before the body is read.
type gitlab struct{}

func (gitlab) NeedsBody() bool         { return false }
func (gitlab) SignsReplayWindow() bool { return false }

func (gitlab) DeliveryID(h http.Header) string {
	if v := h.Get("Idempotency-Key"); v != "" {
		return v
	}
	return h.Get("X-Gitlab-Event-UUID")
}

func (gitlab) Verify(h http.Header, _, secret []byte, _ time.Time) error {
	token := h.Get("X-Gitlab-Token")
	if token == "" {
		return ErrUnsigned
	}
	if !sameSecret([]byte(token), secret) {
		return ErrMismatch
	}
	return nil
}

// sameSecret compares two secrets of any length in constant time, by
// comparing their digests: the length of the presented one leaks nothing.
func sameSecret(presented, secret []byte) bool {
	a, b := sha256.Sum256(presented), sha256.Sum256(secret)
	return equal(a[:], b[:])
}
