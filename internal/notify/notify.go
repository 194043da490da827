// Package notify sends runs' run-status events to webhooks
// (docs/spec/talkback.md, Run-status webhooks): the routes of factory.yaml's
// notifications and a run's own webhook. Each event is written to a
// durable outbox in the batch of the run's change it announces (so a crash
// loses none), then posted, signed with Standard Webhooks, at least once,
// in order per run and route, with retries over about a day; a 2xx ends a
// delivery, a 410 disables the route. The outbox is the delivery log.
package notify

import (
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"factory"
	"factory/internal/secrets"
	"factory/internal/store"
)

// DefaultRetries are the waits between a delivery's attempts (5 s, 5 min,
// 30 min, 2 h, 5 h, 10 h: seven attempts over about 17.5 hours), each
// stretched by up to a tenth at random.
var DefaultRetries = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour}

// Config sets a Notifier up.
type Config struct {
	Store   *store.Store
	Keyring *secrets.Keyring
	Log     *slog.Logger
	// AllowInsecure lets events go over http to loopback
	// (--allow-insecure-notifications); AllowedNetworks are the private
	// and link-local ranges they may reach. Everything else must be
	// https to a public address.
	AllowInsecure   bool
	AllowedNetworks []netip.Prefix
	// Retries are the waits between attempts (DefaultRetries when nil).
	Retries []time.Duration
	// Parallel bounds the deliveries in flight (default 8).
	Parallel int
}

// Notifier is the outbox and its sender.
type Notifier struct {
	cfg    Config
	client *http.Client

	mu       sync.Mutex
	gen      uint64
	routes   map[string][]route // by factory UID
	disabled map[string]store.DisabledRoute
	inflight map[string]bool // route and run groups being sent
	secretMu sync.Mutex      // generating a route's secret

	wake chan struct{}
}

// route is one place a run's events go.
type route struct {
	key, name, factoryUID, factoryName, url string
	events                                  []string // nil: every event
	automations                             []string // automation UIDs; nil: every run
	secretName                              string
}

func (rt *route) wants(typ string, automationID string) bool {
	return (rt.events == nil || slices.Contains(rt.events, typ)) &&
		(rt.automations == nil || slices.Contains(rt.automations, automationID))
}

// New is a Notifier over a store; it adds its outbox to every run's write
// (store.OnRunWrite). Start its sender with Run.
func New(cfg Config) (*Notifier, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Retries == nil {
		cfg.Retries = DefaultRetries
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	off, err := cfg.Store.DisabledRoutes()
	if err != nil {
		return nil, err
	}
	n := &Notifier{cfg: cfg, disabled: off, inflight: map[string]bool{}, wake: make(chan struct{}, 1)}
	n.client = n.httpClient()
	cfg.Store.OnRunWrite(n.stage)
	return n, nil
}

// Wake tells the sender that the outbox may have something due.
func (n *Notifier) Wake() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Envelope is a notification's body (the Standard Webhooks shape): the
// event's type, when it happened, and the run as the API shows it.
type Envelope struct {
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Data      factory.RunItem `json:"data"`
}

// stage writes the events of a run's change to the outbox, in the run's
// batch: one notification per event and route that wants it.
func (n *Notifier) stage(b *store.Batch, r, prev *factory.Run) {
	types := eventTypes(r, prev)
	if len(types) == 0 {
		return
	}
	routes := n.routesOf(r)
	if len(routes) == 0 {
		return
	}
	now := time.Now().UTC()
	for _, typ := range types {
		body, _ := json.Marshal(Envelope{Type: typ, Timestamp: now, Data: r.Item()})
		for _, rt := range routes {
			if !rt.wants(typ, r.AutomationID) {
				continue
			}
			id := NewID(now)
			b.PutNotification(&factory.Notification{ID: id, Route: rt.name, FactoryUID: rt.factoryUID, RunID: r.ID, Type: typ, URL: rt.url,
				CreatedAt: now, Status: factory.NotificationPending, NextAt: &now, MessageID: id}, body)
		}
	}
}

// eventTypes are the events of a run's change: run.created for a new run
// (and its end, when it is refused at once), else the event of its new
// state, if it has one.
func eventTypes(r, prev *factory.Run) []string {
	if prev == nil {
		out := []string{factory.RunCreated}
		if r.State.Terminal() {
			out = append(out, factory.RunEventType(factory.StateQueued, r.State, false))
		}
		return out
	}
	if t := factory.RunEventType(prev.State, r.State, false); t != "" {
		return []string{t}
	}
	return nil
}

// routesOf are the routes a run's events go to: its factory's, and its
// own webhook; none that a receiver disabled at their URL.
func (n *Notifier) routesOf(r *factory.Run) []route {
	n.mu.Lock()
	defer n.mu.Unlock()
	if gen := n.cfg.Store.StateWrites(); gen != n.gen || n.routes == nil {
		n.routes, n.gen = n.loadRoutes(), gen
	}
	var out []route
	for _, rt := range n.routes[r.FactoryUID] {
		if !n.off(rt) {
			out = append(out, rt)
		}
	}
	if w := r.Webhook; w != nil && w.URL != "" {
		rt := route{key: factory.RunRoute(r.ID), name: factory.RunRoute(r.ID), factoryUID: r.FactoryUID, url: w.URL}
		if !n.off(rt) {
			out = append(out, rt)
		}
	}
	return out
}

// off reports whether a route's receiver disabled it at its URL; n.mu is
// held.
func (n *Notifier) off(rt route) bool {
	d, ok := n.disabled[rt.key]
	return ok && d.URL == rt.url
}

// loadRoutes reads every factory's routes, with the UIDs of the
// automations they name; n.mu is held.
func (n *Notifier) loadRoutes() map[string][]route {
	out := map[string][]route{}
	fs, err := n.cfg.Store.Factories()
	if err != nil {
		n.cfg.Log.Error("reading the factories' notification routes", "err", err)
		return out
	}
	for _, f := range fs {
		if len(f.Settings.Notifications) == 0 {
			continue
		}
		uids := map[string]string{}
		if autos, err := n.cfg.Store.Automations(f.Name); err == nil {
			for _, a := range autos {
				uids[a.Key] = a.UID
			}
		}
		for _, nr := range f.Settings.Notifications {
			rt := route{key: factory.RouteKey(f.UID, nr.Name), name: nr.Name, factoryUID: f.UID, factoryName: f.Name, url: nr.URL,
				events: nr.Events, secretName: nr.SecretName}
			for _, a := range nr.Automations {
				rt.automations = append(rt.automations, uids[a])
			}
			out[f.UID] = append(out[f.UID], rt)
		}
	}
	return out
}

var lastID atomic.Int64

// NewID is a notification's ID ("msg_" + its time, made unique in this
// process, + 80 random bits): IDs sort in the order notifications were
// made, and are Standard Webhooks' message IDs.
func NewID(now time.Time) string {
	t := now.UnixNano()
	for {
		prev := lastID.Load()
		if t <= prev {
			t = prev + 1
		}
		if lastID.CompareAndSwap(prev, t) {
			break
		}
	}
	var head [8]byte
	binary.BigEndian.PutUint64(head[:], uint64(t))
	return factory.MintID("msg_", head[:], 10)
}
