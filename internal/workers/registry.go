package workers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"factory"
	"factory/internal/store"
	"factory/internal/worker"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Registry creates, lists and revokes workers: a store record with the
// password's hash, and the worker's own queue.
type Registry struct {
	Store *store.Store
	JS    jetstream.JetStream
	URL   string // the NATS URL workers connect to
	// Connected says whether a worker has a connection now; Activity is
	// what the control plane heard of each.
	Connected func(name string) bool
	Activity  func() map[string]Activity
	// External is a NATS cluster of its own (serve --nats): its operator
	// makes the workers' users; a worker here is its queue and record.
	External bool
	// Disconnect closes a worker's connections now (the embedded
	// server's), when revoked.
	Disconnect func(name string)
}

// Allowed says whether what comes in a worker's name (a claim, an event)
// is taken: it is registered and not revoked.
func (g *Registry) Allowed(name string) bool {
	w, err := g.Store.Worker(name)
	return err == nil && w.RevokedAt == nil
}

// Lookup is Accounts.Worker over the store.
func (g *Registry) Lookup(name string) ([]byte, bool) {
	w, err := g.Store.Worker(name)
	if err != nil || w.RevokedAt != nil {
		return nil, false
	}
	return w.PasswordHash, true
}

// ByNkey is Accounts.WorkerByNkey over the store.
func (g *Registry) ByNkey(publicKey string) (string, bool) {
	ws, err := g.Store.Workers()
	if err != nil {
		return "", false
	}
	for _, w := range ws {
		if w.Nkey != "" && w.RevokedAt == nil && subtle.ConstantTimeCompare([]byte(w.Nkey), []byte(publicKey)) == 1 {
			return w.Name, true
		}
	}
	return "", false
}

// AuthNkey makes a worker that signs in with an nkey (its seed in the
// credentials) instead of a password.
const AuthNkey = "nkey"

// Create registers a worker and returns its credentials, once: a password,
// or with auth AuthNkey an nkey seed.
func (g *Registry) Create(ctx context.Context, name, auth string) (*CredentialsFile, error) {
	if p := worker.IDProblem(name); p != "" {
		return nil, factory.Errorf(factory.EINVALID, "%s", p)
	}
	if w, err := g.Store.Worker(name); err == nil && w.RevokedAt == nil {
		return nil, factory.Errorf(factory.ECONFLICT, "worker %s exists: revoke it first to make new credentials", name)
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if auth != "" && auth != AuthNkey && auth != "password" {
		return nil, factory.Errorf(factory.EINVALID, "auth %q: password (the default) or nkey", auth)
	}
	if err := AddWorker(ctx, g.JS, name); err != nil {
		return nil, fmt.Errorf("the worker's queue: %w", err)
	}
	out := &CredentialsFile{Credentials: Credentials{User: name}, URL: g.URL}
	rec := &store.WorkerRecord{Name: name, CreatedAt: time.Now().UTC()}
	switch {
	case g.External:
		p := WorkerPermissions(name)
		out.Permissions = &p
	case auth == AuthNkey:
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, err
		}
		seed, _ := kp.Seed()
		rec.Nkey, _ = kp.PublicKey()
		out.NkeySeed = string(seed)
	default:
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return nil, err
		}
		out.Password = base64.RawURLEncoding.EncodeToString(raw)
		sum := sha256.Sum256([]byte(out.Password))
		rec.PasswordHash = sum[:]
	}
	b := g.Store.NewBatch()
	b.PutWorker(rec)
	if err := b.Commit(); err != nil {
		return nil, err
	}
	return out, nil
}

// WorkerInfo is a worker as workers list shows it.
type WorkerInfo struct {
	Name          string     `json:"name"`
	CreatedAt     time.Time  `json:"created_at"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	Connected     bool       `json:"connected"`
	RunsActive    int        `json:"runs_active"`
	LastHeartbeat *time.Time `json:"last_heartbeat,omitempty"`
}

// List lists the workers.
func (g *Registry) List(ctx context.Context) ([]WorkerInfo, error) {
	ws, err := g.Store.Workers()
	if err != nil {
		return nil, err
	}
	var act map[string]Activity
	if g.Activity != nil {
		act = g.Activity()
	}
	out := make([]WorkerInfo, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		out[i] = WorkerInfo{Name: w.Name, CreatedAt: w.CreatedAt, RevokedAt: w.RevokedAt}
		if a, ok := act[w.Name]; ok {
			out[i].RunsActive, out[i].LastHeartbeat = a.RunsActive, &a.LastSeen
		}
		if g.Connected != nil {
			// A presence check may wait for an answer: all at once.
			wg.Go(func() { out[i].Connected = g.Connected(w.Name) })
		}
	}
	wg.Wait()
	return out, nil
}

// Revoke refuses a worker: its connections to the embedded server are
// closed at once and its next ones refused; its claims and events are
// refused from then on, whatever connection they come through (on a
// cluster of one's own, remove its user there too).
func (g *Registry) Revoke(ctx context.Context, name string) error {
	w, err := g.Store.Worker(name)
	if errors.Is(err, store.ErrNotFound) {
		return factory.Errorf(factory.ENOTFOUND, "no worker %s", name)
	}
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	w.RevokedAt = &now
	b := g.Store.NewBatch()
	b.PutWorker(w)
	if err := b.Commit(); err != nil {
		return err
	}
	if g.Disconnect != nil {
		g.Disconnect(name)
	}
	return nil
}
