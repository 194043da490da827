package store

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"factory"
)

func TestDeliveryEncodingMatchesJSON(t *testing.T) {
	now := time.Date(2026, 11, 22, 1, 2, 3, 4500, time.UTC)
	cases := []*factory.Delivery{
		{ID: "dlv_1", WebhookUID: "wh_1", Label: factory.LabelAccepted, Size: 1024, Time: now, IdentitySource: "header", Identity: "abc", ClientAddr: "127.0.0.1", RunIDs: []string{}},
		{ID: "dlv_2", WebhookUID: "wh_1", Label: factory.LabelRejectedAuth, Time: now.Truncate(time.Second), ClientAddr: "::1", Reason: `bad "token" <x> & y`},
		{ID: "dlv_3", WebhookUID: "wh_1", Label: factory.LabelDuplicate, Time: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), DuplicateOf: "dlv_1", RedeliveryOf: "dlv_0\u2028<x>", RunIDs: []string{"run_a", "run_b"}},
		{Identity: "tab\there\nnew\r\x00\x1f\x7f\b\f\\ \u2028 \u2029 é 日本 \xff\xfe bad", Time: now.In(time.FixedZone("X", 3600))},
		{},
		{ID: "dlv_4", RunIDs: []string{"run_c"}, EventType: "issues<>", Outcome: "a GitHub ping & more",
			Event: &factory.ProviderEvent{Provider: "github", Event: "issue_labeled", Repository: "acme/w", Where: "acme/w", Link: "https://x/<1>",
				Fields: map[string][]string{"labels": {"bug", "b&c"}, "repos": {"acme/w"}}}},
		{ID: "dlv_5", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	for i, d := range cases {
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendDelivery(nil, d); !bytes.Equal(got, want) {
			t.Errorf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func FuzzDeliveryEncoding(f *testing.F) {
	f.Add("dlv_1", "x-service-delivery-id", "a<b>&\"c\\", "1.2.3.4", int64(5), int64(1700000000123456789))
	f.Add("\xff", "\u2028", "\x00\x01", "", int64(-1), int64(0))
	f.Fuzz(func(t *testing.T, id, source, ident, addr string, size, ns int64) {
		d := &factory.Delivery{ID: id, WebhookUID: source, Label: ident, Size: size, Time: time.Unix(0, ns).UTC(),
			IdentitySource: source, Identity: ident, ClientAddr: addr, Reason: ident, DuplicateOf: id, RedeliveryOf: addr, RunIDs: []string{ident, id},
			EventType: source, Outcome: addr, TraceID: ident, Traceparent: source}
		want, err := json.Marshal(d)
		if err != nil {
			return // times json refuses (years outside 0-9999) never occur in records
		}
		if got := appendDelivery(nil, d); !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}
