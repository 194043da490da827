package ingress

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"time"
)

// shopify is Shopify's scheme: X-Shopify-Hmac-Sha256: base64 of the
// HMAC-SHA256 of the body.
type shopify struct{}

func (shopify) NeedsBody() bool                 { return true }
func (shopify) SignsReplayWindow() bool         { return false }
func (shopify) DeliveryID(h http.Header) string { return h.Get("X-Shopify-Webhook-Id") }

func (shopify) Verify(h http.Header, body, secret []byte, _ time.Time) error {
	header := h.Get("X-Shopify-Hmac-Sha256")
	if header == "" {
		return ErrUnsigned
	}
	got, err := base64.StdEncoding.DecodeString(header)
	if err != nil {
		return fmt.Errorf("%w: X-Shopify-Hmac-Sha256 is not base64", ErrMalformed)
	}
	if !equal(got, hmacSHA256(secret, body)) {
		return ErrMismatch
	}
	return nil
}
