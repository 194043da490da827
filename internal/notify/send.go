package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"factory"
	"factory/internal/store"
)

// attemptTimeout bounds one delivery attempt.
const attemptTimeout = 15 * time.Second

// Run sends the outbox's due notifications until ctx ends, then waits for
// the attempts in flight: the first pending notification of each route and
// run at a time (the next goes once it is delivered or given up on).
func (n *Notifier) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		wait := n.dispatch(ctx, &wg)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-n.wake:
		case <-timer.C:
		}
		timer.Stop()
		// Changes come in bursts: let them gather.
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dispatch starts an attempt of every due head of the outbox that has
// room, and says how long until the next one is due (at most a minute).
func (n *Notifier) dispatch(ctx context.Context, wg *sync.WaitGroup) time.Duration {
	now := time.Now()
	wait := time.Minute
	err := n.cfg.Store.PendingHeads(func(id string) error {
		nt, err := n.cfg.Store.Notification(id)
		if err != nil {
			return nil // swept or being written: the next scan sees it
		}
		group := nt.RouteKey() + "/" + nt.RunID
		n.mu.Lock()
		defer n.mu.Unlock()
		switch {
		case n.inflight[group]:
		case nt.NextAt != nil && nt.NextAt.After(now):
			wait = min(wait, nt.NextAt.Sub(now))
		case len(n.inflight) < n.cfg.Parallel:
			n.inflight[group] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.attempt(ctx, nt)
				n.mu.Lock()
				delete(n.inflight, group)
				n.mu.Unlock()
				n.Wake()
			}()
		}
		return nil
	})
	if err != nil {
		n.cfg.Log.Error("reading the notification outbox", "err", err)
	}
	return max(wait, 10*time.Millisecond)
}

// Outcomes of an attempt, beside a status code.
var (
	errRefused = errors.New("refused by this server's policy")
)

// attempt posts a notification once and records how it went.
func (n *Notifier) attempt(ctx context.Context, nt *factory.Notification) {
	code, err := n.post(ctx, nt)
	now := time.Now().UTC()
	nt.Attempts++
	nt.LastAt, nt.LastStatus, nt.LastError = &now, code, ""
	if err != nil {
		nt.LastError = err.Error()
	}
	b := n.cfg.Store.NewLogBatch()
	switch {
	case err == nil && code/100 == 2:
		nt.Status, nt.NextAt, nt.DeliveredAt = factory.NotificationDelivered, nil, &now
	case err == nil && code == http.StatusGone:
		n.disable(b, nt, now)
	case errors.Is(err, errRefused) || nt.Attempts > len(n.cfg.Retries):
		nt.Status, nt.NextAt = factory.NotificationFailed, nil
		n.cfg.Log.Warn("a run-status notification was given up", "id", nt.ID, "route", nt.Route, "run", nt.RunID, "status", code, "err", err)
	default:
		next := now.Add(jitter(n.cfg.Retries[nt.Attempts-1]))
		nt.NextAt = &next
	}
	b.UpdateNotification(nt)
	if err := b.Commit(); err != nil {
		n.cfg.Log.Error("recording a notification's attempt", "id", nt.ID, "err", err)
	}
}

// disable records that a route's receiver wants no more (410): the route
// is off at its URL, and its pending notifications are dropped.
func (n *Notifier) disable(b *store.Batch, nt *factory.Notification, now time.Time) {
	nt.Status, nt.NextAt = factory.NotificationDisabled, nil
	key := nt.RouteKey()
	b.DisableRoute(key, nt.URL, now)
	n.mu.Lock()
	n.disabled[key] = store.DisabledRoute{URL: nt.URL, At: now}
	n.mu.Unlock()
	ids, _ := n.cfg.Store.PendingOf(key)
	for _, id := range ids {
		if other, err := n.cfg.Store.Notification(id); err == nil && other.ID != nt.ID {
			other.Status, other.NextAt = factory.NotificationDisabled, nil
			b.UpdateNotification(other)
		}
	}
	n.cfg.Log.Warn("a notification route was disabled by its receiver (410 Gone)", "route", nt.Route, "url", redact(nt.URL))
}

// jitter stretches a wait by up to a tenth.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

// post sends one attempt: the body, signed now.
func (n *Notifier) post(ctx context.Context, nt *factory.Notification) (int, error) {
	if err := n.CheckURL(nt.URL); err != nil {
		return 0, err
	}
	body, err := n.cfg.Store.NotificationBody(nt.ID)
	if err != nil {
		return 0, fmt.Errorf("the notification's body: %w", err)
	}
	secret, err := n.secretOf(nt)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, nt.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errRefused, err)
	}
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "factory-notifications/1")
	req.Header.Set("webhook-id", nt.MessageID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(secret, nt.MessageID, ts, body))
	resp, err := n.client.Do(req)
	if err != nil {
		if errors.Is(err, errRefused) {
			return 0, err
		}
		return 0, fmt.Errorf("POST %s: %w", redact(nt.URL), unwrapURL(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Sign is Standard Webhooks' signature of a message: v1, then the base64
// HMAC-SHA256 of "<id>.<timestamp>.<body>" with the secret's key (the
// base64 after whsec_; a secret without the prefix is its own bytes).
func Sign(secret []byte, msgID string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, SigningKey(secret))
	m.Write([]byte(msgID + "." + strconv.FormatInt(ts, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SigningKey is the key of a Standard Webhooks secret.
func SigningKey(secret []byte) []byte {
	if rest, ok := bytes.CutPrefix(bytes.TrimSpace(secret), []byte("whsec_")); ok {
		if k, err := base64.StdEncoding.DecodeString(string(rest)); err == nil {
			return k
		}
	}
	return secret
}

// CheckURL says whether a route's URL may be posted to: https, or http to
// loopback when insecure notifications are allowed; never with a user or
// password in it.
func (n *Notifier) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: %q is not an absolute URL", errRefused, raw)
	}
	if u.User != nil {
		return fmt.Errorf("%w: the URL carries a user or password", errRefused)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if n.cfg.AllowInsecure && isLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%w: http is allowed to loopback only, when the server runs with --allow-insecure-notifications", errRefused)
	}
	return fmt.Errorf("%w: %s is not https", errRefused, u.Scheme)
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// httpClient dials public addresses only, unless allowed: loopback with
// insecure notifications, private and link-local ranges listed in
// AllowedNetworks. The address is checked as dialled, after DNS, so a
// name cannot resolve into the control plane's network. No proxy, no
// redirects.
func (n *Notifier) httpClient() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", errRefused, address)
		}
		return n.CheckAddr(ap.Addr().Unmap())
	}}
	tr := &http.Transport{DialContext: d.DialContext, Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: attemptTimeout}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// CheckAddr says whether an address may be dialled.
func (n *Notifier) CheckAddr(a netip.Addr) error {
	a = a.Unmap()
	for _, p := range n.cfg.AllowedNetworks {
		if p.Contains(a) {
			return nil
		}
	}
	switch {
	case a.IsLoopback():
		if n.cfg.AllowInsecure {
			return nil
		}
		return fmt.Errorf("%w: %s is a loopback address (allowed with --allow-insecure-notifications)", errRefused, a)
	case a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() || a.IsMulticast() || special(a):
		return fmt.Errorf("%w: %s is a private, link-local or special-purpose address (allow its range in notifications.allowedNetworks)", errRefused, a)
	}
	if v4, ok := embeddedIPv4(a); ok {
		// An IPv6 address that carries an IPv4 one (NAT64, 6to4,
		// IPv4-compatible) reaches that address: it is judged as it.
		return n.CheckAddr(v4)
	}
	return nil
}

// specialRanges are IPv4 ranges of no public host beside those netip names:
// shared address space (carrier-grade NAT), IETF protocol assignments,
// benchmarking, and the limited broadcast address.
var specialRanges = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("255.255.255.255/32")}

func special(a netip.Addr) bool {
	for _, p := range specialRanges {
		if p.Contains(a.Unmap()) {
			return true
		}
	}
	return false
}

// IPv6 prefixes whose addresses embed an IPv4 address in their last four
// bytes (NAT64 well-known and local-use, IPv4-compatible), and 6to4's in
// bytes 2-5.
var (
	nat64     = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48"), netip.MustParsePrefix("::/96")}
	sixToFour = netip.MustParsePrefix("2002::/16")
)

func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || a.Is4In6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	for _, p := range nat64 {
		if p.Contains(a) {
			return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
		}
	}
	if sixToFour.Contains(a) {
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// redact keeps a URL's query (it may carry a token) out of errors.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the route's URL"
	}
	u.RawQuery, u.User = "", nil
	return u.String()
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// secretOf is the secret a notification is signed with: its route's
// managed secret (generated for a route that names none), or its run's own
// webhook's.
func (n *Notifier) secretOf(nt *factory.Notification) ([]byte, error) {
	if strings.HasPrefix(nt.Route, "run:") {
		r, err := n.cfg.Store.Run(nt.RunID)
		if err != nil || r.Webhook == nil {
			return nil, fmt.Errorf("%w: run %s has no webhook secret", errRefused, nt.RunID)
		}
		return n.cfg.Keyring.Open(RunSecretName(nt.RunID), r.Webhook.Sealed)
	}
	name, err := n.routeSecret(nt.FactoryUID, nt.Route)
	if err != nil {
		return nil, err
	}
	return n.value(name)
}

// RunSecretName is the name a run's webhook secret is sealed under.
func RunSecretName(runID string) string { return "run-webhook/" + runID }
