package ingress

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// linear is Linear's scheme: Linear-Signature: <hex> of the body; when the
// body has webhookTimestamp (milliseconds) it must be within 60 s.
type linear struct{}

// linearWindow is Linear's replay window (docs/spec/ingress.md).
const linearWindow = 60 * time.Second

func (linear) NeedsBody() bool                 { return true }
func (linear) SignsReplayWindow() bool         { return true }
func (linear) DeliveryID(h http.Header) string { return h.Get("Linear-Delivery") }

func (linear) Verify(h http.Header, body, secret []byte, now time.Time) error {
	header := h.Get("Linear-Signature")
	if header == "" {
		return ErrUnsigned
	}
	got, err := hex.DecodeString(header)
	if err != nil {
		return fmt.Errorf("%w: Linear-Signature is not hex", ErrMalformed)
	}
	if !equal(got, hmacSHA256(secret, body)) {
		return ErrMismatch
	}
	// The timestamp is inside the signed body: check it once the body is
	// known to be Linear's.
	var b struct {
		WebhookTimestamp *json.Number `json:"webhookTimestamp"`
	}
	if json.Unmarshal(body, &b) == nil && b.WebhookTimestamp != nil {
		ms, err := b.WebhookTimestamp.Int64()
		if err != nil {
			return fmt.Errorf("%w: webhookTimestamp is not milliseconds", ErrMalformed)
		}
		if d := now.Sub(time.UnixMilli(ms)); d > linearWindow || d < -linearWindow {
			return ErrStale
		}
	}
	return nil
}
