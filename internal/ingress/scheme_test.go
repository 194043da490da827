package ingress

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripewebhook "github.com/stripe/stripe-go/v83/webhook"
	svix "github.com/svix/svix-webhooks/go"
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func hexMAC(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func b64MAC(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

type vector struct {
	name    string
	scheme  string
	h       http.Header
	body    string
	secret  string
	now     time.Time
	wantErr error // nil: valid
}

func runVectors(t *testing.T, vs []vector) {
	t.Helper()
	for _, v := range vs {
		t.Run(v.scheme+"/"+v.name, func(t *testing.T) {
			err := Schemes[v.scheme].Verify(v.h, []byte(v.body), []byte(v.secret), v.now)
			if v.wantErr == nil && err != nil {
				t.Fatalf("valid request refused: %v", err)
			}
			if v.wantErr != nil && !errors.Is(err, v.wantErr) {
				t.Fatalf("got %v, want %v", err, v.wantErr)
			}
		})
	}
}

// Published vectors (docs/spec/ingress.md).
func TestPublishedVectors(t *testing.T) {
	swTime := time.Unix(1614265330, 0)
	slackBody := "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	runVectors(t, []vector{
		{"standard webhooks vector", "standard-webhooks", hdr("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp", "1614265330",
			"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), `{"test": 2432232314}`, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", swTime, nil},
		{"github vector", "github", hdr("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
			"Hello, World!", "It's a Secret to Everybody", time.Now(), nil},
		{"slack vector", "slack", hdr("X-Slack-Request-Timestamp", "1531420618", "X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"),
			slackBody, "8f742231b10e8888abcd99yyyzzz85a5", time.Unix(1531420618, 0), nil},
	})
}

// The providers' own libraries sign; we verify. So we agree with the real
// senders, not only with ourselves.
func TestProviderLibraries(t *testing.T) {
	now := time.Now()
	body := []byte(`{"type":"invoice.payment_failed","id":"evt_1"}`)
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

	sw, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := sw.Sign("msg_1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	h := hdr("webhook-id", "msg_1", "webhook-timestamp", strconv.FormatInt(now.Unix(), 10), "webhook-signature", sig)
	if err := Schemes["standard-webhooks"].Verify(h, body, []byte(secret), now); err != nil {
		t.Fatalf("standard webhooks library: %v", err)
	}

	sv, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	svSig, err := sv.Sign("msg_2", now, body)
	if err != nil {
		t.Fatal(err)
	}
	h = hdr("svix-id", "msg_2", "svix-timestamp", strconv.FormatInt(now.Unix(), 10), "svix-signature", svSig)
	if err := Schemes["standard-webhooks"].Verify(h, body, []byte(secret), now); err != nil {
		t.Fatalf("svix library with svix-* headers: %v", err)
	}
	if got := Schemes["standard-webhooks"].DeliveryID(h); got != "msg_2" {
		t.Fatalf("svix-id as delivery ID: %q", got)
	}
	// And the libraries accept what we would accept.
	if err := sw.Verify(body, hdr("webhook-id", "msg_2", "webhook-timestamp", strconv.FormatInt(now.Unix(), 10), "webhook-signature", svSig)); err != nil {
		t.Fatalf("the libraries disagree with each other: %v", err)
	}

	sp := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: "whsec_stripe_test", Timestamp: now})
	if err := Schemes["stripe"].Verify(hdr("Stripe-Signature", sp.Header), body, []byte("whsec_stripe_test"), now); err != nil {
		t.Fatalf("stripe-go: %v", err)
	}
	if err := Schemes["stripe"].Verify(hdr("Stripe-Signature", sp.Header), body, []byte("whsec_other"), now); !errors.Is(err, ErrMismatch) {
		t.Fatalf("stripe-go with a wrong secret: %v", err)
	}
}

// Each scheme: valid, wrong secret, missing header, stale and future
// timestamp (where signed), tampered body, several signatures.
func TestSchemeCases(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	old := strconv.FormatInt(now.Add(-6*time.Minute).Unix(), 10)
	future := strconv.FormatInt(now.Add(6*time.Minute).Unix(), 10)
	body := `{"action":"opened"}`
	const s = "shhh-provider-secret"
	swSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	swKey := []byte("0123456789abcdef0123456789abcdef")
	swSig := func(id, t, b string) string { return "v1," + b64MAC(swKey, id+"."+t+"."+b) }
	stripeSig := func(t, b string) string { return "t=" + t + ",v1=" + hexMAC(s, t+"."+b) }
	slackSig := func(t, b string) string { return "v0=" + hexMAC(s, "v0:"+t+":"+b) }
	linearBody := func(ms int64) string { return fmt.Sprintf(`{"action":"create","webhookTimestamp":%d}`, ms) }
	shopify := b64MAC([]byte(s), body)

	runVectors(t, []vector{
		{"valid", "standard-webhooks", hdr("webhook-id", "m1", "webhook-timestamp", ts, "webhook-signature", swSig("m1", ts, body)), body, swSecret, now, nil},
		{"wrong secret", "standard-webhooks", hdr("webhook-id", "m1", "webhook-timestamp", ts, "webhook-signature", swSig("m1", ts, body)), body, "whsec_" + base64.StdEncoding.EncodeToString([]byte("other")), now, ErrMismatch},
		{"missing headers", "standard-webhooks", hdr(), body, swSecret, now, ErrUnsigned},
		{"missing signature only", "standard-webhooks", hdr("webhook-id", "m1", "webhook-timestamp", ts), body, swSecret, now, ErrMalformed},
		{"stale", "standard-webhooks", hdr("webhook-id", "m1", "webhook-timestamp", old, "webhook-signature", swSig("m1", old, body)), body, swSecret, now, ErrStale},
		{"future", "standard-webhooks", hdr("webhook-id", "m1", "webhook-timestamp", future, "webhook-signature", swSig("m1", future, body)), body, swSecret, now, ErrStale},
		{"tampered", "standard-webhooks", hdr("webhook-id", "m1", "webhook-timestamp", ts, "webhook-signature", swSig("m1", ts, body)), body + " ", swSecret, now, ErrMismatch},
		{"several, one matches", "standard-webhooks", hdr("webhook-id", "m1", "webhook-timestamp", ts, "webhook-signature", "v1,AAAA v1a,xyz "+swSig("m1", ts, body)), body, swSecret, now, nil},

		{"valid", "stripe", hdr("Stripe-Signature", stripeSig(ts, body)), body, s, now, nil},
		{"wrong secret", "stripe", hdr("Stripe-Signature", stripeSig(ts, body)), body, "other", now, ErrMismatch},
		{"missing header", "stripe", hdr(), body, s, now, ErrUnsigned},
		{"no timestamp", "stripe", hdr("Stripe-Signature", "v1=00"), body, s, now, ErrMalformed},
		{"stale", "stripe", hdr("Stripe-Signature", stripeSig(old, body)), body, s, now, ErrStale},
		{"future", "stripe", hdr("Stripe-Signature", stripeSig(future, body)), body, s, now, ErrStale},
		{"tampered", "stripe", hdr("Stripe-Signature", stripeSig(ts, body)), `{"action":"closed"}`, s, now, ErrMismatch},
		{"several, one matches", "stripe", hdr("Stripe-Signature", "t="+ts+",v1=deadbeef,v0=abc,v1="+hexMAC(s, ts+"."+body)), body, s, now, nil},

		{"valid", "github", hdr("X-Hub-Signature-256", "sha256="+hexMAC(s, body)), body, s, now, nil},
		{"wrong secret", "github", hdr("X-Hub-Signature-256", "sha256="+hexMAC("other", body)), body, s, now, ErrMismatch},
		{"missing header", "github", hdr("X-Hub-Signature", "sha1=abc"), body, s, now, ErrUnsigned},
		{"malformed", "github", hdr("X-Hub-Signature-256", "md5=abc"), body, s, now, ErrMalformed},
		{"tampered", "github", hdr("X-Hub-Signature-256", "sha256="+hexMAC(s, body)), body + "\n", s, now, ErrMismatch},

		{"valid", "slack", hdr("X-Slack-Request-Timestamp", ts, "X-Slack-Signature", slackSig(ts, body)), body, s, now, nil},
		{"wrong secret", "slack", hdr("X-Slack-Request-Timestamp", ts, "X-Slack-Signature", "v0="+hexMAC("other", "v0:"+ts+":"+body)), body, s, now, ErrMismatch},
		{"missing headers", "slack", hdr(), body, s, now, ErrUnsigned},
		{"stale", "slack", hdr("X-Slack-Request-Timestamp", old, "X-Slack-Signature", slackSig(old, body)), body, s, now, ErrStale},
		{"future", "slack", hdr("X-Slack-Request-Timestamp", future, "X-Slack-Signature", slackSig(future, body)), body, s, now, ErrStale},
		{"tampered", "slack", hdr("X-Slack-Request-Timestamp", ts, "X-Slack-Signature", slackSig(ts, body)), body + "x", s, now, ErrMismatch},

		{"valid", "shopify", hdr("X-Shopify-Hmac-Sha256", shopify), body, s, now, nil},
		{"wrong secret", "shopify", hdr("X-Shopify-Hmac-Sha256", b64MAC([]byte("other"), body)), body, s, now, ErrMismatch},
		{"missing header", "shopify", hdr(), body, s, now, ErrUnsigned},
		{"tampered", "shopify", hdr("X-Shopify-Hmac-Sha256", shopify), "{}", s, now, ErrMismatch},

		{"valid", "linear", hdr("Linear-Signature", hexMAC(s, linearBody(now.UnixMilli()))), linearBody(now.UnixMilli()), s, now, nil},
		{"no timestamp in body", "linear", hdr("Linear-Signature", hexMAC(s, body)), body, s, now, ErrStale},
		{"timestamp not a number", "linear", hdr("Linear-Signature", hexMAC(s, `{"webhookTimestamp":"now"}`)), `{"webhookTimestamp":"now"}`, s, now, ErrMalformed},
		{"timestamp null", "linear", hdr("Linear-Signature", hexMAC(s, `{"webhookTimestamp":null}`)), `{"webhookTimestamp":null}`, s, now, ErrStale},
		{"body not an object", "linear", hdr("Linear-Signature", hexMAC(s, `[1]`)), `[1]`, s, now, ErrStale},
		{"wrong secret", "linear", hdr("Linear-Signature", hexMAC("other", body)), body, s, now, ErrMismatch},
		{"missing header", "linear", hdr(), body, s, now, ErrUnsigned},
		{"stale", "linear", hdr("Linear-Signature", hexMAC(s, linearBody(now.Add(-61*time.Second).UnixMilli()))), linearBody(now.Add(-61 * time.Second).UnixMilli()), s, now, ErrStale},
		{"future", "linear", hdr("Linear-Signature", hexMAC(s, linearBody(now.Add(61*time.Second).UnixMilli()))), linearBody(now.Add(61 * time.Second).UnixMilli()), s, now, ErrStale},
		{"tampered", "linear", hdr("Linear-Signature", hexMAC(s, body)), body + " ", s, now, ErrMismatch},

		{"valid", "gitlab", hdr("X-Gitlab-Token", s), body, s, now, nil},
		{"wrong secret", "gitlab", hdr("X-Gitlab-Token", "other"), body, s, now, ErrMismatch},
		{"missing header", "gitlab", hdr(), body, s, now, ErrUnsigned},

		{"valid", "azure_devops", hdr("Authorization", basic("factory", s)), body, s, now, nil},
		{"any user name", "azure_devops", hdr("Authorization", basic("", s)), body, s, now, nil},
		{"wrong secret", "azure_devops", hdr("Authorization", basic("factory", "other")), body, s, now, ErrMismatch},
		{"a bearer token", "azure_devops", hdr("Authorization", "Bearer "+s), body, s, now, ErrMalformed},
		{"not base64", "azure_devops", hdr("Authorization", "Basic %%%"), body, s, now, ErrMalformed},
		{"no password", "azure_devops", hdr("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(s))), body, s, now, ErrMalformed},
		{"missing header", "azure_devops", hdr(), body, s, now, ErrUnsigned},
	})
	if got := Schemes["azure_devops"].(bodyIdentified).BodyDeliveryID([]byte(`{"id":"03c164c2-8912-4d5e-8009-3707d5f83734","eventType":"git.push"}`)); got != "03c164c2-8912-4d5e-8009-3707d5f83734" {
		t.Errorf("an Azure DevOps event's identity: %q", got)
	}
}

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

func TestDeliveryIDHeaders(t *testing.T) {
	for scheme, c := range map[string]struct {
		h    http.Header
		want string
	}{
		"github":  {hdr("X-GitHub-Delivery", "gh-1"), "gh-1"},
		"shopify": {hdr("X-Shopify-Webhook-Id", "sh-1"), "sh-1"},
		"linear":  {hdr("Linear-Delivery", "ln-1"), "ln-1"},
		"gitlab":  {hdr("X-Gitlab-Event-UUID", "gl-2", "Idempotency-Key", "gl-1"), "gl-1"},
		"stripe":  {hdr("X-Request-Id", "x"), ""},
		"slack":   {hdr(), ""},
	} {
		if got := Schemes[scheme].DeliveryID(c.h); got != c.want {
			t.Errorf("%s: %q, want %q", scheme, got, c.want)
		}
	}
}

// FuzzSignatureHeaders feeds arbitrary header values and bodies to every
// scheme: never a panic, and never a "valid" for a random signature.
func FuzzSignatureHeaders(f *testing.F) {
	f.Add("v1,AAAA", "1614265330", "t=1,v1=00,v1=zz", "sha256=00", "v0=00", "AAAA", "00", `{"webhookTimestamp": 1e30}`)
	f.Add("", "", "", "", "", "", "", "")
	f.Add("v1,"+string(make([]byte, 300)), "-1", "t=,v1=", "sha256=", "v0=", "!!", "zz", `{"webhookTimestamp":"x"}`)
	f.Fuzz(func(t *testing.T, sw, ts, stripe, gh, slackSig, shop, lin, body string) {
		h := hdr("webhook-id", "m", "webhook-timestamp", ts, "webhook-signature", sw,
			"Stripe-Signature", stripe, "X-Hub-Signature-256", gh,
			"X-Slack-Request-Timestamp", ts, "X-Slack-Signature", slackSig,
			"X-Shopify-Hmac-Sha256", shop, "Linear-Signature", lin, "X-Gitlab-Token", "nope")
		secret := []byte("whsec_" + base64.StdEncoding.EncodeToString([]byte("fuzzing-secret-0123456789abcdef")))
		for name, s := range Schemes {
			if err := s.Verify(h, []byte(body), secret, time.Unix(1614265330, 0)); err == nil {
				t.Fatalf("%s accepted a random signature", name)
			}
		}
	})
}

// FuzzLinearTimestamp: the signed body's webhookTimestamp is read as
// encoding/json reads an int64 field: an integer is its value; anything
// else, or none, is refused, with a reason.
func FuzzLinearTimestamp(f *testing.F) {
	for _, s := range []string{`{"webhookTimestamp":1800000000000}`, `{"webhookTimestamp":null}`, `{"webhookTimestamp":"1"}`,
		`{"webhookTimestamp":1e3}`, `{"WEBHOOKTIMESTAMP":5}`, `{"webhookTimestamp":1,"webhookTimestamp":2}`, `[1]`, ``, `{}`,
		`{"webhookTimestamp":-0}`, `{"webhookTimestamp":99999999999999999999}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		ms, err := linearTimestamp([]byte(body))
		var v struct {
			T *int64 `json:"webhookTimestamp"`
		}
		want := json.Unmarshal([]byte(body), &v) == nil && v.T != nil
		switch {
		case want && (err != nil || ms != *v.T):
			t.Fatalf("%q: %d %v, want %d", body, ms, err, *v.T)
		case !want && err == nil:
			t.Fatalf("%q: read %d, where encoding/json reads no integer", body, ms)
		case err != nil && err.Error() == "":
			t.Fatalf("%q: a refusal without a reason", body)
		}
	})
}
