package ingress

import (
	"crypto/hmac"
	"crypto/sha1" // Vercel signs with HMAC-SHA1; the scheme is theirs.
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The schemes below sign the raw body with HMAC and send the hex digest in
// one header, and sign no time: a captured request could be replayed, so
// their identical bodies are duplicates for a day (docs/spec/ingress.md).

// pagerDuty is PagerDuty's v3 webhooks: X-PagerDuty-Signature holds one or
// more comma-separated v1=<hex HMAC-SHA256(body)> (several while a secret
// rotates); any one that matches is enough.
type pagerDuty struct{}

func (pagerDuty) NeedsBody() bool               { return true }
func (pagerDuty) SignsReplayWindow() bool       { return false }
func (pagerDuty) DeliveryID(http.Header) string { return "" }

func (pagerDuty) Verify(h http.Header, body, secret []byte, _ time.Time) error {
	header := h.Get("X-PagerDuty-Signature")
	if header == "" {
		return ErrUnsigned
	}
	want := hmacSHA256(secret, body)
	seen := false
	for _, part := range strings.Split(header, ",") {
		sig, ok := strings.CutPrefix(strings.TrimSpace(part), "v1=")
		if !ok {
			continue // another version: not ours to check
		}
		seen = true
		if got, err := hex.DecodeString(sig); err == nil && equal(got, want) {
			return nil
		}
	}
	if !seen {
		return fmt.Errorf("%w: X-PagerDuty-Signature has no v1= signature", ErrMalformed)
	}
	return ErrMismatch
}

// sentry is Sentry's integration webhooks: Sentry-Hook-Signature is the hex
// HMAC-SHA256 of the body with the client secret; Request-ID identifies
// the delivery.
type sentry struct{}

func (sentry) NeedsBody() bool                 { return true }
func (sentry) SignsReplayWindow() bool         { return false }
func (sentry) DeliveryID(h http.Header) string { return h.Get("Request-ID") }

func (sentry) Verify(h http.Header, body, secret []byte, _ time.Time) error {
	return verifyHexHeader(h, "Sentry-Hook-Signature", hmacSHA256(secret, body))
}

// vercel is Vercel's webhooks: x-vercel-signature is the hex HMAC-SHA1 of
// the body; the payload's id identifies the delivery.
type vercel struct{}

func (vercel) NeedsBody() bool               { return true }
func (vercel) SignsReplayWindow() bool       { return false }
func (vercel) DeliveryID(http.Header) string { return "" }

func (vercel) Verify(h http.Header, body, secret []byte, _ time.Time) error {
	m := hmac.New(sha1.New, secret)
	m.Write(body)
	return verifyHexHeader(h, "x-vercel-signature", m.Sum(nil))
}

// BodyDeliveryID is the payload's top-level id, read only after the
// signature was verified.
func (vercel) BodyDeliveryID(body []byte) string {
	var p struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	return p.ID
}

// verifyHexHeader compares a header holding one hex digest with want.
func verifyHexHeader(h http.Header, name string, want []byte) error {
	header := strings.TrimSpace(h.Get(name))
	if header == "" {
		return ErrUnsigned
	}
	got, err := hex.DecodeString(header)
	if err != nil {
		return fmt.Errorf("%w: %s is not hex", ErrMalformed, name)
	}
	if !equal(got, want) {
		return ErrMismatch
	}
	return nil
}
