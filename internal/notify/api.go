package notify

import (
	"errors"
	"fmt"
	"time"

	"factory"
	"factory/internal/secrets"
	"factory/internal/store"
)

// route finds a factory's route by name.
func (n *Notifier) route(factoryUID, name string) (route, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if gen := n.cfg.Store.StateWrites(); gen != n.gen || n.routes == nil {
		n.routes, n.gen = n.loadRoutes(), gen
	}
	for _, rt := range n.routes[factoryUID] {
		if rt.name == name {
			return rt, true
		}
	}
	return route{}, false
}

// routeSecret is the name of a route's signing secret: its secretName,
// else the one generated for it (made now when it is not yet).
func (n *Notifier) routeSecret(factoryUID, name string) (string, error) {
	rt, ok := n.route(factoryUID, name)
	if !ok {
		return "", fmt.Errorf("%w: factory %s has no notification route %s (any more)", errRefused, factoryUID, name)
	}
	if rt.secretName != "" {
		return rt.secretName, nil
	}
	gen := factory.NotificationSecretName(rt.factoryName, rt.name)
	n.secretMu.Lock()
	defer n.secretMu.Unlock()
	if _, err := n.cfg.Store.Secret(gen); err == nil {
		return gen, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	now := time.Now().UTC()
	value := secrets.NewStandardWebhooksSecret()
	sec := &factory.Secret{Name: gen, Version: 1, Generated: true, Format: factory.SchemeStandardWebhooks, URLSafe: secrets.URLSafe(value),
		CreatedAt: now, RotatedAt: now}
	sealed, err := n.cfg.Keyring.Seal(gen, value)
	if err != nil {
		return "", err
	}
	b := n.cfg.Store.NewBatch()
	b.PutSecret(sec, sealed)
	return gen, b.Commit()
}

func (n *Notifier) value(name string) ([]byte, error) {
	v, err := secrets.Current(n.cfg.Store, n.cfg.Keyring, name)
	if err != nil {
		return nil, fmt.Errorf("the route's secret: %w", err)
	}
	return v, nil
}

// RevealSecret returns the secret generated for a factory's route that
// names none, once (made now if no event has needed it yet): it is marked
// revealed durably before it is returned; later calls are conflicts.
func (n *Notifier) RevealSecret(f *factory.Factory, name string) ([]byte, error) {
	rt, ok := n.route(f.UID, name)
	if !ok {
		return nil, factory.Errorf(factory.ENOTFOUND, "factory %s has no notification route %s", f.Name, name)
	}
	if rt.secretName != "" {
		return nil, factory.Errorf(factory.ECONFLICT, "route %s is signed with secret %q, which was supplied, not generated: it is never revealed", name, rt.secretName)
	}
	gen, err := n.routeSecret(f.UID, name)
	if err != nil {
		return nil, err
	}
	n.secretMu.Lock()
	defer n.secretMu.Unlock()
	sec, err := n.cfg.Store.Secret(gen)
	if err != nil {
		return nil, err
	}
	if sec.Revealed {
		return nil, factory.Errorf(factory.ECONFLICT, "the secret of route %s was already revealed; rotate it to get a new one (factory secrets rotate %s, then reveal)", name, gen)
	}
	v, err := n.value(gen)
	if err != nil {
		return nil, err
	}
	cp := *sec
	cp.Revealed = true
	b := n.cfg.Store.NewBatch()
	b.PutSecret(&cp, nil)
	return v, b.Commit()
}

// SealRunSecret seals a run's webhook secret, to keep with the run.
func (n *Notifier) SealRunSecret(runID string, secret []byte) ([]byte, error) {
	return n.cfg.Keyring.Seal(RunSecretName(runID), secret)
}

// Deliveries lists notifications newest first, from before on: of one
// route when route is set (a factory's route's name, or run:<run id>),
// of one factory when factoryUID is.
func (n *Notifier) Deliveries(route, factoryUID, before string, limit int) ([]*factory.Notification, bool, error) {
	return n.cfg.Store.Notifications(func(nt *factory.Notification) bool {
		return (route == "" || nt.Route == route) && (factoryUID == "" || nt.FactoryUID == factoryUID)
	}, before, limit)
}

// Delivery reads one notification.
func (n *Notifier) Delivery(id string) (*factory.Notification, error) {
	nt, err := n.cfg.Store.Notification(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no notification delivery %s", id)
	}
	return nt, err
}

// Redeliver sends a notification again: a new delivery of the same
// message (its webhook-id and body), due now; a route its receiver had
// disabled is enabled again.
func (n *Notifier) Redeliver(id string) (*factory.Notification, error) {
	old, err := n.cfg.Store.Notification(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no notification delivery %s", id)
	}
	if err != nil {
		return nil, err
	}
	body, err := n.cfg.Store.NotificationBody(id)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	nt := &factory.Notification{ID: NewID(now), Route: old.Route, FactoryUID: old.FactoryUID, RunID: old.RunID, Type: old.Type, URL: old.URL,
		CreatedAt: now, Status: factory.NotificationPending, NextAt: &now, RedeliveryOf: old.ID, MessageID: old.MessageID}
	b := n.cfg.Store.NewLogBatch()
	b.PutNotification(nt, body)
	b.EnableRoute(nt.RouteKey())
	if err := b.Commit(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	delete(n.disabled, nt.RouteKey())
	n.mu.Unlock()
	n.Wake()
	return nt, nil
}
