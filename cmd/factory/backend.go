package main

import (
	"context"
	"fmt"
	"sort"

	"factory"
	"factory/client"
	"factory/internal/service"
)

// backend is what commands that read or change the state talk to: the
// store itself (local), or the server that holds it or that --server names
// (remote). A command does not know which; both answer with the domain's
// records and errors whose message is for the user.
type backend interface {
	Statuses(ctx context.Context) ([]*factory.FactoryStatus, error)
	Secrets(ctx context.Context) ([]*factory.Secret, error)
	CreateSecret(ctx context.Context, name string, value []byte, urlSafe bool) (*factory.Secret, []byte, error)
	RotateSecret(ctx context.Context, name string, value []byte) (*factory.Secret, []byte, error)
	DeleteSecret(ctx context.Context, name string) error
	RevealWebhookSecret(ctx context.Context, uid string) ([]byte, error)
	SetSuspended(ctx context.Context, uid string, suspended bool) error
	Deliveries(ctx context.Context, uid string, limit int) ([]*factory.Delivery, error)
	TestFilter(ctx context.Context, automationUID, deliveryID string) (*factory.TestResult, error)
	FindDelivery(ctx context.Context, id string) (*factory.DeliveryView, error)
	Redeliver(ctx context.Context, id string) (string, error)
	APIKeys(ctx context.Context) ([]*factory.APIKey, error)
	CreateAPIKey(ctx context.Context, req factory.APIKeyRequest) (*factory.NewAPIKey, error)
	RevokeAPIKey(ctx context.Context, key string) (*factory.APIKey, error)
	// Live reports whether a change is in force when its call returns: a
	// server syncs its factories at once, a store at the next sync.
	Live() bool
	Close()
}

// backend opens the backend of a command: --server, or the server that
// holds the store; else the store, opened for writing. Only a command that
// creates something (create) may create the store; the others say where
// they looked.
func (a *app) backend(create bool) (backend, error) {
	if c := a.remote(); c != nil {
		return remoteBackend{c}, nil
	}
	if !create && !a.storeExists() {
		return nil, a.noStore()
	}
	s, err := a.openStore()
	if err != nil {
		return nil, err
	}
	return &localBackend{app: a, svc: &service.Service{Store: s}}, nil
}

// withBackend runs fn with a backend that must exist, and closes it.
func (a *app) withBackend(fn func(b backend) error) error { return a.withBackendOr(false, fn) }

// withBackendOr is withBackend for a command that may create the store.
func (a *app) withBackendOr(create bool, fn func(b backend) error) error {
	b, err := a.backend(create)
	if err != nil {
		return err
	}
	defer b.Close()
	return fn(b)
}

// localBackend runs the service on the store; the keyring is loaded only
// by the calls that need it.
type localBackend struct {
	app *app
	svc *service.Service
}

func (l *localBackend) Close()     { l.svc.Store.Close() }
func (l *localBackend) Live() bool { return false }

func (l *localBackend) keyring() error {
	if l.svc.Keyring != nil {
		return nil
	}
	kr, err := l.app.keyring(l.svc.Store)
	l.svc.Keyring = kr
	return err
}

func (l *localBackend) Statuses(ctx context.Context) ([]*factory.FactoryStatus, error) {
	return localView{l.svc.Store}.Statuses(ctx)
}

func (l *localBackend) Secrets(ctx context.Context) ([]*factory.Secret, error) {
	return l.svc.Secrets(ctx)
}

func (l *localBackend) CreateSecret(ctx context.Context, name string, value []byte, urlSafe bool) (*factory.Secret, []byte, error) {
	if err := l.keyring(); err != nil {
		return nil, nil, err
	}
	return l.svc.CreateSecret(ctx, name, value, urlSafe)
}

func (l *localBackend) RotateSecret(ctx context.Context, name string, value []byte) (*factory.Secret, []byte, error) {
	if err := l.keyring(); err != nil {
		return nil, nil, err
	}
	return l.svc.RotateSecret(ctx, name, value)
}

func (l *localBackend) DeleteSecret(ctx context.Context, name string) error {
	return l.svc.DeleteSecret(ctx, name)
}

func (l *localBackend) RevealWebhookSecret(ctx context.Context, uid string) ([]byte, error) {
	if err := l.keyring(); err != nil {
		return nil, err
	}
	return l.svc.RevealWebhookSecret(ctx, uid)
}

func (l *localBackend) SetSuspended(ctx context.Context, uid string, suspended bool) error {
	_, err := l.svc.SetSuspended(ctx, uid, suspended)
	return err
}

func (l *localBackend) Deliveries(ctx context.Context, uid string, limit int) ([]*factory.Delivery, error) {
	ds, _, err := l.svc.Deliveries(ctx, uid, "", limit)
	return ds, err
}

func (l *localBackend) TestFilter(ctx context.Context, automationUID, deliveryID string) (*factory.TestResult, error) {
	return l.svc.TestFilter(ctx, automationUID, deliveryID)
}

func (l *localBackend) FindDelivery(ctx context.Context, id string) (*factory.DeliveryView, error) {
	d, payload, err := l.svc.FindDelivery(ctx, id)
	if err != nil {
		return nil, err
	}
	return &factory.DeliveryView{Delivery: *d, Payload: payload}, nil
}

// Redeliver queues the delivery in the store; a server evaluates it when
// it starts (it reads the stored queue then).
func (l *localBackend) Redeliver(ctx context.Context, id string) (string, error) {
	d, err := l.svc.Redeliver(ctx, id)
	if err != nil {
		return "", err
	}
	return d.ID, nil
}

func (l *localBackend) APIKeys(ctx context.Context) ([]*factory.APIKey, error) {
	return l.svc.APIKeys(ctx)
}

func (l *localBackend) CreateAPIKey(ctx context.Context, req factory.APIKeyRequest) (*factory.NewAPIKey, error) {
	return l.svc.CreateAPIKey(ctx, req)
}

func (l *localBackend) RevokeAPIKey(ctx context.Context, key string) (*factory.APIKey, error) {
	return l.svc.RevokeAPIKey(ctx, key)
}

// remoteBackend calls a server's API. A problem the server answers
// becomes an error with its detail as the message.
type remoteBackend struct{ c *client.Client }

func (r remoteBackend) Close()     {}
func (r remoteBackend) Live() bool { return true }

func (r remoteBackend) Statuses(ctx context.Context) ([]*factory.FactoryStatus, error) {
	return remoteView{r.c}.Statuses(ctx)
}

func (r remoteBackend) Secrets(ctx context.Context) ([]*factory.Secret, error) {
	secs, err := r.c.Secrets(ctx)
	return secs, apiError(err)
}

func (r remoteBackend) CreateSecret(ctx context.Context, name string, value []byte, urlSafe bool) (*factory.Secret, []byte, error) {
	out, err := r.c.CreateSecret(ctx, name, value, urlSafe)
	if err != nil {
		return nil, nil, apiError(err)
	}
	return out.Secret, []byte(out.Value), nil
}

func (r remoteBackend) RotateSecret(ctx context.Context, name string, value []byte) (*factory.Secret, []byte, error) {
	out, err := r.c.RotateSecret(ctx, name, value)
	if err != nil {
		return nil, nil, apiError(err)
	}
	return out.Secret, []byte(out.Value), nil
}

func (r remoteBackend) DeleteSecret(ctx context.Context, name string) error {
	return apiError(r.c.DeleteSecret(ctx, name))
}

func (r remoteBackend) RevealWebhookSecret(ctx context.Context, uid string) ([]byte, error) {
	v, err := r.c.RevealSecret(ctx, uid)
	return []byte(v), apiError(err)
}

func (r remoteBackend) SetSuspended(ctx context.Context, uid string, suspended bool) error {
	_, err := r.c.SetSuspended(ctx, uid, suspended)
	return apiError(err)
}

func (r remoteBackend) Deliveries(ctx context.Context, uid string, limit int) ([]*factory.Delivery, error) {
	list, _, err := r.c.Deliveries(ctx, uid, limit, "")
	if err != nil {
		return nil, apiError(err)
	}
	ds := make([]*factory.Delivery, len(list))
	for i := range list {
		ds[i] = &list[i].Delivery
	}
	return ds, nil
}

func (r remoteBackend) TestFilter(ctx context.Context, automationUID, deliveryID string) (*factory.TestResult, error) {
	var res factory.TestResult
	if err := r.c.TestFilter(ctx, automationUID, deliveryID, &res); err != nil {
		return nil, apiError(err)
	}
	return &res, nil
}

func (r remoteBackend) FindDelivery(ctx context.Context, id string) (*factory.DeliveryView, error) {
	d, err := r.c.FindDelivery(ctx, id)
	return d, apiError(err)
}

func (r remoteBackend) Redeliver(ctx context.Context, id string) (string, error) {
	nid, err := r.c.Redeliver(ctx, id)
	return nid, apiError(err)
}

func (r remoteBackend) APIKeys(ctx context.Context) ([]*factory.APIKey, error) {
	keys, err := r.c.APIKeys(ctx)
	return keys, apiError(err)
}

func (r remoteBackend) CreateAPIKey(ctx context.Context, req factory.APIKeyRequest) (*factory.NewAPIKey, error) {
	k, err := r.c.CreateAPIKeyWith(ctx, req)
	return k, apiError(err)
}

func (r remoteBackend) RevokeAPIKey(ctx context.Context, key string) (*factory.APIKey, error) {
	k, err := r.c.RevokeAPIKey(ctx, key)
	return k, apiError(err)
}

// resolved is a webhook or automation found by name: its UID and its
// FACTORY/NAME.
type resolved struct{ uid, name string }

// resolveWebhook finds a live webhook by NAME, FACTORY/NAME or UID. An
// unknown UID is taken as it is: a deleted webhook's log stays readable.
func resolveWebhook(ctx context.Context, b backend, arg string) (resolved, error) {
	return resolve(ctx, b, "webhook", arg, func(st *factory.FactoryStatus) []resolved {
		var out []resolved
		for _, w := range st.Webhooks {
			out = append(out, resolved{w.UID, st.Name + "/" + w.Name})
		}
		return out
	}, func(uid string) bool { return factory.ValidUID(factory.PrefixWebhook, uid) })
}

// resolveAutomation finds an automation by NAME, FACTORY/NAME or UID.
func resolveAutomation(ctx context.Context, b backend, arg string) (resolved, error) {
	return resolve(ctx, b, "automation", arg, func(st *factory.FactoryStatus) []resolved {
		var out []resolved
		for _, au := range st.Automations {
			out = append(out, resolved{au.ID, st.Name + "/" + au.Name})
		}
		return out
	}, func(string) bool { return false })
}

func resolve(ctx context.Context, b backend, kind, arg string, list func(*factory.FactoryStatus) []resolved, keepUnknown func(string) bool) (resolved, error) {
	sts, err := b.Statuses(ctx)
	if err != nil {
		return resolved{}, err
	}
	fac, name := splitName(arg)
	var found []resolved
	for _, st := range sts {
		for _, r := range list(st) {
			if r.uid == arg || r.name == st.Name+"/"+name && (fac == "" || st.Name == fac) {
				found = append(found, r)
			}
		}
	}
	switch len(found) {
	case 0:
		if keepUnknown(arg) {
			return resolved{arg, arg}, nil
		}
		return resolved{}, fmt.Errorf("no %s %q (factory status lists them)", kind, arg)
	case 1:
		return found[0], nil
	}
	var names []string
	for _, r := range found {
		names = append(names, r.name)
	}
	sort.Strings(names)
	return resolved{}, fmt.Errorf("%q is ambiguous: say which factory: %v", arg, names)
}

var (
	_ backend = (*localBackend)(nil)
	_ backend = remoteBackend{}
)
