package ingress

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Scheme verifies one provider's signatures. Adding a provider is one file
// with a Scheme and one table of test vectors.
type Scheme interface {
	// Verify checks the request over the raw body bytes (never a
	// re-serialization) with the webhook's secret, at time now. Where a
	// header holds several signatures, any one that matches is enough.
	Verify(h http.Header, body, secret []byte, now time.Time) error
	// DeliveryID is the provider's own delivery ID header, or "".
	DeliveryID(h http.Header) string
	// SignsReplayWindow is false for schemes that sign neither a time nor
	// a delivery ID: a captured request could be replayed under a new ID,
	// so their identical bodies are duplicates for a day (docs/spec/ingress.md).
	SignsReplayWindow() bool
	// NeedsBody is false when the scheme is decided from headers alone.
	NeedsBody() bool
}

// Schemes by their signatureScheme value.
var Schemes = map[string]Scheme{
	"standard_webhooks": standardWebhooks{},
	"standard-webhooks": standardWebhooks{},
	"pagerduty":         pagerDuty{},
	"sentry":            sentry{},
	"vercel":            vercel{},
	"stripe":            stripe{},
	"github":            github{},
	"slack":             slack{},
	"shopify":           shopify{},
	"linear":            linear{},
	"gitlab":            gitlab{},
	"azure_devops":      azureDevOps{},
}

// bodyIdentified is a scheme whose sender puts the delivery's ID in the
// payload rather than a header (Vercel's id).
type bodyIdentified interface {
	BodyDeliveryID(body []byte) string
}

// Verification failures. Each answers 401, logged Rejected (auth); the
// reason goes into the log record.
var (
	ErrUnsigned  = errors.New("the request carries no signature")
	ErrMalformed = errors.New("the signature header is malformed")
	ErrStale     = errors.New("the signature's timestamp is outside the accepted window")
	ErrMismatch  = errors.New("no signature matches")
)

// hmacSHA256 computes HMAC-SHA256 of the parts, concatenated.
func hmacSHA256(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// equal compares in constant time; lengths are public (all our digests
// have a fixed size).
func equal(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }

// within reports whether a Unix timestamp (in seconds) is within window of
// now, both ways: a timestamp from the future is as suspicious as an old one.
func within(ts string, now time.Time, window time.Duration) error {
	sec, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q is not a Unix time", ErrMalformed, truncate(ts, 20))
	}
	t := time.Unix(sec, 0)
	if d := now.Sub(t); d > window || d < -window {
		return ErrStale
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// maxSignatures bounds how many candidates a header may make us compute.
const maxSignatures = 16
