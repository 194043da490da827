package reconciler_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"factory"

	"factory/internal/reconciler"
)

func TestMeasureImpact(t *testing.T) {
	const uid = "wh_0000000000000000gh01"
	dir := repo(t, map[string]string{
		"webhooks/gh.yaml": "",
		"automations/a.md": fmt.Sprintf(auto2, uid, "[opened]"),
		"automations/b.md": fmt.Sprintf(auto2, uid, "[opened]"),
	})
	a := openApplier(t, t.TempDir())
	defer a.Store.Close()
	b := a.Store.NewBatch()
	b.PinWebhookUID("acme", "gh", uid)
	b.Commit()
	if _, outcome, err := a.Sync(context.Background(), "acme", reconciler.DirSource{Root: dir}); err != nil || outcome != reconciler.Applied {
		t.Fatalf("%v %v", outcome, err)
	}
	for i, action := range []string{"opened", "opened", "opened", "closed", "closed"} {
		d := &factory.Delivery{ID: fmt.Sprintf("dlv_%03d", i), WebhookUID: uid, Label: factory.LabelAccepted, Time: time.Now(), RunIDs: []string{}}
		if err := a.Store.RecordDelivery(d, []byte(`{"action":"`+action+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	a.Store.RecordDelivery(&factory.Delivery{ID: "dlv_900", WebhookUID: uid, Label: factory.LabelRejectedJSON, Time: time.Now()}, nil, nil)

	// a's filter changes; c is new; b is unchanged (not reported).
	os.WriteFile(filepath.Join(dir, "automations", "a.md"), []byte(fmt.Sprintf(auto2, uid, "[closed]")), 0o644)
	os.WriteFile(filepath.Join(dir, "automations", "c.md"), []byte(fmt.Sprintf(auto2, uid, "[opened, closed]")), 0o644)
	c, err := reconciler.Check(context.Background(), reconciler.DirSource{Root: dir}, "acme", a.Store)
	if err != nil {
		t.Fatal(err)
	}
	impacts, err := reconciler.MeasureImpact(c, a.Store)
	if err != nil {
		t.Fatal(err)
	}
	want := []reconciler.Impact{
		{Automation: "a", WebhookUID: uid, Deliveries: 5, Before: 3, After: 2},
		{Automation: "c", WebhookUID: uid, Deliveries: 5, Before: 0, After: 5, New: true},
	}
	if fmt.Sprint(impacts) != fmt.Sprint(want) {
		t.Fatalf("got %+v\nwant %+v", impacts, want)
	}
}

const auto2 = "---\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [%s]\n      payload:\n        action: %s\n---\nGo.\n"

// A provider trigger's change is replayed against the factory's webhooks
// of that provider, each delivery read as the event it was.
func TestMeasureImpactOfProviderTriggers(t *testing.T) {
	const uid = "wh_0000000000000000gh02"
	labeled := "---\ntriggers:\n  - provider: github\n    event: issue_labeled\n    filter:\n      labels: %s\n---\nGo.\n"
	dir := repo(t, map[string]string{
		"webhooks/gh.yaml": "authMode: signature\nsignatureScheme: github\nsecretName: gh\n",
		"automations/a.md": fmt.Sprintf(labeled, "[bug]"),
	})
	a := openApplier(t, t.TempDir())
	defer a.Store.Close()
	if _, err := secretsCreate(a, "gh", "s"); err != nil {
		t.Fatal(err)
	}
	b := a.Store.NewBatch()
	b.PinWebhookUID("acme", "gh", uid)
	b.Commit()
	if _, outcome, err := a.Sync(context.Background(), "acme", reconciler.DirSource{Root: dir}); err != nil || outcome != reconciler.Applied {
		t.Fatalf("%v %v", outcome, err)
	}
	for i, label := range []string{"bug", "bug", "factory-ready", "docs"} {
		d := &factory.Delivery{ID: fmt.Sprintf("dlv_%03d", i), WebhookUID: uid, Label: factory.LabelAccepted, Time: time.Now(), RunIDs: []string{}, EventType: "issues"}
		body := `{"action":"labeled","label":{"name":"` + label + `"},"issue":{"labels":[]},"repository":{"full_name":"acme/w"},"sender":{"login":"o"}}`
		if err := a.Store.RecordDelivery(d, []byte(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	a.Store.RecordDelivery(&factory.Delivery{ID: "dlv_010", WebhookUID: uid, Label: factory.LabelAccepted, Time: time.Now(), EventType: "ping", RunIDs: []string{}},
		[]byte(`{"zen":"x","repository":{"full_name":"acme/w"}}`), nil)
	os.WriteFile(filepath.Join(dir, "automations", "a.md"), []byte(fmt.Sprintf(labeled, "[bug, factory-ready]")), 0o644)
	c, err := reconciler.Check(context.Background(), reconciler.DirSource{Root: dir}, "acme", a.Store)
	if err != nil {
		t.Fatal(err)
	}
	impacts, err := reconciler.MeasureImpact(c, a.Store)
	if err != nil {
		t.Fatal(err)
	}
	want := []reconciler.Impact{{Automation: "a", WebhookUID: uid, Deliveries: 5, Before: 2, After: 3}}
	if fmt.Sprint(impacts) != fmt.Sprint(want) {
		t.Fatalf("got %+v\nwant %+v", impacts, want)
	}
}
