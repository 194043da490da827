// Package ingress is the webhook ingress: POST /webhooks/w/<uid>[/<token>].
// Each request is authenticated, size-limited, rate-limited, parsed as
// JSON, deduplicated, and logged durably, in the order docs/spec/ingress.md fixes;
// an accepted delivery is answered 202 only once it is on disk, queued for
// its automations in the same write.
package ingress

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"factory"
	"factory/internal/budget"
	"factory/internal/problem"
	"factory/internal/secrets"
	"factory/internal/store"
	"factory/internal/tracing"
)

// Identity sources of a delivery (seed-spec §4.3), as the log records them.
const (
	SourceHeader   = "header"
	SourceProvider = "provider"
	SourceXService = "x-service-delivery-id"
	SourceXWarp    = "x-warp-delivery-id"
	SourceBodyHash = "body-hash"
)

// Windows of duplicate detection (docs/spec/ingress.md).
const (
	identityWindow = factory.DeliveryLogAge // identities are remembered as long as the log
	bodyWindow     = 24 * time.Hour         // identical bodies of unsigned-ID schemes
	maxIdentity    = 256                    // bytes of a sender's ID kept in the log
)

// Config sets the ingress up. Zero limits take the seed's values; a
// negative PerMinute disables the delivery rate limit (benchmarks).
type Config struct {
	Store   *store.Store
	Keyring *secrets.Keyring
	Log     *slog.Logger
	Now     func() time.Time

	MaxBody             int64
	PerMinute           int
	FailedAuthPerMinute int
	// RejectedPerMinute bounds the refusals logged per webhook and client
	// (0: factory.RejectedPerMinute; below 0: no bound).
	RejectedPerMinute int
	// Accepted, when set, is handed each accepted delivery once it is on
	// disk (to evaluate it now rather than at the next poll).
	Accepted func(store.QueueItem)
	// Tracer, when set, traces each request (span "ingress"); its trace
	// goes on in the delivery's evaluation (Delivery.Traceparent).
	Tracer *tracing.Tracer
}

// Handler serves webhook ingress.
type Handler struct {
	cfg      Config
	rate     *budget.Window
	failed   *budget.Window
	rejected *budget.Window
	targets  atomic.Pointer[targets]
	mu       sync.Mutex // rebuilding targets
	// stripes serialise requests with the same identity. A request holds
	// its stripe until its write is synced, so an unrelated request that
	// hashes to the same stripe waits a whole sync: with 64 concurrent
	// requests, 256 stripes made one in five wait; 4096 make one in 65.
	stripes [4096]sync.Mutex

	seenMu sync.Mutex // loading or rebuilding the filter
	seen   atomic.Pointer[seenFilter]

	deliveries *prometheus.CounterVec
	throttled  *prometheus.CounterVec
	unlogged   *prometheus.CounterVec
}

// New returns the ingress handler.
func New(cfg Config) *Handler {
	if cfg.MaxBody == 0 {
		cfg.MaxBody = factory.MaxWebhookBodyBytes
	}
	if cfg.PerMinute == 0 {
		cfg.PerMinute = factory.DeliveriesPerMinute
	}
	if cfg.FailedAuthPerMinute == 0 {
		cfg.FailedAuthPerMinute = factory.FailedAuthPerMinute
	}
	if cfg.RejectedPerMinute == 0 {
		cfg.RejectedPerMinute = factory.RejectedPerMinute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg,
		rate:     budget.New(max(cfg.PerMinute, 0), time.Minute),
		failed:   budget.New(cfg.FailedAuthPerMinute, time.Minute),
		rejected: budget.New(max(cfg.RejectedPerMinute, 0), time.Minute),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factory_deliveries_total",
			Help: "Webhook deliveries by webhook UID and log label.",
		}, []string{"webhook", "webhook_name", "label"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factory_deliveries_throttled_total",
			Help: "Webhook requests answered 429, by webhook UID and budget: rate, failed_auth or rejected.",
		}, []string{"webhook", "webhook_name", "budget"}),
		unlogged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factory_deliveries_unlogged_total",
			Help: "Refused webhook requests not logged one by one (the client was over its budget of refusals), by webhook UID and the label they would have had.",
		}, []string{"webhook", "webhook_name", "label"}),
	}
}

// Collectors are the ingress's Prometheus metrics.
func (h *Handler) Collectors() []prometheus.Collector {
	return []prometheus.Collector{h.deliveries, h.throttled, h.unlogged}
}

// target is a webhook as ingress needs it: its record, its secret and
// scheme, resolved once per change of state.
type target struct {
	rec    *factory.Webhook
	name   string // FACTORY/NAME, for metrics and the log
	secret []byte
	scheme Scheme
	// verify authenticates a webhook no file defines (ServeVerified),
	// instead of a secret and a scheme; bodyID is its identity in the body.
	verify Verifier
	bodyID func(body []byte) string
}

// Verifier authenticates a request to a webhook no file defines (a
// factory's Teams bot, docs/spec/talkback.md): "" when it passes, else why not.
type Verifier func(r *http.Request, body []byte) string

type targets struct {
	gen   uint64
	byUID map[string]*target
}

// lookup finds an active webhook. The table is rebuilt whenever the state
// changed (a sync, a suspension, a rotation), so such changes act at once.
func (h *Handler) lookup(uid string) (*target, error) {
	gen := h.cfg.Store.StateWrites()
	if t := h.targets.Load(); t != nil && t.gen == gen {
		return t.byUID[uid], nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.targets.Load(); t != nil && t.gen == gen {
		return t.byUID[uid], nil
	}
	whs, err := h.cfg.Store.AllWebhooks()
	if err != nil {
		return nil, err
	}
	t := &targets{gen: gen, byUID: map[string]*target{}}
	for _, w := range whs {
		if !w.Active() {
			continue // disabled, suspended: 404 like an unknown UID
		}
		tg := &target{rec: w, name: w.Factory + "/" + w.Key, scheme: Schemes[w.Spec.SignatureScheme]}
		if sealed, err := h.cfg.Store.SealedSecret(w.SecretName, w.SecretVersion); err == nil {
			tg.secret, err = h.cfg.Keyring.Open(w.SecretName, sealed)
			if err != nil {
				h.cfg.Log.Error("cannot open a webhook's secret: its requests will be refused", "webhook", w.UID, "err", err)
			}
		}
		t.byUID[w.UID] = tg
	}
	h.targets.Store(t)
	return t.byUID[uid], nil
}

// ServeHTTP answers one delivery attempt.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r, span := h.startSpan(r, r.PathValue("uid"))
	defer span.End()
	if err := h.serve(w, r); err != nil {
		span.Fail(err)
		problem.Write(w, r, err, h.cfg.Log)
	}
}

// startSpan starts a request's span, carried by the request it returns.
func (h *Handler) startSpan(r *http.Request, uid string) (*http.Request, tracing.Span) {
	if h.cfg.Tracer == nil {
		return r, tracing.Span{}
	}
	ctx, span := h.cfg.Tracer.Start(r.Context(), "ingress", tracing.String("factory.webhook.uid", uid),
		tracing.String("http.request.method", r.Method))
	return r.WithContext(ctx), span
}

// traced notes a delivery on its request's span (its ID, its outcome) and
// the span on the delivery (its trace, and where its evaluation goes on).
func (h *Handler) traced(r *http.Request, d *factory.Delivery) {
	if h.cfg.Tracer == nil {
		return
	}
	span := tracing.FromContext(r.Context())
	span.Set(tracing.String("factory.delivery.id", d.ID), tracing.String("factory.delivery.outcome", d.Label))
	if d.Reason != "" {
		span.Set(tracing.String("factory.delivery.reason", d.Reason))
	}
	d.TraceID = span.TraceID()
	if d.Label == factory.LabelAccepted {
		d.Traceparent = span.Traceparent()
	}
}

type request struct {
	h      *Handler
	t      *target
	r      *http.Request
	now    time.Time
	client string
	size   int64
	// budgetKey is the webhook and client, the key of both budgets.
	budgetKey string
}

// reject logs a refused request and returns the error to answer. A client
// over its budget of refusals is answered 429 instead, and the refusal is
// counted, not logged.
func (q *request) reject(label, reason string, err *problem.Error) error {
	if _, wait, ok := q.h.rejected.Reserve(q.budgetKey, q.now); !ok {
		q.h.unlogged.WithLabelValues(q.t.rec.UID, q.t.name, label).Inc()
		return q.h.tooManyRefusals(q.t, wait)
	}
	d := &factory.Delivery{ID: store.NewDeliveryID(q.now), WebhookUID: q.t.rec.UID, Label: label, Size: q.size,
		Time: q.now.UTC(), ClientAddr: q.client, Reason: reason, RunIDs: []string{}}
	q.h.traced(q.r, d)
	if rerr := q.h.cfg.Store.RecordDelivery(d, nil, nil); rerr != nil {
		return rerr
	}
	q.h.deliveries.WithLabelValues(q.t.rec.UID, q.t.name, label).Inc()
	q.h.logOutcome(q.t, d)
	return err
}

// withinBudgets answers 429 to a client over its budget of refusals or of
// failed authentications for this webhook.
func (q *request) withinBudgets() error {
	if wait, full := q.h.rejected.Full(q.budgetKey, q.now); full {
		return q.h.tooManyRefusals(q.t, wait)
	}
	if wait, full := q.h.failed.Full(q.budgetKey, q.now); full {
		return q.h.tooManyFailures(q.t, wait)
	}
	return nil
}

// authFailed logs a failed authentication and answers 401. The budget was
// checked before the body was read, the failure comes after: concurrent
// requests could all pass the check. Taking the slot is atomic, so at most
// the budget's failures are answered 401 (and logged); the rest are
// throttled.
func (q *request) authFailed(reason string) error {
	if _, wait, ok := q.h.failed.Reserve(q.budgetKey, q.now); !ok {
		return q.h.tooManyFailures(q.t, wait)
	}
	return q.reject(factory.LabelRejectedAuth, reason, problem.Errorf(problem.AuthenticationRequired, "authentication failed"))
}

func (h *Handler) tooManyFailures(t *target, wait time.Duration) error {
	h.throttled.WithLabelValues(t.rec.UID, t.name, "failed_auth").Inc()
	return &problem.Error{Code: problem.Unavailable, Message: "too many failed authentications from this address; retry later", RetryAfter: budget.RetryAfter(wait)}
}

func (h *Handler) tooManyRefusals(t *target, wait time.Duration) error {
	h.throttled.WithLabelValues(t.rec.UID, t.name, "rejected").Inc()
	return &problem.Error{Code: problem.Unavailable, Message: "too many refused requests from this address; retry later", RetryAfter: budget.RetryAfter(wait)}
}

// ServeVerified answers a delivery to a webhook no file defines (rec: a
// factory's Teams bot), authenticated by verify, as every delivery is
// answered: budgets, size, rate, JSON, duplicates (by bodyID's identity,
// when it finds one), the durable log and the evaluation queue. A request
// verify refuses is 401 and counts against the failed-authentication budget.
func (h *Handler) ServeVerified(w http.ResponseWriter, r *http.Request, rec *factory.Webhook, verify Verifier, bodyID func([]byte) string) {
	t := &target{rec: rec, name: rec.Factory + "/" + rec.Key, verify: verify, bodyID: bodyID}
	r, span := h.startSpan(r, rec.UID)
	defer span.End()
	if err := h.serveTarget(w, r, t, ""); err != nil {
		span.Fail(err)
		problem.Write(w, r, err, h.cfg.Log)
	}
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) error {
	uid, token := r.PathValue("uid"), r.PathValue("token")
	// 1. Unknown, disabled, suspended or deleted: 404, no log.
	t, err := h.lookup(uid)
	if err != nil {
		return err
	}
	if t == nil || token != "" && t.rec.Spec.AuthMode != factory.AuthURLToken {
		return problem.Errorf(problem.NotFound, "no such webhook")
	}
	return h.serveTarget(w, r, t, token)
}

// serveTarget answers a delivery to a webhook found (steps 2 to 8).
func (h *Handler) serveTarget(w http.ResponseWriter, r *http.Request, t *target, token string) error {
	uid, now := t.rec.UID, h.cfg.Now()
	q := &request{h: h, t: t, r: r, now: now, client: clientAddr(r), size: max(r.ContentLength, 0)}
	q.budgetKey = uid + "|" + q.client

	// 2. The budgets of this webhook and client: failed authentications,
	// and refusals of any kind.
	if err := q.withinBudgets(); err != nil {
		return err
	}
	authFailed := q.authFailed
	tooLarge := func(err error) error {
		if !errors.Is(err, errTooLarge) {
			// The sender went away or sent a broken stream: nothing to log.
			return problem.Errorf(problem.InvalidRequest, "the body could not be read")
		}
		return q.reject(factory.LabelRejectedTooLarge, fmt.Sprintf("body over %d bytes", h.cfg.MaxBody),
			problem.Errorf(problem.TooLarge, fmt.Sprintf("the body is over the %d-byte limit", h.cfg.MaxBody)))
	}

	// 3 and 4. Authentication and size. Tokens are decided from the
	// headers before the body is read; signatures need the body, read
	// within the limit first.
	var body []byte
	var err error
	if t.verify == nil && (t.scheme == nil || !t.scheme.NeedsBody()) {
		if reason := h.authenticate(t, r, token, now); reason != "" {
			return authFailed(reason)
		}
		if body, err = readBody(r, h.cfg.MaxBody); err != nil {
			return tooLarge(err)
		}
	} else {
		if body, err = readBody(r, h.cfg.MaxBody); err != nil {
			return tooLarge(err)
		}
		if reason := h.authenticate(t, r, token, now, body...); reason != "" {
			return authFailed(reason)
		}
	}
	q.size = int64(len(body))

	// 5. The delivery rate of this webhook (accepted and duplicates).
	release, wait, ok := h.rate.Reserve(uid, now)
	if !ok {
		h.throttled.WithLabelValues(uid, t.name, "rate").Inc()
		return &problem.Error{Code: problem.Unavailable, Message: fmt.Sprintf("more than %d deliveries in the last minute", h.cfg.PerMinute), RetryAfter: budget.RetryAfter(wait)}
	}

	// 6. JSON: an object, array or scalar; Content-Type is not enforced.
	// RFC 8259 §8.1: JSON exchanged between systems is UTF-8; a body that
	// is not would be stored and served back as bytes strict clients
	// cannot decode.
	if !validJSON(body) {
		release()
		return q.reject(factory.LabelRejectedJSON, "the body is not valid JSON", problem.Errorf(problem.InvalidRequest, "the body is not valid JSON"))
	}
	if !utf8.Valid(body) {
		release()
		return q.reject(factory.LabelRejectedJSON, "the body is not UTF-8", problem.Errorf(problem.InvalidRequest, "the body is not valid JSON: it is not UTF-8 (RFC 8259)"))
	}

	if answered, err := h.slackVerification(w, t, body); answered {
		return err
	}

	// 7 and 8. Duplicate or accepted.
	return h.record(w, q, body)
}

// slackVerification answers Slack's check of an Events API URL, a signed
// url_verification request, with its challenge; it is no delivery.
func (h *Handler) slackVerification(w http.ResponseWriter, t *target, body []byte) (bool, error) {
	if factory.EventSourceOf(&t.rec.Spec) != factory.ProviderSlack {
		return false, nil
	}
	challenge, ok := slackChallenge(body)
	if !ok {
		return false, nil
	}
	h.cfg.Log.Info("slack url_verification answered", "webhook", t.name, "webhook_uid", t.rec.UID)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	b, _ := json.Marshal(map[string]string{"challenge": challenge})
	_, err := w.Write(b)
	return true, err
}

// slackChallenge reads a Slack url_verification request's challenge.
func slackChallenge(body []byte) (string, bool) {
	var v struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(body, &v) != nil || v.Type != "url_verification" {
		return "", false
	}
	return v.Challenge, true
}

// eventType is the provider's header naming a delivery's event, for the
// providers that name it in a header.
func eventType(spec *factory.WebhookSpec, h http.Header) string {
	switch factory.EventSourceOf(spec) {
	case factory.ProviderGitHub:
		return truncate(h.Get("X-GitHub-Event"), 100)
	case factory.ProviderGitLab:
		return truncate(h.Get("X-Gitlab-Event"), 100)
	}
	return ""
}

// authenticate returns why a request fails authentication, or "".
func (h *Handler) authenticate(t *target, r *http.Request, token string, now time.Time, body ...byte) string {
	if t.verify != nil {
		return t.verify(r, body)
	}
	if t.secret == nil {
		return "the webhook's secret is unavailable"
	}
	switch t.rec.Spec.AuthMode {
	case factory.AuthURLToken:
		if token == "" {
			return "the URL has no token segment"
		}
		if !sameSecret([]byte(token), t.secret) {
			return "the URL token does not match"
		}
	case factory.AuthSignature:
		if t.scheme == nil {
			return "unknown signature scheme"
		}
		if err := t.scheme.Verify(r.Header, body, t.secret, now); err != nil {
			return err.Error()
		}
	default:
		bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || bearer == "" {
			return "no Authorization: Bearer header"
		}
		if !sameSecret([]byte(bearer), t.secret) {
			return "the bearer token does not match"
		}
	}
	return ""
}

// record decides between a duplicate and an acceptance, and writes it.
// Requests with the same identity are serialised (striped locks), so two
// copies arriving together cannot both be accepted.
func (h *Handler) record(w http.ResponseWriter, q *request, body []byte) error {
	t := q.t
	source, ident := identify(t, q.r.Header, body)
	keys := []string{store.IdentityKey(source, ident)}
	windows := []time.Duration{identityWindow}
	if t.scheme != nil && !t.scheme.SignsReplayWindow() && source != SourceBodyHash {
		keys = append(keys, store.IdentityKey(SourceBodyHash, bodyHash(body)))
		windows = append(windows, bodyWindow)
	}
	// The identities as the filter and the stripe locks know them.
	filterKeys := make([]string, len(keys))
	for i, k := range keys {
		filterKeys[i] = t.rec.UID + "/" + k
	}
	for _, m := range h.lock(filterKeys) {
		defer m.Unlock()
	}
	d := &factory.Delivery{ID: store.NewDeliveryID(q.now), WebhookUID: t.rec.UID, Size: q.size, Time: q.now.UTC(),
		IdentitySource: source, Identity: truncate(ident, maxIdentity), ClientAddr: q.client, RunIDs: []string{},
		EventType: eventType(&t.rec.Spec, q.r.Header)}
	filter, err := h.filter()
	if err != nil {
		return err
	}
	for i, k := range keys {
		if !filter.mayContain(filterKeys[i]) {
			continue // certainly new: no store lookup
		}
		prev, seen, err := h.cfg.Store.SeenIdentity(t.rec.UID, k, q.now.Add(-windows[i]), q.now)
		if err != nil {
			return err
		}
		if seen {
			d.Label, d.DuplicateOf = factory.LabelDuplicate, prev
			h.traced(q.r, d)
			if err := h.cfg.Store.RecordDelivery(d, nil, nil); err != nil {
				return err
			}
			h.deliveries.WithLabelValues(t.rec.UID, t.name, d.Label).Inc()
			h.logOutcome(t, d)
			duplicate(w, d.ID, prev)
			return nil
		}
	}
	d.Label = factory.LabelAccepted
	h.traced(q.r, d)
	if err := h.cfg.Store.RecordDelivery(d, body, keys); err != nil {
		return err
	}
	full := false
	for _, k := range filterKeys {
		full = filter.add(k) || full
	}
	if full {
		go h.rebuildFilter(filter)
	}
	h.deliveries.WithLabelValues(t.rec.UID, t.name, d.Label).Inc()
	h.logOutcome(t, d)
	accepted(w, d.ID)
	if h.cfg.Accepted != nil {
		h.cfg.Accepted(store.QueueItem{DeliveryID: d.ID, WebhookUID: t.rec.UID})
	}
	return nil
}

// accepted answers 202 {"delivery_id"}; IDs need no JSON escaping.
func accepted(w http.ResponseWriter, id string) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusAccepted)
	b := make([]byte, 0, 64)
	b = append(b, `{"delivery_id":"`...)
	b = append(b, id...)
	w.Write(append(b, "\"}\n"...))
}

// duplicate answers a duplicate as an acceptance (202: the sender must not
// retry) that says what it is: {"delivery_id", "duplicate": true,
// "duplicate_of"}.
func duplicate(w http.ResponseWriter, id, of string) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, "{\"delivery_id\":\"%s\",\"duplicate\":true,\"duplicate_of\":\"%s\"}\n", id, of)
}

// logOutcome writes the server log's line for a delivery the log keeps.
func (h *Handler) logOutcome(t *target, d *factory.Delivery) {
	attrs := []slog.Attr{slog.String("webhook", t.name), slog.String("webhook_uid", t.rec.UID),
		slog.String("label", d.Label), slog.String("delivery", d.ID), slog.String("client", d.ClientAddr)}
	switch {
	case d.DuplicateOf != "":
		attrs = append(attrs, slog.String("duplicate_of", d.DuplicateOf))
	case d.Reason != "":
		attrs = append(attrs, slog.String("reason", d.Reason))
	}
	if d.TraceID != "" {
		attrs = append(attrs, slog.String("trace_id", d.TraceID))
	}
	level := slog.LevelInfo
	if d.Label != factory.LabelAccepted && d.Label != factory.LabelDuplicate {
		level = slog.LevelWarn
	}
	h.cfg.Log.LogAttrs(context.Background(), level, "delivery", attrs...)
}

var jsonContentType = []string{"application/json"}

// filter returns the identity filter, loading it from the store once.
func (h *Handler) filter() (*seenFilter, error) {
	if f := h.seen.Load(); f != nil {
		return f, nil
	}
	h.seenMu.Lock()
	defer h.seenMu.Unlock()
	if f := h.seen.Load(); f != nil {
		return f, nil
	}
	f, err := h.loadFilter(1 << 20)
	if err != nil {
		return nil, err
	}
	h.seen.Store(f)
	return f, nil
}

func (h *Handler) loadFilter(capacity int) (*seenFilter, error) {
	var keys []string
	if err := h.cfg.Store.IdentityKeys(func(k string) { keys = append(keys, k) }); err != nil {
		return nil, err
	}
	f := newSeenFilter(max(capacity, 4*len(keys)))
	for _, k := range keys {
		f.add(k)
	}
	return f, nil
}

// rebuildFilter replaces a filter that outgrew its capacity with a larger
// one loaded from the store. It holds every stripe while it loads, so no
// delivery is between its write and its addition to the filter: the new
// filter misses no key.
func (h *Handler) rebuildFilter(old *seenFilter) {
	h.seenMu.Lock()
	defer h.seenMu.Unlock()
	if h.seen.Load() != old {
		return
	}
	for i := range h.stripes {
		h.stripes[i].Lock()
	}
	defer func() {
		for i := range h.stripes {
			h.stripes[i].Unlock()
		}
	}()
	f, err := h.loadFilter(4 * int(old.limit))
	if err != nil {
		h.cfg.Log.Error("rebuilding the delivery identity filter; keeping the old one", "err", err)
		return
	}
	h.seen.Store(f)
}

// lock takes the stripe locks of identities ("<webhook uid>/<key>"),
// hashed as the identity filter hashes them.
func (h *Handler) lock(keys []string) []*sync.Mutex {
	idx := make([]int, 0, len(keys))
	for _, k := range keys {
		a, _ := hashes(k)
		i := int(a % uint64(len(h.stripes)))
		dup := false
		for _, j := range idx {
			dup = dup || j == i
		}
		if !dup {
			idx = append(idx, i)
		}
	}
	// Always in index order: two requests never wait on each other in a cycle.
	if len(idx) == 2 && idx[0] > idx[1] {
		idx[0], idx[1] = idx[1], idx[0]
	}
	out := make([]*sync.Mutex, 0, len(idx))
	for _, i := range idx {
		h.stripes[i].Lock()
		out = append(out, &h.stripes[i])
	}
	return out
}

// identify picks a delivery's identity: the first present of the webhook's
// deliveryIdHeader, the scheme's delivery header (or, for a scheme that
// carries it there, the payload's ID), X-Warp-Delivery-Id and its older
// name X-Service-Delivery-Id, and the SHA-256 of the body (seed-spec §4.3,
// docs/spec/v1alpha1.md).
func identify(t *target, h http.Header, body []byte) (source, value string) {
	if name := t.rec.Spec.DeliveryIDHeader; name != "" {
		if v := h.Get(name); v != "" {
			return SourceHeader, v
		}
	}
	if t.bodyID != nil {
		if v := t.bodyID(body); v != "" {
			return SourceProvider, v
		}
	}
	if t.scheme != nil {
		if v := t.scheme.DeliveryID(h); v != "" {
			return SourceProvider, v
		}
		if b, ok := t.scheme.(bodyIdentified); ok {
			if v := b.BodyDeliveryID(body); v != "" {
				return SourceProvider, v
			}
		}
	}
	if v := h.Get("X-Warp-Delivery-Id"); v != "" {
		return SourceXWarp, v
	}
	if v := h.Get("X-Service-Delivery-Id"); v != "" {
		return SourceXService, v
	}
	return SourceBodyHash, bodyHash(body)
}

func bodyHash(body []byte) string {
	s := sha256.Sum256(body)
	return hex.EncodeToString(s[:])
}

var errTooLarge = errors.New("body too large")

// readBody reads at most limit bytes, refusing a larger body by its
// Content-Length before reading and by counting while reading: never more
// than limit+1 bytes are read.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errTooLarge
	}
	if r.ContentLength >= 0 {
		// The usual case: one allocation of the announced size, and one
		// byte more to see that the body does not run past it.
		b := make([]byte, r.ContentLength+1)
		n, err := io.ReadFull(r.Body, b)
		switch {
		case err == io.ErrUnexpectedEOF || err == io.EOF:
			return b[:n], nil // net/http ends the body at Content-Length
		case err != nil:
			return nil, err
		}
		// More than announced: net/http does not allow that, but be sure.
		return nil, errTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
