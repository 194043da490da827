package service_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/problem"
	"factory/internal/secrets"
	"factory/internal/service"
	"factory/internal/store"
)

func newService(t *testing.T) *service.Service {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	kr, err := secrets.LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &service.Service{Store: s, Keyring: kr}
}

// code asserts a domain error's code, and that the HTTP layer maps it to
// the status the API has always answered.
func code(t *testing.T, what string, err error, want string, status int) {
	t.Helper()
	if got := factory.ErrorCode(err); got != want {
		t.Errorf("%s: code %q (%v), want %q", what, got, err, want)
		return
	}
	if p := problem.Of(err); p == nil || problem.Status(p.Code) != status {
		t.Errorf("%s: maps to %+v, want status %d", what, p, status)
	}
}

func TestSecretsErrors(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	_, gen, err := svc.CreateSecret(ctx, "tok", nil, false)
	if err != nil || len(gen) == 0 {
		t.Fatalf("create: %v", err)
	}
	_, _, err = svc.CreateSecret(ctx, "tok", nil, false)
	code(t, "create twice", err, factory.ECONFLICT, http.StatusConflict)
	if err != nil && !strings.HasPrefix(err.Error(), `secret "tok" exists`) {
		t.Errorf("the message keeps no category prefix: %q", err)
	}
	_, _, err = svc.CreateSecret(ctx, "Not A Name", nil, false)
	code(t, "bad name", err, factory.EINVALID, http.StatusBadRequest)
	_, _, err = svc.RotateSecret(ctx, "nope", nil)
	code(t, "rotate a missing secret", err, factory.ENOTFOUND, http.StatusNotFound)
	code(t, "delete a missing secret", svc.DeleteSecret(ctx, "nope"), factory.ENOTFOUND, http.StatusNotFound)
	if err := svc.DeleteSecret(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	if secs, err := svc.Secrets(ctx); err != nil || secs == nil || len(secs) != 0 {
		t.Fatalf("an empty list is empty, not nil: %v %v", secs, err)
	}
}

func TestWebhooksAndDeliveries(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	const uid = "wh_0000000000000000sv01"
	sec, _, err := svc.CreateSecret(ctx, "webhook-f-w", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	// A generated secret of a webhook, as the reconciler makes it.
	sec.Generated = true
	b := svc.Store.NewBatch()
	b.PutSecret(sec, nil)
	b.PutFactory(&factory.Factory{Name: "f", UID: "fc_0000000000000000sv01"})
	b.PutWebhook(&factory.Webhook{Factory: "f", Key: "w", UID: uid, SecretName: sec.Name, SecretVersion: sec.Version,
		Spec: factory.WebhookSpec{Name: "w", AuthMode: factory.AuthToken, Enabled: true}})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if v, err := svc.RevealWebhookSecret(ctx, uid); err != nil || len(v) == 0 {
		t.Fatalf("reveal: %v", err)
	}
	_, err = svc.RevealWebhookSecret(ctx, uid)
	code(t, "reveal twice", err, factory.ECONFLICT, http.StatusConflict)
	_, err = svc.RevealWebhookSecret(ctx, "wh_0000000000000000none")
	code(t, "reveal of an unknown webhook", err, factory.ENOTFOUND, http.StatusNotFound)
	w, err := svc.SetSuspended(ctx, uid, true)
	if err != nil || !w.Suspended || w.Active() {
		t.Fatalf("suspend: %+v %v", w, err)
	}
	_, err = svc.SetSuspended(ctx, "wh_0000000000000000none", true)
	code(t, "suspend an unknown webhook", err, factory.ENOTFOUND, http.StatusNotFound)
	d := &factory.Delivery{ID: store.NewDeliveryID(time.Now()), WebhookUID: uid, Label: factory.LabelAccepted, Time: time.Now()}
	if err := svc.Store.RecordDelivery(d, []byte(`{"a":1}`), nil); err != nil {
		t.Fatal(err)
	}
	ds, more, err := svc.Deliveries(ctx, uid, "", 10)
	if err != nil || more || len(ds) != 1 || ds[0].ID != d.ID {
		t.Fatalf("deliveries: %v %v %v", ds, more, err)
	}
	_, _, err = svc.Deliveries(ctx, uid, "", 501)
	code(t, "a limit over 500", err, factory.EINVALID, http.StatusBadRequest)
	if _, p, err := svc.Delivery(ctx, uid, d.ID); err != nil || string(p) != `{"a":1}` {
		t.Fatalf("delivery: %q %v", p, err)
	}
	_, _, err = svc.Delivery(ctx, uid, "dlv_nope")
	code(t, "an unknown delivery", err, factory.ENOTFOUND, http.StatusNotFound)
	_, err = svc.TestFilter(ctx, "au_nope", d.ID)
	code(t, "Test filter of an unknown automation", err, factory.ENOTFOUND, http.StatusNotFound)
	_, err = svc.TestFilter(ctx, "au_nope", "")
	code(t, "Test filter without a delivery", err, factory.EINVALID, http.StatusBadRequest)
}

func TestInternalErrorsStayInternal(t *testing.T) {
	if p := problem.Of(errors.New("disk on fire")); p != nil {
		t.Fatalf("a plain error maps to %+v: its text must not reach the caller", p)
	}
	if p := problem.Of(factory.Errorf(factory.EINTERNAL, "disk on fire")); p != nil {
		t.Fatalf("an internal domain error maps to %+v", p)
	}
}

func TestRedeliver(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	const uid = "wh_0000000000000000sv02"
	b := svc.Store.NewBatch()
	b.PutFactory(&factory.Factory{Name: "f", UID: "fc_0000000000000000sv02"})
	b.PutWebhook(&factory.Webhook{Factory: "f", Key: "w", UID: uid, Spec: factory.WebhookSpec{Name: "w", AuthMode: factory.AuthToken, Enabled: true}})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	ok := &factory.Delivery{ID: store.NewDeliveryID(time.Now()), WebhookUID: uid, Label: factory.LabelAccepted, Time: time.Now()}
	bad := &factory.Delivery{ID: store.NewDeliveryID(time.Now()), WebhookUID: uid, Label: factory.LabelRejectedJSON, Time: time.Now()}
	for _, d := range []*factory.Delivery{ok, bad} {
		if err := svc.Store.RecordDelivery(d, []byte(`{"a":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	var handed []string
	svc.Accepted = func(it store.QueueItem) { handed = append(handed, it.DeliveryID) }
	nd, err := svc.Redeliver(ctx, ok.ID)
	if err != nil || nd.RedeliveryOf != ok.ID || nd.ID == ok.ID || len(handed) != 1 || handed[0] != nd.ID {
		t.Fatalf("redeliver: %+v %v, handed %v", nd, err, handed)
	}
	if queued, _ := svc.Store.IsQueued(nd.ID); !queued {
		t.Fatal("the new delivery is not queued for evaluation")
	}
	if _, p, err := svc.FindDelivery(ctx, nd.ID); err != nil || string(p) != `{"a":1}` {
		t.Fatalf("the new delivery's payload: %q %v", p, err)
	}
	_, err = svc.Redeliver(ctx, bad.ID)
	code(t, "redeliver a rejected delivery", err, factory.ECONFLICT, http.StatusConflict)
	_, err = svc.Redeliver(ctx, "dlv_nope")
	code(t, "redeliver an unknown delivery", err, factory.ENOTFOUND, http.StatusNotFound)
	if _, err := svc.SetSuspended(ctx, uid, true); err != nil {
		t.Fatal(err)
	}
	_, err = svc.Redeliver(ctx, ok.ID)
	code(t, "redeliver to a suspended webhook", err, factory.ECONFLICT, http.StatusConflict)
}
