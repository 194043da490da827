package ingress

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"factory"

	"factory/internal/secrets"
	"factory/internal/store"
)

const fuzzToken = "fuzz-token-0123456789abcdefghijklmnop"

// tokenHandler is a handler over a real store holding one token webhook.
func tokenHandler(t testing.TB) (*Handler, *store.Store) {
	data := t.TempDir()
	s, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	kr, err := secrets.LoadKeyring(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := secrets.Create(s, kr, "tok", []byte(fuzzToken), false, time.Now()); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.PutWebhook(&factory.Webhook{Factory: "f", Key: "w", UID: "wh_0000000000000000fz01", SecretName: "tok", SecretVersion: 1,
		Spec: factory.WebhookSpec{Name: "w", AuthMode: factory.AuthToken, Enabled: true}})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	return New(Config{Store: s, Keyring: kr, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), PerMinute: -1, RejectedPerMinute: -1}), s
}

// FuzzBodyPath posts arbitrary bodies with a valid token: the answer is
// 202 for JSON in UTF-8, 400 otherwise, 413 over the limit, and the log
// agrees.
func FuzzBodyPath(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `1`, `"x"`, `null`, ``, `{`, "\xff", `{"a":[1,2,{"b":null}]}`, strings.Repeat(`[`, 100000)} {
		f.Add([]byte(s))
	}
	h, s := tokenHandler(f)
	h.cfg.MaxBody = 4096
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/w/{uid}", h)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/webhooks/w/wh_0000000000000000fz01", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+fuzzToken)
		req.Header.Set("X-Service-Delivery-Id", time.Now().String()) // every request is new
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		want := http.StatusAccepted
		switch {
		case len(body) > 4096:
			want = http.StatusRequestEntityTooLarge
		case !json.Valid(body) || !utf8.Valid(body):
			want = http.StatusBadRequest
		}
		if rec.Code != want {
			t.Fatalf("status %d, want %d, for %q", rec.Code, want, body)
		}
		if rec.Code == http.StatusAccepted {
			var out struct {
				ID string `json:"delivery_id"`
			}
			json.Unmarshal(rec.Body.Bytes(), &out)
			d, err := s.Delivery("wh_0000000000000000fz01", out.ID)
			if err != nil || d.Label != factory.LabelAccepted {
				t.Fatalf("log: %v %+v", err, d)
			}
			p, err := s.DeliveryPayload("wh_0000000000000000fz01", out.ID)
			if err != nil || string(p) != string(body) {
				t.Fatalf("payload not byte for byte: %q vs %q", p, body)
			}
		}
	})
}
