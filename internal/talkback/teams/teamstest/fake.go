// Package teamstest is a fake of the Bot Framework for tests, on loopback:
// its OpenID metadata and signing keys (it signs activities' tokens as the
// Bot Framework does), the identity platform's token endpoint, and a
// channel's Bot Connector (replies and their edits). Every request to the
// connector is checked against its published description (Swagger 2.0,
// the Activity definition included, in the shared API descriptions); a
// test fails on anything it does not allow.
package teamstest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"factory/internal/apicheck"
	"factory/internal/talkback/teams"
)

// The bot the fake knows.
const (
	AppID    = "c9e8f7a6-0000-4000-8000-000000000041"
	Password = "factory-test-app-password"
	KeyID    = "factory-test-kid"
)

// Fake is the Bot Framework on loopback. URL serves the metadata
// (URL+"/openid"), the keys, the token endpoint (URL+"/token") and the
// Bot Connector (activities' serviceUrl: URL+"/").
type Fake struct {
	URL      string
	Problems *apicheck.Problems

	key      *rsa.PrivateKey
	mu       sync.Mutex
	next     int
	tokens   map[string]bool
	Replies  []*Reply
	KeyReads int
	// Fail answers the next connector requests 500.
	Fail int
}

// Reply is a reply the bot made, with its edits.
type Reply struct {
	ID, Conversation, ReplyTo, Text string
	Edits                           int
}

// New starts the fake; the test fails on every problem its requests had.
func New(t testing.TB) *Fake {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.Open(apicheck.SharedFile(t, "botframework_connector.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	desc, err := apicheck.LoadSwagger(raw)
	if err != nil {
		t.Fatal(err)
	}
	activity, err := desc.Definition("Activity")
	if err != nil {
		t.Fatal(err)
	}
	f := &Fake{Problems: &apicheck.Problems{}, key: key, tokens: map[string]bool{}}
	connector := desc.Handler("", http.HandlerFunc(f.connector), map[string]*apicheck.Schema{
		"Conversations_ReplyToActivity": activity, "Conversations_UpdateActivity": activity, "Conversations_SendToConversation": activity}, f.Problems)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /openid", f.metadata)
	mux.HandleFunc("GET /keys", f.keys)
	mux.HandleFunc("POST /token", f.token)
	mux.Handle("/v3/", connector)
	f.URL = apicheck.Serve(t, "Bot Framework", mux, f.Problems)
	return f
}

// Snapshot runs fn with the fake's state held still.
func (f *Fake) Snapshot(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *Fake) metadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"issuer": teams.Issuer, "jwks_uri": f.URL + "/keys",
		"id_token_signing_alg_values_supported": []string{"RS256"}, "token_endpoint_auth_methods_supported": []string{"private_key_jwt"}})
}

func (f *Fake) keys(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.KeyReads++
	f.mu.Unlock()
	pub := f.key.PublicKey
	writeJSON(w, map[string]any{"keys": []map[string]any{{"kty": "RSA", "use": "sig", "kid": KeyID,
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
		"endorsements": []string{"msteams", "webchat"}}}})
}

func (f *Fake) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	if r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("client_id") != AppID || r.Form.Get("client_secret") != Password ||
		r.Form.Get("scope") != teams.Scope {
		w.WriteHeader(http.StatusUnauthorized)
		writeJSON(w, map[string]any{"error": "invalid_client"})
		return
	}
	f.mu.Lock()
	f.next++
	tok := fmt.Sprintf("app-token-%d", f.next)
	f.tokens[tok] = true
	f.mu.Unlock()
	writeJSON(w, map[string]any{"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": tok})
}

func (f *Fake) connector(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] {
		w.WriteHeader(http.StatusUnauthorized)
		writeJSON(w, map[string]any{"error": map[string]any{"code": "Unauthorized", "message": "Authorization has been denied"}})
		return
	}
	if f.Fail > 0 {
		f.Fail--
		w.WriteHeader(http.StatusInternalServerError)
		writeJSON(w, map[string]any{"error": map[string]any{"code": "ServiceError", "message": "the fake was told to fail"}})
		return
	}
	var a struct {
		Text string `json:"text"`
	}
	_ = json.NewDecoder(r.Body).Decode(&a)
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v3/conversations/"), "/")
	if len(parts) != 3 {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	conv, act := parts[0], parts[2]
	if r.Method == http.MethodPut {
		for _, rp := range f.Replies {
			if rp.ID == act && rp.Conversation == conv {
				rp.Text, rp.Edits = a.Text, rp.Edits+1
				writeJSON(w, map[string]any{"id": rp.ID})
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		writeJSON(w, map[string]any{"error": map[string]any{"code": "ActivityNotFoundInConversation"}})
		return
	}
	f.next++
	rp := &Reply{ID: fmt.Sprintf("1751364%06d", f.next), Conversation: conv, ReplyTo: act, Text: a.Text}
	f.Replies = append(f.Replies, rp)
	w.WriteHeader(http.StatusCreated)
	writeJSON(w, map[string]any{"id": rp.ID})
}

// Claims are a token's claims, as Sign makes them.
type Claims map[string]any

// Sign makes the token the Bot Framework puts on an activity to the bot,
// for its serviceUrl; change alters the claims first (to make bad ones).
func (f *Fake) Sign(serviceURL string, change func(Claims)) string {
	now := time.Now()
	c := Claims{"iss": teams.Issuer, "aud": AppID, "serviceurl": serviceURL, "nbf": now.Add(-time.Minute).Unix(),
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	if change != nil {
		change(c)
	}
	return f.SignRaw(map[string]any{"alg": "RS256", "typ": "JWT", "kid": KeyID}, c, f.key)
}

// SignRaw signs any header and claims with a key (RS256).
func (f *Fake) SignRaw(header map[string]any, c Claims, key *rsa.PrivateKey) string {
	h, _ := json.Marshal(header)
	b, _ := json.Marshal(c)
	signed := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(signed))
	sig, _ := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
