package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"factory"
	"factory/internal/notify"
	"factory/internal/secrets"
	"factory/internal/store"
)

const routeSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestSign: a signature checks with the Standard Webhooks library, and
// does not with another secret, body, ID or time.
func TestSign(t *testing.T) {
	t.Parallel()
	wh, err := standardwebhooks.NewWebhook(routeSecret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"run.succeeded"}`)
	ts := time.Now().Unix()
	h := func(id string, ts int64, sig string) http.Header {
		return http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {itoa(ts)}, "Webhook-Signature": {sig}}
	}
	if err := wh.Verify(body, h("msg_1", ts, notify.Sign([]byte(routeSecret), "msg_1", ts, body))); err != nil {
		t.Fatalf("the library refuses the signature: %v", err)
	}
	for name, hd := range map[string]http.Header{
		"another secret": h("msg_1", ts, notify.Sign([]byte("whsec_"+strings.Repeat("A", 32)), "msg_1", ts, body)),
		"another id":     h("msg_2", ts, notify.Sign([]byte(routeSecret), "msg_1", ts, body)),
		"another time":   h("msg_1", ts+1, notify.Sign([]byte(routeSecret), "msg_1", ts, body)),
	} {
		if wh.Verify(body, hd) == nil {
			t.Errorf("%s: verified", name)
		}
	}
	if wh.Verify([]byte(`{"type":"run.failed"}`), h("msg_1", ts, notify.Sign([]byte(routeSecret), "msg_1", ts, body))) == nil {
		t.Error("another body: verified")
	}
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// TestCheckURL: https goes anywhere public; http only to loopback, and
// only when insecure notifications are allowed; a URL with a password
// never.
func TestCheckURL(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	strict, _ := notify.New(notify.Config{Store: s})
	loose, _ := notify.New(notify.Config{Store: s, AllowInsecure: true})
	for _, c := range []struct {
		url           string
		strict, loose bool
	}{
		{"https://hooks.example.com/x?token=1", true, true},
		{"http://hooks.example.com/x", false, false},
		{"http://127.0.0.1:8080/x", false, true},
		{"http://[::1]:8080/x", false, true},
		{"http://localhost:1/x", false, true},
		{"https://user:pw@hooks.example.com/", false, false},
		{"ftp://hooks.example.com/", false, false},
		{"/relative", false, false},
	} {
		if got := strict.CheckURL(c.url) == nil; got != c.strict {
			t.Errorf("%s: %v, want %v", c.url, got, c.strict)
		}
		if got := loose.CheckURL(c.url) == nil; got != c.loose {
			t.Errorf("%s, insecure allowed: %v, want %v", c.url, got, c.loose)
		}
	}
}

// TestDialPolicy: the addresses a notification may reach, as dialled
// (after DNS): public ones; loopback with insecure notifications; private,
// link-local, CGNAT and unspecified ones only in an allowed range.
func TestDialPolicy(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	n, _ := notify.New(notify.Config{Store: s, AllowInsecure: true, AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}})
	for addr, want := range map[string]bool{
		"93.184.216.34": true, "2606:2800:220:1::": true, "127.0.0.1": true, "::1": true,
		"10.1.2.3": true, "10.2.0.1": false, "192.168.1.1": false, "172.16.0.1": false, "169.254.169.254": false,
		"fe80::1": false, "fd00::1": false, "100.64.0.1": false, "0.0.0.0": false, "::ffff:192.168.1.1": false,
		// Special-purpose IPv4 ranges, and IPv6 addresses that carry a
		// private IPv4 one (NAT64, 6to4, IPv4-compatible): as it.
		"192.0.0.8": false, "198.18.0.1": false, "255.255.255.255": false, "64:ff9b::a9fe:a9fe": false,
		"64:ff9b:1::a00:1": false, "2002:a00:1::": false, "::c0a8:101": false, "64:ff9b::5db8:d822": true,
		"64:ff9b::a01:203": true, // 10.1.2.3, in the allowed range
	} {
		if got := n.CheckAddr(netip.MustParseAddr(addr)) == nil; got != want {
			t.Errorf("%s: %v, want %v", addr, got, want)
		}
	}
	strict, _ := notify.New(notify.Config{Store: s})
	if strict.CheckAddr(netip.MustParseAddr("127.0.0.1")) == nil {
		t.Error("loopback without insecure notifications")
	}
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// receiver is a route's receiver: it answers what answer says, and keeps
// what it was sent.
type receiver struct {
	mu     sync.Mutex
	answer func(n int) int
	got    []sent
	tries  int
}

type sent struct {
	id, typ, run string
	header       http.Header
	body         []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.tries++
	code := 200
	if rc.answer != nil {
		code = rc.answer(rc.tries)
	}
	if code/100 == 2 {
		var e notify.Envelope
		_ = json.Unmarshal(b, &e)
		rc.got = append(rc.got, sent{id: r.Header.Get("webhook-id"), typ: e.Type, run: e.Data.RunID, header: r.Header.Clone(), body: b})
	}
	w.WriteHeader(code)
}

func (rc *receiver) snapshot() []sent {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]sent(nil), rc.got...)
}

// outbox is a store with a factory whose one route posts to a receiver,
// and a notifier over it, started.
func outbox(t *testing.T, rc *receiver, route factory.NotificationRoute) (*store.Store, *notify.Notifier, *factory.Factory) {
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
	if _, _, err := secrets.Create(s, kr, "hooks", []byte(routeSecret), false, time.Now()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	route.URL = srv.URL + "/hooks"
	f := &factory.Factory{Name: "acme", UID: "fc_acme0000000000000000000", Settings: factory.Settings{Notifications: []factory.NotificationRoute{route}}}
	b := s.NewBatch()
	b.PutFactory(f)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	n, err := notify.New(notify.Config{Store: s, Keyring: kr, AllowInsecure: true,
		Retries: []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, n, f
}

// lifecycle writes a run through its states, as the run manager does.
func lifecycle(t *testing.T, s *store.Store, n *notify.Notifier, id, factoryUID string, states ...factory.RunState) {
	t.Helper()
	r := &factory.Run{ID: id, Title: "t", State: factory.StatePending, CreatedAt: time.Now(), UpdatedAt: time.Now(), FactoryUID: factoryUID}
	if err := r.MoveTo(factory.StateQueued); err != nil {
		t.Fatal(err)
	}
	r.ForgetSteps()
	b := s.NewLogBatch()
	b.PutRun(r, nil)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		if _, err := s.UpdateRun(id, true, func(r *factory.Run, _ *store.Batch) error { return r.MoveTo(st) }); err != nil {
			t.Fatal(err)
		}
	}
	n.Wake()
}

// await waits for the receiver to have want deliveries.
func await(t *testing.T, rc *receiver, want int) []sent {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := rc.snapshot()
		if len(got) >= want {
			time.Sleep(100 * time.Millisecond) // and no more come
			return rc.snapshot()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries, want %d", len(got), want)
		}
	}
}
