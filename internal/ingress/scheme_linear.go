package ingress

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// linear is Linear's scheme: Linear-Signature: <hex> of the body, whose
// webhookTimestamp (milliseconds) must be within 60 s. Linear puts one in
// every delivery, and it alone dates a body: a signed body without it
// could be replayed for ever, so it is refused. Linear-Delivery is a
// header no signature covers, so within the window a body identical to
// one accepted is a duplicate whatever its delivery ID (SignsReplayWindow).
type linear struct{}

// linearWindow is Linear's replay window (docs/spec/ingress.md).
const linearWindow = 60 * time.Second

func (linear) NeedsBody() bool                 { return true }
func (linear) SignsReplayWindow() bool         { return false }
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
	ms, err := linearTimestamp(body)
	if err != nil {
		return err
	}
	if d := now.Sub(time.UnixMilli(ms)); d > linearWindow || d < -linearWindow {
		return ErrStale
	}
	return nil
}

// linearTimestamp reads the body's webhookTimestamp, in milliseconds.
func linearTimestamp(body []byte) (int64, error) {
	var b struct {
		WebhookTimestamp json.RawMessage `json:"webhookTimestamp"`
	}
	if json.Unmarshal(body, &b) != nil || len(b.WebhookTimestamp) == 0 || string(b.WebhookTimestamp) == "null" {
		return 0, fmt.Errorf("%w: the signed body has no webhookTimestamp, which Linear puts in every delivery", ErrStale)
	}
	ms, err := strconv.ParseInt(string(b.WebhookTimestamp), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: webhookTimestamp is not milliseconds", ErrMalformed)
	}
	return ms, nil
}
