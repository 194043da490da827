package ingress

import (
	"net/http"
	"testing"
	"time"
)

// The expected digests below were computed outside Go, with Python's hmac
// module over the same bytes, so that these tests check this package's
// reading of each provider's scheme against an independent implementation
// (none of the three publishes a Go library that verifies).
const (
	pdBody = `{"event":{"id":"01DEN4HPBQAAAG05V5QQYBRZMF","event_type":"incident.triggered","resource_type":"incident","occurred_at":"2026-11-24T09:00:00.000Z","data":{"id":"PGR0VU2","type":"incident","title":"disk full on db-1"}}}`
	pdSig  = "5784cc47f19b4793e2fbc472ced9b81bd566cd99a8de32661055eadc84a2e0c1"
	seBody = `{"action":"created","installation":{"uuid":"7a485448-a9e2-4c85-8a3c-4f44175783c9"},"data":{"issue":{"id":"1117540176","title":"TypeError: cannot read properties of undefined"}},"actor":{"type":"application","id":"sentry","name":"Sentry"}}`
	seSig  = "dca4ccfd780cb76caf9e960521f6ca39838261285c31a505917466ff7f081631"
	veBody = `{"id":"evt_2Bq9xCWbV3Jz","type":"deployment.error","createdAt":1764000000000,"payload":{"deployment":{"id":"dpl_89ab","url":"widgets-abc.vercel.app"}}}`
	veSig  = "d7c4fce2b72f92cdfe2ad18b9a9942852e2d88c5"
)

func TestHexHMACSchemes(t *testing.T) {
	now := time.Now()
	runVectors(t, []vector{
		{name: "valid", scheme: "pagerduty", h: hdr("X-PagerDuty-Signature", "v1="+pdSig), body: pdBody, secret: "pd-signing-secret", now: now},
		{name: "rotating: second candidate", scheme: "pagerduty", h: hdr("X-PagerDuty-Signature", "v1=00ff, v1="+pdSig), body: pdBody, secret: "pd-signing-secret", now: now},
		{name: "wrong secret", scheme: "pagerduty", h: hdr("X-PagerDuty-Signature", "v1="+pdSig), body: pdBody, secret: "other", now: now, wantErr: ErrMismatch},
		{name: "body changed", scheme: "pagerduty", h: hdr("X-PagerDuty-Signature", "v1="+pdSig), body: pdBody + " ", secret: "pd-signing-secret", now: now, wantErr: ErrMismatch},
		{name: "no v1", scheme: "pagerduty", h: hdr("X-PagerDuty-Signature", "v2="+pdSig), body: pdBody, secret: "pd-signing-secret", now: now, wantErr: ErrMalformed},
		{name: "unsigned", scheme: "pagerduty", h: hdr(), body: pdBody, secret: "pd-signing-secret", now: now, wantErr: ErrUnsigned},
		{name: "valid", scheme: "sentry", h: hdr("Sentry-Hook-Signature", seSig), body: seBody, secret: "sentry-client-secret", now: now},
		{name: "wrong secret", scheme: "sentry", h: hdr("Sentry-Hook-Signature", seSig), body: seBody, secret: "x", now: now, wantErr: ErrMismatch},
		{name: "not hex", scheme: "sentry", h: hdr("Sentry-Hook-Signature", "zz"), body: seBody, secret: "x", now: now, wantErr: ErrMalformed},
		{name: "unsigned", scheme: "sentry", h: hdr(), body: seBody, secret: "x", now: now, wantErr: ErrUnsigned},
		{name: "valid", scheme: "vercel", h: hdr("x-vercel-signature", veSig), body: veBody, secret: "vercel-secret", now: now},
		{name: "sha256 is not vercel's", scheme: "vercel", h: hdr("x-vercel-signature", hexMAC("vercel-secret", veBody)), body: veBody, secret: "vercel-secret", now: now, wantErr: ErrMismatch},
		{name: "unsigned", scheme: "vercel", h: hdr(), body: veBody, secret: "vercel-secret", now: now, wantErr: ErrUnsigned},
	})
}

func TestHexHMACSchemesIdentity(t *testing.T) {
	if got := Schemes["sentry"].DeliveryID(http.Header{"Request-Id": {"b1c2"}}); got != "b1c2" {
		t.Errorf("sentry identity = %q, want the Request-ID header", got)
	}
	if got := Schemes["vercel"].(bodyIdentified).BodyDeliveryID([]byte(veBody)); got != "evt_2Bq9xCWbV3Jz" {
		t.Errorf("vercel identity = %q, want the payload's id", got)
	}
	if Schemes["pagerduty"].SignsReplayWindow() || Schemes["sentry"].SignsReplayWindow() || Schemes["vercel"].SignsReplayWindow() {
		t.Error("none of the three signs a time: identical bodies must be duplicates for a day")
	}
	if Schemes["standard_webhooks"] != Schemes["standard-webhooks"] {
		t.Error("standard_webhooks and standard-webhooks must be one scheme")
	}
}
