package ingress

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"factory"
)

// slack is Slack's scheme: X-Slack-Signature: v0=<hex> of "v0:{ts}:{body}",
// X-Slack-Request-Timestamp within five minutes.
type slack struct{}

func (slack) NeedsBody() bool               { return true }
func (slack) SignsReplayWindow() bool       { return true }
func (slack) DeliveryID(http.Header) string { return "" }

// BodyDeliveryID is the Events API's event_id: Slack's retries
// (X-Slack-Retry-Num) repeat it, so they are duplicates.
func (slack) BodyDeliveryID(body []byte) string {
	var p struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	return p.EventID
}

func (slack) Verify(h http.Header, body, secret []byte, now time.Time) error {
	header, ts := h.Get("X-Slack-Signature"), h.Get("X-Slack-Request-Timestamp")
	if header == "" && ts == "" {
		return ErrUnsigned
	}
	if header == "" || ts == "" {
		return fmt.Errorf("%w: X-Slack-Signature and X-Slack-Request-Timestamp are both required", ErrMalformed)
	}
	hexSig, ok := strings.CutPrefix(header, "v0=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil {
		return fmt.Errorf("%w: X-Slack-Signature is not v0=<hex>", ErrMalformed)
	}
	if err := within(ts, now, factory.SignatureMaxAge); err != nil {
		return err
	}
	if !equal(got, hmacSHA256(secret, []byte("v0:"+ts+":"), body)) {
		return ErrMismatch
	}
	return nil
}
