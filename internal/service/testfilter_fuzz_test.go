package service_test

import (
	"context"
	"encoding/json"
	"testing"

	"factory"
	"factory/internal/secrets"
	"factory/internal/service"
	"factory/internal/store"
)

// FuzzTestPayload: Test filter on a pasted payload (untrusted bytes from
// the dashboard and the API) answers a verdict or a domain error for any
// bytes, never panics, and stores nothing.
func FuzzTestPayload(f *testing.F) {
	dir := f.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	kr, err := secrets.LoadKeyring(dir)
	if err != nil {
		f.Fatal(err)
	}
	svc := &service.Service{Store: s, Keyring: kr}
	const hook, auto = "wh_0000000000000000fz01", "au_0000000000000000fz01"
	b := s.NewBatch()
	b.PutFactory(&factory.Factory{Name: "f", UID: "fc_0000000000000000fz01"})
	b.PutWebhook(&factory.Webhook{Factory: "f", Key: "w", UID: hook, Spec: factory.WebhookSpec{Name: "w", AuthMode: factory.AuthToken, Enabled: true}})
	b.PutAutomation(&factory.Automation{Factory: "f", Key: "a", UID: auto, Spec: factory.AutomationSpec{Enabled: true,
		Triggers: []factory.Trigger{{Provider: "webhook", Event: "received", Filter: factory.TriggerFilter{WebhookIDs: []string{hook},
			Payload: json.RawMessage(`{"action":["opened"],"issue":{"labels":{"exists":true}}}`)}}}}})
	if err := b.Commit(); err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{`{"action":"opened","issue":{"labels":[]}}`, `{"action":"closed"}`, `[]`, `null`, `"x"`, `{"a":`, `{"a":1}{"b":2}`,
		`{"action":["opened",{"x":[[[[1]]]]}]}`, "\xff\xfe", `{"action":"` + "\u0000" + `"}`, `1e999999`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		res, err := svc.TestPayload(context.Background(), auto, "", "", payload)
		switch {
		case err != nil && factory.ErrorCode(err) != factory.EINVALID:
			t.Fatalf("%q: %v", payload, err)
		case err == nil && res == nil:
			t.Fatalf("%q: no result", payload)
		case err == nil && res.WouldTrigger && !json.Valid(payload):
			t.Fatalf("%q: invalid JSON would trigger", payload)
		}
		if ds, _, _ := s.Deliveries(hook, "", 1); len(ds) > 0 {
			t.Fatal("testing stored a delivery")
		}
	})
}
