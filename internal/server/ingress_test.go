package server_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"factory"

	"factory/client"
	"factory/internal/reconciler"
	"factory/internal/server"
)

// ingressFactory is a factory directory with one webhook of each kind the
// tests need, served without a watcher (tests sync explicitly).
func ingressFactory(t *testing.T) (*harness, string) {
	t.Helper()
	root := t.TempDir()
	write := func(name, body string) {
		os.MkdirAll(filepath.Join(root, "webhooks"), 0o755)
		if err := os.WriteFile(filepath.Join(root, "webhooks", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tok.yaml", "authMode: token\n")
	write("url.yaml", "authMode: url_token\n")
	write("hdr.yaml", "authMode: token\ndeliveryIdHeader: X-Event-Id\n")
	h := start(t, server.FactorySource{Name: "acme", Source: reconciler.DirSource{Root: root}, Interval: time.Hour})
	// A GitHub webhook needs its provider secret first.
	if _, err := h.c.CreateSecret(context.Background(), "gh-secret", []byte("gh-signing-secret"), false); err != nil {
		t.Fatal(err)
	}
	write("gh.yaml", "authMode: signature\nsignatureScheme: github\nsecretName: gh-secret\n")
	st := h.status("acme")
	if _, err := h.c.SyncFactory(context.Background(), st.UID); err != nil {
		t.Fatal(err)
	}
	return h, root
}

type hook struct {
	url, secret, uid string
}

func (h *harness) hook(name string) hook {
	h.t.Helper()
	for _, w := range h.status("acme").Webhooks {
		if w.Name == name {
			secret := ""
			if w.AuthMode != "signature" {
				var err error
				if secret, err = h.c.RevealSecret(context.Background(), w.UID); err != nil {
					h.t.Fatalf("reveal %s: %v", name, err)
				}
			}
			return hook{url: strings.Replace(w.IngressURL, "{token}", secret, 1), secret: secret, uid: w.UID}
		}
	}
	h.t.Fatalf("no webhook %s", name)
	return hook{}
}

type answer struct {
	status int
	header http.Header
	body   string
}

// post sends a delivery, from a chosen loopback address when from is set.
func post(t *testing.T, url, from, body string, headers ...string) answer {
	t.Helper()
	tr := &http.Transport{}
	if from != "" {
		tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func deliveryID(t *testing.T, a answer) string {
	t.Helper()
	if a.status != http.StatusAccepted || !strings.HasPrefix(a.body, `{"delivery_id":"dlv_`) {
		t.Fatalf("not a 202 with a delivery_id: %d %s", a.status, a.body)
	}
	return strings.Split(a.body, `"`)[3]
}

func (h *harness) log(uid string) []client.Delivery {
	h.t.Helper()
	ds, _, err := h.c.Deliveries(context.Background(), uid, 500, "")
	if err != nil {
		h.t.Fatal(err)
	}
	return ds
}

func TestIngressStatusesAndLabels(t *testing.T) {
	h, _ := ingressFactory(t)
	tok := h.hook("tok")
	bearer := "Bearer " + tok.secret

	cases := []struct {
		name   string
		url    string
		body   string
		hdrs   []string
		status int
		label  string // "" when nothing is logged
	}{
		{"unknown webhook", h.url + "/webhooks/w/wh_00000000000000000000", `{}`, nil, 404, ""},
		{"no credential", tok.url, `{}`, nil, 401, factory.LabelRejectedAuth},
		{"wrong token", tok.url, `{}`, []string{"Authorization", "Bearer nope"}, 401, factory.LabelRejectedAuth},
		{"too large", tok.url, `"` + strings.Repeat("x", 256<<10) + `"`, []string{"Authorization", bearer}, 413, factory.LabelRejectedTooLarge},
		{"not JSON", tok.url, `{"a":`, []string{"Authorization", bearer}, 400, factory.LabelRejectedJSON},
		{"accepted object", tok.url, `{"action":"opened"}`, []string{"Authorization", bearer}, 202, factory.LabelAccepted},
		{"accepted scalar", tok.url, `42`, []string{"Authorization", bearer}, 202, factory.LabelAccepted},
		{"duplicate", tok.url, `42`, []string{"Authorization", bearer}, 202, factory.LabelDuplicate},
		{"token segment on a token webhook", tok.url + "/" + tok.secret, `{}`, []string{"Authorization", bearer}, 404, ""},
	}
	for _, c := range cases {
		before := len(h.log(tok.uid))
		a := post(t, c.url, "", c.body, c.hdrs...)
		if a.status != c.status {
			t.Fatalf("%s: status %d, want %d (%s)", c.name, a.status, c.status, a.body)
		}
		if a.status >= 400 && a.header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s: not a problem body: %s", c.name, a.header.Get("Content-Type"))
		}
		log := h.log(tok.uid)
		if c.label == "" {
			if len(log) != before {
				t.Fatalf("%s: logged, but should not be", c.name)
			}
			continue
		}
		if len(log) != before+1 || log[0].Label != c.label {
			t.Fatalf("%s: log %d→%d, newest %+v, want label %q", c.name, before, len(log), log[0].Delivery, c.label)
		}
		if log[0].ClientAddr != "127.0.0.1" || log[0].Time.IsZero() {
			t.Fatalf("%s: record %+v", c.name, log[0].Delivery)
		}
	}

	// Only POST: 405 with Allow.
	resp, err := http.Get(tok.url)
	if err != nil || resp.StatusCode != 405 || !strings.Contains(resp.Header.Get("Allow"), "POST") {
		t.Fatalf("GET: %v %v %v", err, resp.StatusCode, resp.Header.Get("Allow"))
	}
	resp.Body.Close()

	// The API shows the stored payload as JSON (the store keeps it byte for
	// byte: FuzzBodyPath); rejected records keep none.
	body := "{\"b\" : [1, 2.50, \"\\u00e9\"]}\n"
	id := deliveryID(t, post(t, tok.url, "", body, "Authorization", bearer))
	d, err := h.c.Delivery(context.Background(), tok.uid, id)
	if err != nil || string(d.Payload) != `{"b":[1,2.50,"\u00e9"]}` || d.Size != int64(len(body)) || d.IdentitySource != "body-hash" {
		t.Fatalf("payload: %v %q %+v", err, d.Payload, d.Delivery)
	}
	for _, rec := range h.log(tok.uid) {
		if rec.Label != factory.LabelAccepted {
			if full, _ := h.c.Delivery(context.Background(), tok.uid, rec.ID); len(full.Payload) != 0 {
				t.Fatalf("a %s record kept a payload", rec.Label)
			}
		}
	}

	// url_token: the token is the URL's last segment.
	u := h.hook("url")
	deliveryID(t, post(t, u.url, "", `{}`))
	if a := post(t, strings.TrimSuffix(u.url, u.secret)+"wrong-token", "", `{}`); a.status != 401 {
		t.Fatalf("a wrong URL token: %d", a.status)
	}
	if a := post(t, strings.TrimSuffix(u.url, "/"+u.secret), "", `{}`); a.status != 401 {
		t.Fatalf("no URL token: %d", a.status)
	}
}

func ghSign(body string) string {
	m := hmac.New(sha256.New, []byte("gh-signing-secret"))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// TestLinearReplays: Linear signs the body, whose webhookTimestamp alone
// dates it; its delivery ID is a header no signature covers. The attack: a
// signed body without webhookTimestamp was accepted, and could be replayed
// under new Linear-Delivery IDs for ever. Now such a body is refused, and a
// dated one replayed under a new ID is a duplicate.
func TestLinearReplays(t *testing.T) {
	h, root := ingressFactory(t)
	if _, err := h.c.CreateSecret(context.Background(), "ln-secret", []byte("linear-signing-secret"), false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "webhooks", "linear.yaml"), []byte("authMode: signature\nsignatureScheme: linear\nsecretName: ln-secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.SyncFactory(context.Background(), h.status("acme").UID); err != nil {
		t.Fatal(err)
	}
	ln := h.hook("linear")
	sign := func(body string) string {
		m := hmac.New(sha256.New, []byte("linear-signing-secret"))
		m.Write([]byte(body))
		return hex.EncodeToString(m.Sum(nil))
	}
	undated := `{"action":"create","type":"Issue","data":{"id":"iss-1"}}`
	for _, id := range []string{"ln-1", "ln-2"} {
		if a := post(t, ln.url, "", undated, "Linear-Signature", sign(undated), "Linear-Delivery", id); a.status != 401 {
			t.Errorf("a signed body without webhookTimestamp, delivery %s: %d %s", id, a.status, a.body)
		}
	}
	dated := fmt.Sprintf(`{"action":"create","type":"Issue","data":{"id":"iss-1"},"webhookTimestamp":%d}`, time.Now().UnixMilli())
	first := post(t, ln.url, "", dated, "Linear-Signature", sign(dated), "Linear-Delivery", "ln-3")
	id1 := deliveryID(t, first)
	again := post(t, ln.url, "", dated, "Linear-Signature", sign(dated), "Linear-Delivery", "ln-4")
	if !strings.Contains(again.body, `"duplicate":true,"duplicate_of":"`+id1+`"`) {
		t.Fatalf("the dated body replayed under a new delivery ID: %d %s", again.status, again.body)
	}
}

func TestIngressDuplicates(t *testing.T) {
	h, _ := ingressFactory(t)
	tok, hdr, gh := h.hook("tok"), h.hook("hdr"), h.hook("gh")
	bearer := "Bearer " + tok.secret
	check := func(name string, first, second answer, source string, uid string) {
		t.Helper()
		id1, id2 := deliveryID(t, first), deliveryID(t, second)
		if id1 == id2 {
			t.Fatalf("%s: the duplicate got the same delivery_id", name)
		}
		d, err := h.c.Delivery(context.Background(), uid, id2)
		if err != nil || d.Label != factory.LabelDuplicate || d.DuplicateOf != id1 || d.IdentitySource != source {
			t.Fatalf("%s: %v %+v", name, err, d.Delivery)
		}
		if want := `"duplicate":true,"duplicate_of":"` + id1 + `"`; !strings.Contains(second.body, want) {
			t.Fatalf("%s: the answer %s does not say it is a duplicate", name, second.body)
		}
	}
	// The webhook's own delivery ID header.
	check("deliveryIdHeader",
		post(t, hdr.url, "", `{"n":1}`, "Authorization", "Bearer "+hdr.secret, "X-Event-Id", "evt-1"),
		post(t, hdr.url, "", `{"n":2}`, "Authorization", "Bearer "+hdr.secret, "X-Event-Id", "evt-1"), "header", hdr.uid)
	// The provider's delivery header.
	check("provider",
		post(t, gh.url, "", `{"n":1}`, "X-Hub-Signature-256", ghSign(`{"n":1}`), "X-GitHub-Delivery", "gh-1"),
		post(t, gh.url, "", `{"n":3}`, "X-Hub-Signature-256", ghSign(`{"n":3}`), "X-GitHub-Delivery", "gh-1"), "provider", gh.uid)
	// X-Service-Delivery-Id.
	check("x-service-delivery-id",
		post(t, tok.url, "", `{"n":1}`, "Authorization", bearer, "X-Service-Delivery-Id", "svc-1"),
		post(t, tok.url, "", `{"n":2}`, "Authorization", bearer, "X-Service-Delivery-Id", "svc-1"), "x-service-delivery-id", tok.uid)
	// X-Warp-Delivery-Id, the product's header, wins over the older name.
	check("x-warp-delivery-id",
		post(t, tok.url, "", `{"n":1}`, "Authorization", bearer, "X-Warp-Delivery-Id", "warp-1", "X-Service-Delivery-Id", "svc-a"),
		post(t, tok.url, "", `{"n":2}`, "Authorization", bearer, "X-Warp-Delivery-Id", "warp-1", "X-Service-Delivery-Id", "svc-b"), "x-warp-delivery-id", tok.uid)
	// The body's hash, when the sender sets no ID.
	check("body-hash",
		post(t, tok.url, "", `{"same":true}`, "Authorization", bearer),
		post(t, tok.url, "", `{"same":true}`, "Authorization", bearer), "body-hash", tok.uid)
	// GitHub signs no delivery ID: a replay under a new ID is still a duplicate.
	check("github replay with a new delivery ID",
		post(t, gh.url, "", `{"n":9}`, "X-Hub-Signature-256", ghSign(`{"n":9}`), "X-GitHub-Delivery", "gh-9"),
		post(t, gh.url, "", `{"n":9}`, "X-Hub-Signature-256", ghSign(`{"n":9}`), "X-GitHub-Delivery", "gh-10"), "provider", gh.uid)
	// An unsigned request to a signature webhook is 401.
	if a := post(t, gh.url, "", `{}`); a.status != 401 {
		t.Fatalf("unsigned: %d", a.status)
	}
}

func TestIngressRateLimit(t *testing.T) {
	h, _ := ingressFactory(t)
	tok := h.hook("tok")
	for i := 0; i < 60; i++ {
		deliveryID(t, post(t, tok.url, "", `{}`, "Authorization", "Bearer "+tok.secret, "X-Service-Delivery-Id", strconv.Itoa(i%50)))
	}
	before := len(h.log(tok.uid))
	a := post(t, tok.url, "", `{}`, "Authorization", "Bearer "+tok.secret, "X-Service-Delivery-Id", "61")
	retry, _ := strconv.Atoi(a.header.Get("Retry-After"))
	if a.status != 429 || retry < 1 || retry > 60 {
		t.Fatalf("61st delivery: %d, Retry-After %q", a.status, a.header.Get("Retry-After"))
	}
	if len(h.log(tok.uid)) != before {
		t.Fatal("a 429 was logged")
	}
	// Another webhook has its own budget.
	hdr := h.hook("hdr")
	deliveryID(t, post(t, hdr.url, "", `{}`, "Authorization", "Bearer "+hdr.secret))
}

func TestIngressFailedAuthFlood(t *testing.T) {
	h, _ := ingressFactory(t)
	tok := h.hook("tok")
	var last answer
	for i := 0; i < 12; i++ {
		last = post(t, tok.url, "127.0.0.2", `{}`, "Authorization", "Bearer guess-"+strconv.Itoa(i))
	}
	if last.status != 429 || last.header.Get("Retry-After") == "" {
		t.Fatalf("the flood was not throttled: %d", last.status)
	}
	// Even the right token from the flooding address waits...
	if a := post(t, tok.url, "127.0.0.2", `{}`, "Authorization", "Bearer "+tok.secret); a.status != 429 {
		t.Fatalf("flooding address: %d", a.status)
	}
	// ...but the legitimate sender is not blocked.
	deliveryID(t, post(t, tok.url, "127.0.0.1", `{}`, "Authorization", "Bearer "+tok.secret))
	rejected := 0
	for _, d := range h.log(tok.uid) {
		if d.Label == factory.LabelRejectedAuth {
			rejected++
			if d.ClientAddr != "127.0.0.2" || d.Reason != "the bearer token does not match" {
				t.Fatalf("record %+v", d.Delivery)
			}
		}
	}
	if rejected != 10 {
		t.Fatalf("%d failed attempts logged, want 10 (then 429s, not logged)", rejected)
	}
}

func TestIngressRotationSuspensionDeletion(t *testing.T) {
	h, root := ingressFactory(t)
	ctx := context.Background()
	tok := h.hook("tok")
	deliveryID(t, post(t, tok.url, "", `{"n":1}`, "Authorization", "Bearer "+tok.secret))

	// Rotation: the old secret fails at once, the new one works.
	if _, err := h.c.RotateSecret(ctx, "webhook-acme-tok", nil); err != nil {
		t.Fatal(err)
	}
	if a := post(t, tok.url, "", `{"n":2}`, "Authorization", "Bearer "+tok.secret); a.status != 401 {
		t.Fatalf("the old secret after rotation: %d", a.status)
	}
	fresh := h.hook("tok")
	if fresh.secret == tok.secret {
		t.Fatal("rotation kept the value")
	}
	deliveryID(t, post(t, tok.url, "", `{"n":3}`, "Authorization", "Bearer "+fresh.secret))

	// Suspension: 404 at once, and back.
	if _, err := h.c.SetSuspended(ctx, tok.uid, true); err != nil {
		t.Fatal(err)
	}
	if a := post(t, tok.url, "", `{"n":4}`, "Authorization", "Bearer "+fresh.secret); a.status != 404 {
		t.Fatalf("suspended: %d", a.status)
	}
	for _, w := range h.status("acme").Webhooks {
		if w.Name == "tok" && !w.Suspended {
			t.Fatal("status does not show the suspension")
		}
	}
	if _, err := h.c.SetSuspended(ctx, tok.uid, false); err != nil {
		t.Fatal(err)
	}
	deliveryID(t, post(t, tok.url, "", `{"n":5}`, "Authorization", "Bearer "+fresh.secret))

	// Disabled in the file: 404 at the next sync.
	os.WriteFile(filepath.Join(root, "webhooks", "tok.yaml"), []byte("authMode: token\nenabled: false\n"), 0o644)
	if _, err := h.c.SyncFactory(ctx, h.status("acme").UID); err != nil {
		t.Fatal(err)
	}
	if a := post(t, tok.url, "", `{"n":6}`, "Authorization", "Bearer "+fresh.secret); a.status != 404 {
		t.Fatalf("disabled: %d", a.status)
	}
	// Deleted: 404, and its log stays readable.
	os.Remove(filepath.Join(root, "webhooks", "tok.yaml"))
	if _, err := h.c.SyncFactory(ctx, h.status("acme").UID); err != nil {
		t.Fatal(err)
	}
	if a := post(t, tok.url, "", `{"n":7}`, "Authorization", "Bearer "+fresh.secret); a.status != 404 {
		t.Fatalf("deleted: %d", a.status)
	}
	if log := h.log(tok.uid); len(log) != 4 {
		t.Fatalf("the deleted webhook's log: %d records", len(log))
	}
}

func TestDeliveryLogPaging(t *testing.T) {
	h, _ := ingressFactory(t)
	tok := h.hook("tok")
	var ids []string
	for i := 0; i < 7; i++ {
		ids = append(ids, deliveryID(t, post(t, tok.url, "", fmt.Sprintf(`{"n":%d}`, i), "Authorization", "Bearer "+tok.secret)))
	}
	var got []string
	cursor := ""
	for {
		page, info, err := h.c.Deliveries(context.Background(), tok.uid, 3, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page {
			got = append(got, d.ID)
		}
		if !info.HasNextPage {
			break
		}
		cursor = info.NextCursor
	}
	for i := range ids {
		if got[i] != ids[len(ids)-1-i] {
			t.Fatalf("not newest first: %v vs %v", got, ids)
		}
	}
	if _, _, err := h.c.Deliveries(context.Background(), tok.uid, 3, cursor+"x"); err == nil || client.StatusOf(err) != 400 {
		t.Fatalf("a tampered cursor: %v", err)
	}
	other := h.hook("hdr")
	if _, _, err := h.c.Deliveries(context.Background(), other.uid, 3, cursor); err == nil {
		t.Fatal("a cursor of another webhook's log was accepted")
	}
	if _, _, err := h.c.Deliveries(context.Background(), tok.uid, 501, ""); err == nil {
		t.Fatal("limit 501 accepted")
	}
}

// TestIngressRefusesNonUTF8: JSON is UTF-8 (RFC 8259); a body that is not
// is refused and keeps no payload. The attack: "\xff\xfe" got 202 and was
// echoed raw by the deliveries API.
func TestIngressRefusesNonUTF8(t *testing.T) {
	h, _ := ingressFactory(t)
	tok := h.hook("tok")
	bearer := "Bearer " + tok.secret
	for _, body := range []string{"\"\xff\xfe\"", "{\"a\":\"caf\xe9\"}", "[\"\xed\xa0\x80\"]"} {
		a := post(t, tok.url, "", body, "Authorization", bearer)
		if a.status != 400 || !strings.Contains(a.body, "UTF-8") {
			t.Errorf("%q: %d %s, want 400 naming UTF-8", body, a.status, a.body)
		}
		if log := h.log(tok.uid); log[0].Label != factory.LabelRejectedJSON {
			t.Errorf("%q: logged %s", body, log[0].Label)
		}
	}
	deliveryID(t, post(t, tok.url, "", `{"name":"café ☕"}`, "Authorization", bearer))
}

// TestFailedAuthBudgetUnderConcurrency: 40 connections send their headers,
// pause, then finish with a wrong signature; at most the budget's 10 are
// answered 401, the rest 429. The attack: the check happened before the
// body was read and the count after, so 40 × 401 and no 429.
func TestFailedAuthBudgetUnderConcurrency(t *testing.T) {
	h, _ := ingressFactory(t)
	gh := h.hook("gh")
	u, _ := url.Parse(gh.url)
	const n = 40
	body := `{"zen":"guess"}`
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nX-GitHub-Delivery: d-%d\r\nX-Hub-Signature-256: sha256=%064d\r\n\r\n",
			u.Path, u.Host, len(body), i, i)
		conns[i] = c
	}
	time.Sleep(300 * time.Millisecond) // every request has passed the budget's first check
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Write([]byte(body))
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				statuses[i] = resp.StatusCode
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[401] > factory.FailedAuthPerMinute || count[401]+count[429] != n {
		t.Fatalf("answers %v: want at most %d × 401 and the rest 429", count, factory.FailedAuthPerMinute)
	}
	logged := 0
	for _, d := range h.log(gh.uid) {
		if d.Label == factory.LabelRejectedAuth {
			logged++
		}
	}
	if logged != count[401] {
		t.Fatalf("%d failures logged for %d × 401", logged, count[401])
	}
}

// TestRefusalsAreBounded: a client that sends refused requests past its
// budget is answered 429, and its refusals are counted, not logged. The
// attack: 2,000 posts with Content-Length: 300000 and no body to a
// signature webhook got 2,000 × 413 in 0.8 s, each logged and kept 7 days.
func TestRefusalsAreBounded(t *testing.T) {
	h, _ := ingressFactory(t)
	gh := h.hook("gh")
	u, _ := url.Parse(gh.url)
	const n = 300
	count := map[int]int{}
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 300000\r\n\r\n", u.Path, u.Host)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			count[resp.StatusCode]++
			resp.Body.Close()
		}
		c.Close()
	}
	if count[413] != factory.RejectedPerMinute || count[429] != n-factory.RejectedPerMinute {
		t.Fatalf("answers %v: want %d × 413, then 429", count, factory.RejectedPerMinute)
	}
	if logged := len(h.log(gh.uid)); logged != factory.RejectedPerMinute {
		t.Fatalf("%d records logged, want %d", logged, factory.RejectedPerMinute)
	}
	want := fmt.Sprintf(`factory_deliveries_throttled_total{budget="rejected",webhook="%s",webhook_name="acme/gh"} %d`, gh.uid, n-factory.RejectedPerMinute)
	if !strings.Contains(h.metrics(), want) {
		t.Fatalf("metrics lack %q", want)
	}
	// Another client is not held back by it.
	if a := post(t, gh.url, "127.0.0.2", `{}`); a.status != 401 {
		t.Fatalf("another client: %d", a.status)
	}
}

// metrics reads the server's metrics page.
func (h *harness) metrics() string {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
