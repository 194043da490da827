package ingress

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// github is GitHub's scheme: X-Hub-Signature-256: sha256=<hex> of the body.
// The SHA-1 header is not accepted.
type github struct{}

func (github) NeedsBody() bool                 { return true }
func (github) SignsReplayWindow() bool         { return false }
func (github) DeliveryID(h http.Header) string { return h.Get("X-GitHub-Delivery") }

func (github) Verify(h http.Header, body, secret []byte, _ time.Time) error {
	header := h.Get("X-Hub-Signature-256")
	if header == "" {
		return ErrUnsigned
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil {
		return fmt.Errorf("%w: X-Hub-Signature-256 is not sha256=<hex>", ErrMalformed)
	}
	if !equal(got, hmacSHA256(secret, body)) {
		return ErrMismatch
	}
	return nil
}
