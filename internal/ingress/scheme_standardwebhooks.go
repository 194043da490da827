package ingress

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	"factory"
)

// standardWebhooks is the Standard Webhooks scheme (standardwebhooks.com),
// with Svix's svix-* headers accepted as equivalents.
type standardWebhooks struct{}

func (standardWebhooks) NeedsBody() bool         { return true }
func (standardWebhooks) SignsReplayWindow() bool { return true }

func (standardWebhooks) header(h http.Header, name string) string {
	if v := h.Get("webhook-" + name); v != "" {
		return v
	}
	return h.Get("svix-" + name)
}

func (s standardWebhooks) DeliveryID(h http.Header) string { return s.header(h, "id") }

// Verify checks "v1,<base64>" signatures (space-separated) of
// "{id}.{timestamp}.{body}" with the key base64-decoded from after "whsec_".
func (s standardWebhooks) Verify(h http.Header, body, secret []byte, now time.Time) error {
	id, ts, sigs := s.header(h, "id"), s.header(h, "timestamp"), s.header(h, "signature")
	if id == "" && ts == "" && sigs == "" {
		return ErrUnsigned
	}
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: webhook-id, webhook-timestamp and webhook-signature are all required", ErrMalformed)
	}
	if err := within(ts, now, factory.SignatureMaxAge); err != nil {
		return err
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(string(secret), "whsec_"))
	if err != nil {
		return fmt.Errorf("the webhook's secret is not a Standard Webhooks secret (whsec_ + base64)")
	}
	want := hmacSHA256(key, []byte(id), []byte("."), []byte(ts), []byte("."), body)
	found := false
	for i, sig := range strings.Fields(sigs) {
		if i == maxSignatures {
			break
		}
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue // other versions (v1a: asymmetric) are not ours to check
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		found = true
		if equal(got, want) {
			return nil
		}
	}
	if !found {
		return fmt.Errorf("%w: no v1 signature in webhook-signature", ErrMalformed)
	}
	return ErrMismatch
}
