// Package gateway is the model gateway (docs/spec/harnesses.md): a run's
// agent calls its model provider (Anthropic Messages, OpenAI Responses and
// Chat Completions, Gemini) through the server with the run's token as its
// key; the gateway checks the run is live and within its budget, forwards
// the call with the provider's real key (a managed secret the agent never
// sees), streams the answer back as it comes, one chunk at a time, and
// records what the call consumed: tokens per model and category, the cost
// by the configured prices, its latency and status.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"factory"
)

// Providers the gateway forwards to.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
	Gemini    = "gemini"
)

// DefaultURLs are the providers' public APIs.
var DefaultURLs = map[string]string{
	Anthropic: "https://api.anthropic.com",
	OpenAI:    "https://api.openai.com",
	Gemini:    "https://generativelanguage.googleapis.com",
}

// Provider is where a provider's calls go: its API's base URL.
type Provider struct {
	URL string
}

// Runs is what the gateway asks of the runs (the run manager).
type Runs interface {
	// Admit says whether a run's agent may call its model now: the run
	// (for its key and labels), or a budget it has run past (its turn
	// is stopped), or an error (no such run, no live turn).
	Admit(runID string) (*factory.Run, *factory.BudgetExceeded, error)
	// RecordCall records a call the run's agent made.
	RecordCall(runID string, c *factory.ModelCall) error
}

// Config sets a gateway up.
type Config struct {
	Providers map[string]Provider // by provider; a missing one: DefaultURLs
	Prices    Prices
	Tokens    *Tokens
	Runs      Runs
	// Key is the real key of a run's calls to a provider: its agent's
	// harness's own (a managed secret), else the provider's configured
	// one; an error when there is none.
	Key func(r *factory.Run, provider string) ([]byte, error)
	// Observed, when set, is told of every call recorded (metrics).
	Observed func(r *factory.Run, c *factory.ModelCall)
	Client   *http.Client
	Log      *slog.Logger
}

// Gateway serves /v1/gateway/{provider}/...
type Gateway struct {
	cfg Config
}

// New returns a gateway.
func New(cfg Config) *Gateway {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	// A redirect is answered, never followed: Go's client would carry
	// x-api-key and x-goog-api-key (the real key) to another host.
	cfg.Client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Gateway{cfg: cfg}
}

// Prefix is where the gateway is served.
const Prefix = "/v1/gateway/"

// maxRequest bounds a call's body (a long conversation with its tools).
const maxRequest = 32 << 20

// call is one call through the gateway, as it goes.
type call struct {
	provider, api, rest string
	run                 *factory.Run
	model               string
	stream              bool
	body                []byte
	start               time.Time
}

// ServeHTTP forwards a call: who (the run's token), whether (a live run
// within its budget), then the provider, streamed back, then the record.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := &call{start: time.Now()}
	provider, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, Prefix), "/")
	c.provider, c.rest = provider, "/"+rest
	if _, ok := DefaultURLs[provider]; !ok {
		http.Error(w, fmt.Sprintf("no provider %q: the gateway serves anthropic, openai and gemini", provider), http.StatusNotFound)
		return
	}
	if msg := pathProblem(r.URL, c.rest); msg != "" {
		writeError(w, provider, http.StatusBadRequest, msg)
		return
	}
	if !served(r.Method, c.rest) {
		writeError(w, provider, http.StatusForbidden, fmt.Sprintf("%s %s: the gateway forwards a model's calls only "+
			"(messages, responses, chat completions, generateContent, token counts, the models' list)", r.Method, c.rest))
		return
	}
	if status, msg := g.admit(c, r); status != 0 {
		writeError(w, provider, status, msg)
		return
	}
	if status, msg := g.readRequest(c, r); status != 0 {
		writeError(w, provider, status, msg)
		return
	}
	g.forward(w, r, c)
}

// credential is the key a call came with, in its provider's header (or a
// bearer token, or Gemini's ?key=).
func credential(r *http.Request) string {
	for _, h := range []string{"x-api-key", "x-goog-api-key"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return v
	}
	return r.URL.Query().Get("key")
}

// admit checks the call's run token and asks whether its run may call
// now; a status other than 0 refuses the call with the message. A call
// past the run's budget is recorded, refused.
func (g *Gateway) admit(c *call, r *http.Request) (int, string) {
	runID, ok := g.cfg.Tokens.Run(credential(r))
	if !ok {
		return http.StatusUnauthorized, "the model gateway takes a run's token as its key: this is not one"
	}
	run, exceeded, err := g.cfg.Runs.Admit(runID)
	if err != nil {
		return http.StatusUnauthorized, "the run's token is no longer valid: the run has no turn in progress"
	}
	c.run = run
	if exceeded != nil {
		g.record(c, http.StatusBadRequest, Usage{}, 0, "budget_exceeded: "+exceeded.Message())
		return http.StatusBadRequest, "budget_exceeded: " + exceeded.Message() + "; stop here"
	}
	return 0, ""
}

// readRequest reads the call's body (bounded), and what it asks for: the
// API, the model, whether the answer streams. A chat completion that
// streams is asked to report its usage at its end.
func (g *Gateway) readRequest(c *call, r *http.Request) (int, string) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxRequest+1))
	if err != nil {
		return http.StatusBadRequest, "cannot read the request"
	}
	if len(b) > maxRequest {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("the request is over %d MiB", maxRequest>>20)
	}
	c.body = b
	c.api = apiOf(c.rest)
	var q struct {
		Model         string          `json:"model"`
		Stream        bool            `json:"stream"`
		StreamOptions json.RawMessage `json:"stream_options"`
	}
	_ = json.Unmarshal(b, &q) // not every call is JSON (a GET)
	c.model, c.stream = q.Model, q.Stream
	if c.provider == Gemini {
		c.model, c.stream = geminiModel(c.rest), strings.Contains(c.rest, ":streamGenerateContent")
	}
	if c.api == "chat" && q.Stream && len(q.StreamOptions) == 0 {
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) == nil {
			m["stream_options"] = json.RawMessage(`{"include_usage":true}`)
			c.body, _ = json.Marshal(m)
		}
	}
	return 0, ""
}

// apiOf names the API a path is of.
func apiOf(rest string) string {
	switch {
	case strings.HasSuffix(rest, "/messages"):
		return "messages"
	case strings.HasSuffix(rest, "/responses"):
		return "responses"
	case strings.HasSuffix(rest, "/chat/completions"):
		return "chat"
	case strings.Contains(rest, ":generateContent") || strings.Contains(rest, ":streamGenerateContent"):
		return "generate_content"
	}
	return "other"
}

// pathProblem says why a path may not go to the provider: a dot segment
// or an encoded slash or dot would leave the provider's base path (an
// upstream that cleans paths), with the real key.
func pathProblem(u *url.URL, rest string) string {
	esc := strings.ToLower(u.EscapedPath())
	if strings.Contains(esc, "%2e") || strings.Contains(esc, "%2f") || strings.Contains(esc, "%5c") {
		return "the path holds an encoded dot, slash or backslash"
	}
	for _, seg := range strings.Split(rest, "/") {
		if seg == "." || seg == ".." {
			return "the path holds a dot segment"
		}
	}
	return ""
}

// served reports whether the gateway forwards a call: the model APIs it
// meters (apiOf), token counts, and reading the models' list or a model.
// Anything else (files, batches, fine-tuning, caches) would lend an agent
// the key's whole authority, unmetered and outliving its run.
func served(method, rest string) bool {
	switch {
	case apiOf(rest) != "other":
		return method == http.MethodPost
	case strings.HasSuffix(rest, "/messages/count_tokens") || strings.Contains(rest, ":countTokens"):
		return method == http.MethodPost
	case method == http.MethodGet:
		i := strings.LastIndex(rest, "/models")
		return i >= 0 && !strings.ContainsAny(rest[i:], ":") && strings.Count(rest[i:], "/") <= 2
	}
	return false
}

// geminiModel is the model of a Gemini path (/v1beta/models/<model>:...).
func geminiModel(rest string) string {
	i := strings.LastIndex(rest, "/models/")
	if i < 0 {
		return ""
	}
	m := rest[i+len("/models/"):]
	if j := strings.IndexByte(m, ':'); j >= 0 {
		m = m[:j]
	}
	return m
}

// hopHeaders are not passed on, either way; authHeaders carry the
// caller's token in, and are replaced with the real key out.
var (
	hopHeaders  = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length"}
	authHeaders = []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Cookie"}
)

// upstream is the call as it goes to the provider: its URL (the caller's
// ?key= dropped), the caller's headers but its credentials, the real key.
func (g *Gateway) upstream(ctx context.Context, r *http.Request, c *call, key []byte) (*http.Request, error) {
	base := DefaultURLs[c.provider]
	if p, ok := g.cfg.Providers[c.provider]; ok && p.URL != "" {
		base = p.URL
	}
	u, err := url.Parse(strings.TrimRight(base, "/") + c.rest)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	q.Del("key")
	u.RawQuery = q.Encode()
	out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(c.body))
	if err != nil {
		return nil, err
	}
	for k, v := range r.Header {
		out.Header[k] = v
	}
	for _, h := range append(hopHeaders, authHeaders...) {
		out.Header.Del(h)
	}
	switch c.provider {
	case Anthropic:
		out.Header.Set("X-Api-Key", string(key))
	case Gemini:
		out.Header.Set("X-Goog-Api-Key", string(key))
	default:
		out.Header.Set("Authorization", "Bearer "+string(key))
	}
	return out, nil
}

// forward sends the call to its provider with the real key and streams
// the answer back, a chunk at a time, flushed as it comes, reading its
// usage on the way; then records the call.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, c *call) {
	key, err := g.cfg.Key(c.run, c.provider)
	if err != nil {
		g.record(c, http.StatusServiceUnavailable, Usage{}, 0, err.Error())
		writeError(w, c.provider, http.StatusServiceUnavailable, err.Error())
		return
	}
	req, err := g.upstream(r.Context(), r, c, key)
	if err != nil {
		writeError(w, c.provider, http.StatusBadGateway, "the provider's address: "+err.Error())
		return
	}
	resp, err := g.cfg.Client.Do(req)
	if err != nil {
		msg := "the provider did not answer: " + redact(err.Error(), key)
		g.record(c, http.StatusBadGateway, Usage{}, 0, msg)
		writeError(w, c.provider, http.StatusBadGateway, msg)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	for _, h := range append(hopHeaders, "Set-Cookie") {
		w.Header().Del(h)
	}
	w.WriteHeader(resp.StatusCode)
	usage := usageReader(c.provider, resp.Header.Get("Content-Type"))
	first, err := copyFlushing(w, resp.Body, usage)
	if err != nil && r.Context().Err() == nil {
		g.cfg.Log.Warn("the model gateway's stream ended early", "run", c.run.ID, "provider", c.provider, "err", redact(err.Error(), key))
	}
	g.record(c, resp.StatusCode, usage.Usage(), first, "")
}

// redact takes a key out of a message.
func redact(msg string, key []byte) string {
	if len(key) == 0 {
		return msg
	}
	return strings.ReplaceAll(msg, string(key), "[redacted]")
}

// usageSink is what reads a call's usage as its answer passes.
type usageSink interface {
	io.Writer
	Usage() Usage
}

func usageReader(provider, contentType string) usageSink {
	if strings.HasPrefix(contentType, "text/event-stream") {
		return &sseUsage{provider: provider}
	}
	return &jsonUsage{provider: provider}
}

// chunkSize is the most of an answer the gateway holds at once.
const chunkSize = 32 << 10

// copyFlushing copies an answer to the caller one read at a time, each
// flushed at once (a streamed answer reaches the agent as it comes), and
// to the usage reader; it returns when the first byte came.
func copyFlushing(w http.ResponseWriter, body io.Reader, usage io.Writer) (first time.Duration, err error) {
	start := time.Now()
	rc := http.NewResponseController(w)
	buf := make([]byte, chunkSize)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if first == 0 {
				first = max(time.Since(start), time.Nanosecond)
			}
			_, _ = usage.Write(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				return first, werr
			}
			if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
				return first, ferr
			}
		}
		if rerr == io.EOF {
			return first, nil
		}
		if rerr != nil {
			return first, rerr
		}
	}
}

// record records a call: its tokens and cost, when it took, how it ended.
func (g *Gateway) record(c *call, status int, u Usage, first time.Duration, why string) {
	mc := &factory.ModelCall{Time: c.start.UTC(), Provider: c.provider, API: c.api, Model: firstNonEmpty(u.Model, c.model), Stream: c.stream,
		Status: status, LatencyMS: time.Since(c.start).Milliseconds(), FirstByteMS: first.Milliseconds(),
		InputTokens: u.Input, OutputTokens: u.Output, CachedTokens: u.Cached, Error: why}
	if u.Seen {
		mc.CostUSD = g.cfg.Prices.Cost(mc.Model, u)
	}
	if err := g.cfg.Runs.RecordCall(c.run.ID, mc); err != nil {
		g.cfg.Log.Error("recording a model call", "run", c.run.ID, "err", err)
		return
	}
	if g.cfg.Observed != nil {
		g.cfg.Observed(c.run, mc)
	}
}

// writeError answers with an error of the provider's shape, which its
// agents read and stop on.
func writeError(w http.ResponseWriter, provider string, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var v any
	switch provider {
	case Anthropic:
		v = map[string]any{"type": "error", "error": map[string]any{"type": errorType(status), "message": msg}}
	case Gemini:
		v = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": geminiStatus(status)}}
	default:
		v = map[string]any{"error": map[string]any{"message": msg, "type": errorType(status), "code": nil}}
	}
	_ = json.NewEncoder(w).Encode(v)
}

func errorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "invalid_request_error"
	}
	return "api_error"
}

func geminiStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	}
	return "UNAVAILABLE"
}
