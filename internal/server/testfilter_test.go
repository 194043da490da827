package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"factory"

	"factory/client"
	"factory/internal/reconciler"
)

func TestTestFilter(t *testing.T) {
	f := testFilterSetUp(t)
	testFilterVerdicts(t, f)
	testFilterRefusals(t, f)
	testFilterReplay(t, f)
	testFilterPasted(t, f)
}

// testFilterPasted: a pasted payload is tested as if it had arrived
// through the automation's webhook (or the one named); malformed,
// oversized and misdirected ones are refused in words, and nothing is
// stored.
func testFilterPasted(t *testing.T, f *testFilterFixture) {
	before := len(f.h.log(f.tok.uid))
	path := "/v1/automations/" + f.ids["on-tok"] + "/test-filter"
	big := `{"payload": {"x": "` + strings.Repeat("a", factory.MaxWebhookBodyBytes) + `"}}`
	huge := `{"payload": {"x": "` + strings.Repeat("a", 2*factory.MaxWebhookBodyBytes) + `"}}`
	for _, c := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"matching", `{"payload": {"action": "opened", "issue": {"labels": []}}}`, 200, `"would_trigger":true`},
		{"not matching", `{"payload": {"action": "closed"}}`, 200, `"would_trigger":false`},
		{"through the other webhook", `{"payload": {"action": "opened", "issue": {"labels": []}}, "webhook_uid": "` + webhookUID(f.h, "hdr") + `"}`, 200, `"would_trigger":false`},
		{"a hostile payload, kept as data", `{"payload": {"action": "<script>alert(1)</script>", "__proto__": {"x": 1}}}`, 200, `"would_trigger":false`},
		{"not JSON", `{"payload": {"action": `, 400, "not valid JSON"},
		{"both", `{"payload": {}, "delivery_id": "` + f.opened + `"}`, 400, "not both"},
		{"a payload over a webhook's limit", big, 400, "over 262144 bytes, the most a webhook accepts"},
		{"a body far over it, not read", huge, 400, "the request body is over"},
		{"an unknown webhook", `{"payload": {}, "webhook_uid": "wh_nope00000000000000000"}`, 404, "no webhook wh_nope"},
		{"neither", `{}`, 400, "delivery_id is required"},
	} {
		status, body := call(t, f.h, "POST", path, c.body, "Authorization", "Bearer "+adminKey)
		if status != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s, want %d and %q", c.name, status, body, c.status, c.want)
		}
	}
	if after := len(f.h.log(f.tok.uid)); after != before {
		t.Errorf("testing payloads logged %d deliveries", after-before)
	}
}

// testFilterFixture is a factory with two token webhooks, an automation on
// each, and three deliveries to the first: one that matches its filter,
// one that does not, and one rejected.
type testFilterFixture struct {
	h              *harness
	root           string
	tok            hook
	ids            map[string]string // automation name → UID
	opened, closed string
	rejected       string
	auto           func(name, uid, payload string)
}

func testFilterSetUp(t *testing.T) *testFilterFixture {
	h, root := ingressFactory(t)
	ctx := context.Background()
	tok, hdr := h.hook("tok"), h.hook("hdr")
	os.MkdirAll(filepath.Join(root, "automations"), 0o755)
	auto := func(name, uid, payload string) {
		text := "---\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [" + uid + "]\n" + payload + "---\nGo.\n"
		os.WriteFile(filepath.Join(root, "automations", name+".md"), []byte(text), 0o644)
	}
	auto("on-tok", tok.uid, "      payload:\n        action: [opened]\n        issue: {labels: {exists: true}}\n")
	auto("on-hdr", hdr.uid, "")
	st, err := h.c.SyncFactory(ctx, h.status("acme").UID)
	if err != nil || !st.Ready {
		t.Fatalf("sync: %v %+v", err, st)
	}
	f := &testFilterFixture{h: h, root: root, tok: tok, ids: map[string]string{}, auto: auto}
	for _, a := range st.Automations {
		f.ids[a.Name] = a.ID
	}
	bearer := "Bearer " + tok.secret
	f.opened = deliveryID(t, post(t, tok.url, "", `{"action":"opened","issue":{"labels":[]}}`, "Authorization", bearer))
	f.closed = deliveryID(t, post(t, tok.url, "", `{"action":"closed","issue":{}}`, "Authorization", bearer))
	post(t, tok.url, "", `not json`, "Authorization", bearer)
	rejected := h.log(tok.uid)[0]
	if rejected.Label != factory.LabelRejectedJSON {
		t.Fatalf("setup: %+v", rejected.Delivery)
	}
	f.rejected = rejected.ID
	return f
}

func (f *testFilterFixture) test(auto, delivery string) (*factory.TestResult, error) {
	var res factory.TestResult
	err := f.h.c.TestFilter(context.Background(), f.ids[auto], delivery, &res)
	return &res, err
}

// testFilterVerdicts: a matching delivery, a non-matching one with the
// keys that stopped it, and another webhook's delivery.
func testFilterVerdicts(t *testing.T, f *testFilterFixture) {
	res, err := f.test("on-tok", f.opened)
	if err != nil || !res.WouldTrigger || !res.WebhookCheck.Passed || !res.PayloadCheck.Passed || len(res.PayloadCheck.Keys) != 2 ||
		!strings.Contains(res.WebhookCheck.Detail, "which trigger 1 selects") {
		t.Fatalf("a matching delivery: %v %+v", err, res)
	}
	res, err = f.test("on-tok", f.closed)
	if err != nil || res.WouldTrigger || res.PayloadCheck.Passed {
		t.Fatalf("a non-matching delivery: %v %+v", err, res)
	}
	if k := res.PayloadCheck.Keys[0]; k.Path != "/action" || k.Passed || k.Actual != "closed" {
		t.Fatalf("the key that stopped it: %+v", k)
	}
	if k := res.PayloadCheck.Keys[1]; k.Path != "/issue/labels" || k.Passed || k.ActualPresent {
		t.Fatalf("the missing key: %+v", k)
	}
	res, err = f.test("on-hdr", f.opened)
	if err != nil || res.WouldTrigger || res.WebhookCheck.Passed || !strings.Contains(res.WebhookCheck.Detail, "which no trigger selects") {
		t.Fatalf("another webhook's delivery: %v %+v", err, res)
	}
}

// testFilterRefusals: a rejected delivery has no payload to test; unknown
// deliveries and automations are not found.
func testFilterRefusals(t *testing.T, f *testFilterFixture) {
	if _, err := f.test("on-tok", f.rejected); err == nil || client.StatusOf(err) != 409 || !strings.Contains(err.Error(), "no stored payload") {
		t.Fatalf("a rejected delivery: %v", err)
	}
	if _, err := f.test("on-tok", "dlv_nope"); err == nil || client.StatusOf(err) != 404 {
		t.Fatalf("an unknown delivery: %v", err)
	}
	var res2 factory.TestResult
	if err := f.h.c.TestFilter(context.Background(), "au_nope", f.opened, &res2); err == nil || client.StatusOf(err) != 404 {
		t.Fatalf("an unknown automation: %v", err)
	}
}

// testFilterReplay: a dry-run through the server replays recent
// deliveries against a changed filter.
func testFilterReplay(t *testing.T, f *testFilterFixture) {
	ctx := context.Background()
	f.auto("on-tok", f.tok.uid, "      payload:\n        action: [closed]\n")
	c, err := reconciler.Check(ctx, reconciler.DirSource{Root: f.root}, "acme", f.h.c)
	if err != nil {
		t.Fatal(err)
	}
	impacts, err := reconciler.MeasureImpact(c, f.h.c)
	if err != nil || len(impacts) != 1 || impacts[0].Deliveries != 2 || impacts[0].Before != 1 || impacts[0].After != 1 {
		t.Fatalf("impact through the server: %v %+v", err, impacts)
	}
}
