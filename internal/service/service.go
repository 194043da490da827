// Package service is the application layer: the operations on the state
// that both the HTTP API and the command line's local mode offer (secrets,
// webhooks, deliveries, the Test filter action). Each checks its input and
// returns domain errors (factory.Error: EINVALID, ENOTFOUND, ECONFLICT),
// which the HTTP layer maps to problem codes in one place and the command
// line prints as they are.
package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"factory"
	"factory/internal/secrets"
	"factory/internal/store"
	"factory/internal/trigger"
)

// Service runs operations against one store.
type Service struct {
	Store   *store.Store
	Keyring *secrets.Keyring
	// SyncMu, when set, is held around writes that a sync of a factory
	// must not interleave with (a sync may be rotating the same secret).
	SyncMu sync.Locker
	// SecretsChanged, when set, is called after a secret is created or
	// rotated: a server syncs its factories then, so that webhooks waiting
	// for the secret apply, and rotations are in force when the call
	// returns.
	SecretsChanged func(ctx context.Context)
	// Accepted, when set, is handed a delivery accepted by Redeliver, to
	// evaluate it now (as ingress hands over what it accepts).
	Accepted func(store.QueueItem)
	// Files, when set, reads a pull request's changed files from its code
	// host, for Test filter on an automation that filters on paths.
	Files func(ctx context.Context, factoryName string, ev *factory.ProviderEvent) trigger.Files
}

func (s *Service) lock() func() {
	if s.SyncMu == nil {
		return func() {}
	}
	s.SyncMu.Lock()
	return s.SyncMu.Unlock
}

// Secrets lists the managed secrets' metadata, by name; never values.
func (s *Service) Secrets(ctx context.Context) ([]*factory.Secret, error) {
	secs, err := s.Store.Secrets()
	if secs == nil && err == nil {
		secs = []*factory.Secret{}
	}
	return secs, err
}

// CreateSecret creates a secret from value, or generates one when value is
// empty; a generated value is returned, once.
func (s *Service) CreateSecret(ctx context.Context, name string, value []byte, urlSafe bool) (*factory.Secret, []byte, error) {
	return s.putSecret(ctx, func(now time.Time) (*factory.Secret, []byte, error) {
		return secrets.Create(s.Store, s.Keyring, name, value, urlSafe, now)
	})
}

// RotateSecret replaces a secret's value (generated when value is empty).
func (s *Service) RotateSecret(ctx context.Context, name string, value []byte) (*factory.Secret, []byte, error) {
	return s.putSecret(ctx, func(now time.Time) (*factory.Secret, []byte, error) {
		return secrets.Rotate(s.Store, s.Keyring, name, value, now)
	})
}

// putSecret writes a secret under the sync lock, then tells the server.
func (s *Service) putSecret(ctx context.Context, put func(time.Time) (*factory.Secret, []byte, error)) (*factory.Secret, []byte, error) {
	unlock := s.lock()
	sec, gen, err := put(time.Now().UTC())
	unlock()
	if err != nil {
		return nil, nil, secretError(err)
	}
	if s.SecretsChanged != nil {
		s.SecretsChanged(ctx)
	}
	return sec, gen, nil
}

// DeleteSecret deletes a secret no webhook references.
func (s *Service) DeleteSecret(ctx context.Context, name string) error {
	unlock := s.lock()
	defer unlock()
	return secretError(secrets.Delete(s.Store, name))
}

// secretError turns the secrets package's errors into domain errors, with
// the message as it is and without the category's prefix ("invalid: ").
func secretError(err error) error {
	for kind, code := range map[error]string{secrets.ErrInvalid: factory.EINVALID, secrets.ErrNotFound: factory.ENOTFOUND,
		secrets.ErrExists: factory.ECONFLICT, secrets.ErrInUse: factory.ECONFLICT} {
		if errors.Is(err, kind) {
			return &factory.Error{Code: code, Message: strings.TrimPrefix(err.Error(), kind.Error()+": ")}
		}
	}
	return err
}

// Webhook finds a live webhook by UID.
func (s *Service) Webhook(ctx context.Context, uid string) (*factory.Webhook, error) {
	w, err := s.Store.WebhookByUID(uid)
	if errors.Is(err, store.ErrNotFound) || (err == nil && w.DeletedAt != nil) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no webhook %s", uid)
	}
	return w, err
}

// AnyWebhook finds a webhook by UID, deleted ones included: a deleted
// webhook's log stays readable for its retention period.
func (s *Service) AnyWebhook(ctx context.Context, uid string) (*factory.Webhook, error) {
	w, err := s.Store.WebhookByUID(uid)
	if errors.Is(err, store.ErrNotFound) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no webhook %s", uid)
	}
	return w, err
}

// SetSuspended turns a live webhook's suspension on or off.
func (s *Service) SetSuspended(ctx context.Context, uid string, suspended bool) (*factory.Webhook, error) {
	unlock := s.lock()
	w, err := s.Store.SetSuspended(uid, suspended)
	unlock()
	if errors.Is(err, store.ErrNotFound) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no webhook %s", uid)
	}
	return w, err
}

// Deliveries lists a webhook's delivery log, newest first, from before (a
// delivery ID; "" for the newest), at most limit; more says whether older
// ones remain.
func (s *Service) Deliveries(ctx context.Context, uid, before string, limit int) (ds []*factory.Delivery, more bool, err error) {
	if limit < 1 || limit > 500 {
		return nil, false, factory.Errorf(factory.EINVALID, "limit must be a whole number from 1 to 500")
	}
	w, err := s.AnyWebhook(ctx, uid)
	if err != nil {
		return nil, false, err
	}
	ds, more, err = s.Store.Deliveries(w.UID, before, limit)
	if ds == nil && err == nil {
		ds = []*factory.Delivery{}
	}
	return ds, more, err
}

// Delivery reads one delivery of a webhook and, for an accepted one, its
// payload.
func (s *Service) Delivery(ctx context.Context, uid, id string) (*factory.Delivery, []byte, error) {
	w, err := s.AnyWebhook(ctx, uid)
	if err != nil {
		return nil, nil, err
	}
	d, err := s.Store.Delivery(w.UID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, factory.Errorf(factory.ENOTFOUND, "no delivery %s for webhook %s", id, w.UID)
	}
	if err != nil {
		return nil, nil, err
	}
	var payload []byte
	if d.Label == factory.LabelAccepted {
		payload, _ = s.Store.DeliveryPayload(w.UID, d.ID)
	}
	return d, payload, nil
}

// RevealWebhookSecret returns a live webhook's generated secret, once: it
// is marked revealed durably before it is returned, so a crash may lose
// the one showing but can never show it twice. Later calls are conflicts.
func (s *Service) RevealWebhookSecret(ctx context.Context, uid string) ([]byte, error) {
	w, err := s.Webhook(ctx, uid)
	if err != nil {
		return nil, err
	}
	unlock := s.lock() // a sync may be rotating the same secret
	defer unlock()
	sec, err := s.Store.Secret(w.SecretName)
	if err != nil {
		return nil, fmt.Errorf("read secret %s: %w", w.SecretName, err)
	}
	switch {
	case !sec.Generated:
		return nil, factory.Errorf(factory.ECONFLICT, "webhook %s/%s uses secret %q, which was supplied, not generated: it is never revealed", w.Factory, w.Key, sec.Name)
	case sec.Revealed:
		return nil, factory.Errorf(factory.ECONFLICT, "the secret of webhook %s/%s was already revealed; rotate it to get a new one (factory secrets rotate %s, then reveal)", w.Factory, w.Key, sec.Name)
	case sec.Version != w.SecretVersion:
		return nil, factory.Errorf(factory.ECONFLICT, "secret %s was rotated and webhook %s/%s has not synced it yet: sync the factory first", sec.Name, w.Factory, w.Key)
	}
	sealed, err := s.Store.SealedSecret(sec.Name, sec.Version)
	if err != nil {
		return nil, err
	}
	value, err := s.Keyring.Open(sec.Name, sealed)
	if err != nil {
		return nil, err
	}
	cp := *sec
	cp.Revealed = true
	b := s.Store.NewBatch()
	b.PutSecret(&cp, nil)
	if err := b.Commit(); err != nil {
		return nil, err
	}
	return value, nil
}

// FindDelivery finds a delivery by its ID alone, among the webhooks (live
// and deleted) of every factory, with its payload when it was accepted.
func (s *Service) FindDelivery(ctx context.Context, id string) (*factory.Delivery, []byte, error) {
	fs, err := s.Store.Factories()
	if err != nil {
		return nil, nil, err
	}
	for _, f := range fs {
		hooks, err := s.Store.AllWebhooksOf(f.Name)
		if err != nil {
			return nil, nil, err
		}
		for _, w := range hooks {
			d, err := s.Store.Delivery(w.UID, id)
			if err != nil {
				continue
			}
			var payload []byte
			if d.Label == factory.LabelAccepted {
				payload, _ = s.Store.DeliveryPayload(w.UID, d.ID)
			}
			return d, payload, nil
		}
	}
	return nil, nil, factory.Errorf(factory.ENOTFOUND, "no delivery %s", id)
}

// Redeliver accepts an accepted delivery's payload again, as a new
// delivery of the same webhook that is evaluated as if it had just
// arrived: the automations it matches now start runs again. The new
// record names the one it repeats.
func (s *Service) Redeliver(ctx context.Context, id string) (*factory.Delivery, error) {
	d, payload, err := s.FindDelivery(ctx, id)
	if err != nil {
		return nil, err
	}
	if d.Label != factory.LabelAccepted {
		return nil, factory.Errorf(factory.ECONFLICT, "delivery %s was logged %s: only an accepted delivery has a payload to deliver again", d.ID, d.Label)
	}
	w, err := s.Store.WebhookByUID(d.WebhookUID)
	if err != nil {
		return nil, err
	}
	if !w.Active() {
		return nil, factory.Errorf(factory.ECONFLICT, "webhook %s/%s (%s) is deleted, disabled or suspended: a delivery to it would start nothing", w.Factory, w.Key, w.UID)
	}
	now := time.Now().UTC()
	nd := &factory.Delivery{ID: store.NewDeliveryID(now), WebhookUID: w.UID, Label: factory.LabelAccepted, Size: int64(len(payload)),
		Time: now, IdentitySource: "redelivery", Identity: d.ID, ClientAddr: "operator", RedeliveryOf: d.ID, RunIDs: []string{}}
	if err := s.Store.RecordDelivery(nd, payload, nil); err != nil {
		return nil, err
	}
	if s.Accepted != nil {
		s.Accepted(store.QueueItem{DeliveryID: nd.ID, WebhookUID: w.UID})
	}
	return nd, nil
}
