package ingress

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"factory"
)

// stripe is Stripe's scheme: Stripe-Signature: t=<unix>,v1=<hex>[,v1=...],
// HMAC-SHA256 hex of "{t}.{body}" keyed with the whole secret string.
type stripe struct{}

func (stripe) NeedsBody() bool               { return true }
func (stripe) SignsReplayWindow() bool       { return true }
func (stripe) DeliveryID(http.Header) string { return "" } // the body's id is not used (docs/spec/ingress.md)

func (stripe) Verify(h http.Header, body, secret []byte, now time.Time) error {
	header := h.Get("Stripe-Signature")
	if header == "" {
		return ErrUnsigned
	}
	var ts string
	var sigs [][]byte
	for i, part := range strings.Split(header, ",") {
		if i == 2*maxSignatures {
			break
		}
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" {
		return fmt.Errorf("%w: Stripe-Signature has no t=", ErrMalformed)
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: Stripe-Signature has no v1 signature", ErrMalformed)
	}
	if err := within(ts, now, factory.SignatureMaxAge); err != nil {
		return err
	}
	want := hmacSHA256(secret, []byte(ts), []byte("."), body)
	for _, s := range sigs {
		if equal(s, want) {
			return nil
		}
	}
	return ErrMismatch
}
