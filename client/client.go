// Package client is the Go client of the factory server's HTTP API. It
// speaks the same JSON the server writes, and turns RFC 7807 problem
// bodies into *Error values that carry the status and the problem.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"factory"
)

// Client calls one server. The zero values of its knobs are the defaults.
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
	// MaxRetries is how many times a failed call is retried (default 2):
	// on 408, 409, 429, 5xx and connection errors, with backoff, honouring
	// Retry-After. -1 disables retries.
	MaxRetries int
	// Timeout bounds each attempt (default 60 s).
	Timeout time.Duration
}

// New returns a client with the defaults.
func New(baseURL, apiKey string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), APIKey: apiKey, HTTP: &http.Client{}}
}

// Option changes one call.
type Option func(*callOpts)

type callOpts struct {
	timeout    time.Duration
	maxRetries int
	headers    http.Header
	raw        **http.Response
}

// WithTimeout overrides the client's per-attempt timeout for one call.
func WithTimeout(d time.Duration) Option { return func(o *callOpts) { o.timeout = d } }

// WithMaxRetries overrides the client's retries for one call.
func WithMaxRetries(n int) Option { return func(o *callOpts) { o.maxRetries = n } }

// WithHeader adds a header to one call.
func WithHeader(k, v string) Option { return func(o *callOpts) { o.headers.Set(k, v) } }

// WithRawResponse stores the raw response of the call (status, headers;
// its body is already read).
func WithRawResponse(dst **http.Response) Option { return func(o *callOpts) { o.raw = dst } }

// Error is a failed call: the status, the response's headers, and the
// server's RFC 7807 problem. Each status has its own type wrapping it
// (*NotFoundError, *RateLimitError, ...); errors.As finds either.
type Error struct {
	Status    int         `json:"status"`
	Type      string      `json:"type"`
	Title     string      `json:"title"`
	Detail    string      `json:"detail,omitempty"`
	Retryable bool        `json:"retryable,omitempty"`
	Code      string      `json:"-"`
	Header    http.Header `json:"-"`
}

func (e *Error) Error() string {
	msg := e.Title
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return fmt.Sprintf("server answered %d: %s", e.Status, msg)
}

// Typed errors by status. Each carries the problem; errors.As finds the
// typed error or the *Error inside it.
type (
	BadRequestError          struct{ Problem *Error } // 400
	AuthenticationError      struct{ Problem *Error } // 401
	PermissionDeniedError    struct{ Problem *Error } // 403
	NotFoundError            struct{ Problem *Error } // 404
	ConflictError            struct{ Problem *Error } // 409
	UnprocessableEntityError struct{ Problem *Error } // 422
	InternalServerError      struct{ Problem *Error } // 5xx
	// RateLimitError is a 429; RetryAfter is how long the server asked to wait.
	RateLimitError struct {
		Problem    *Error
		RetryAfter time.Duration
	}
)

func (e *BadRequestError) Error() string          { return e.Problem.Error() }
func (e *BadRequestError) Unwrap() error          { return e.Problem }
func (e *AuthenticationError) Error() string      { return e.Problem.Error() }
func (e *AuthenticationError) Unwrap() error      { return e.Problem }
func (e *PermissionDeniedError) Error() string    { return e.Problem.Error() }
func (e *PermissionDeniedError) Unwrap() error    { return e.Problem }
func (e *NotFoundError) Error() string            { return e.Problem.Error() }
func (e *NotFoundError) Unwrap() error            { return e.Problem }
func (e *ConflictError) Error() string            { return e.Problem.Error() }
func (e *ConflictError) Unwrap() error            { return e.Problem }
func (e *UnprocessableEntityError) Error() string { return e.Problem.Error() }
func (e *UnprocessableEntityError) Unwrap() error { return e.Problem }
func (e *InternalServerError) Error() string      { return e.Problem.Error() }
func (e *InternalServerError) Unwrap() error      { return e.Problem }
func (e *RateLimitError) Error() string           { return e.Problem.Error() }
func (e *RateLimitError) Unwrap() error           { return e.Problem }

func typed(e *Error) error {
	switch {
	case e.Status == 400:
		return &BadRequestError{e}
	case e.Status == 401:
		return &AuthenticationError{e}
	case e.Status == 403:
		return &PermissionDeniedError{e}
	case e.Status == 404:
		return &NotFoundError{e}
	case e.Status == 409:
		return &ConflictError{e}
	case e.Status == 422:
		return &UnprocessableEntityError{e}
	case e.Status == 429:
		return &RateLimitError{Problem: e, RetryAfter: retryAfter(e.Header)}
	case e.Status >= 500:
		return &InternalServerError{e}
	}
	return e
}

// StatusOf is the status of a call's error, or 0 when it is not a server's
// answer (a connection error).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

func retryAfter(h http.Header) time.Duration {
	if ms, err := strconv.Atoi(h.Get("retry-after-ms")); err == nil {
		return time.Duration(ms) * time.Millisecond
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil {
		return time.Duration(s) * time.Second
	}
	return 0
}

func retryable(status int) bool {
	return status == 408 || status == 409 || status == 429 || status >= 500
}

// Do sends a request and decodes a JSON answer into out (when not nil). It
// is also the way to call an endpoint this package does not wrap.
func (c *Client) Do(ctx context.Context, method, path string, body io.Reader, out any, opts ...Option) error {
	data, err := c.DoRaw(ctx, method, path, body, opts...)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// DoRaw sends a request, retrying as the client is set to, and returns the
// body of the successful answer.
func (c *Client) DoRaw(ctx context.Context, method, path string, body io.Reader, opts ...Option) ([]byte, error) {
	o := callOpts{timeout: c.Timeout, maxRetries: c.MaxRetries, headers: http.Header{}}
	if o.timeout == 0 {
		o.timeout = 60 * time.Second
	}
	if o.maxRetries == 0 {
		o.maxRetries = 2
	}
	for _, opt := range opts {
		opt(&o)
	}
	var payload []byte
	if body != nil {
		var err error
		if payload, err = io.ReadAll(body); err != nil {
			return nil, err
		}
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	for attempt := 0; ; attempt++ {
		data, resp, err := c.attempt(ctx, hc, method, path, payload, o)
		if o.raw != nil && resp != nil {
			*o.raw = resp
		}
		var wait time.Duration
		switch {
		case err == nil && resp.StatusCode < 300:
			return data, nil
		case err == nil:
			err = problemOf(resp, data)
			if !retryable(resp.StatusCode) {
				return nil, err
			}
			wait = retryAfter(resp.Header)
		case ctx.Err() != nil:
			return nil, err // the caller gave up
		}
		if attempt >= o.maxRetries || o.maxRetries < 0 {
			return nil, err
		}
		if wait == 0 || wait > 60*time.Second {
			wait = min(time.Duration(500<<attempt)*time.Millisecond, 8*time.Second)
			wait += time.Duration(rand.Int64N(int64(wait / 4)))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// problemOf is the error of an answer that is not a success.
func problemOf(resp *http.Response, data []byte) error {
	e := &Error{Status: resp.StatusCode, Header: resp.Header}
	if json.Unmarshal(data, e) != nil || e.Title == "" {
		e.Title = http.StatusText(resp.StatusCode)
	}
	e.Status = resp.StatusCode
	e.Code = e.Type[strings.LastIndex(e.Type, "/")+1:]
	return typed(e)
}

// Backup asks the server for a backup of its store (admin key) and returns
// the archive as the server streams it, for as long as ctx allows: no
// timeout and no retry, since a backup of a large store takes a while and
// each try makes a new one. The caller reads it to its end (and checks
// it: a server that fails mid-stream cuts the connection) and closes it.
func (c *Client) Backup(ctx context.Context) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/v1/admin/backups", nil)
	if err != nil {
		return nil, err
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	req.Header.Set("Accept", "application/gzip, application/problem+json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, problemOf(resp, data)
	}
	return resp.Body, nil
}

func (c *Client) attempt(ctx context.Context, hc *http.Client, method, path string, payload []byte, o callOpts) ([]byte, *http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return nil, nil, err
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range o.headers {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, resp, err
	}
	return data, resp, nil
}

// Factories lists the server's factories.
func (c *Client) Factories(ctx context.Context) ([]factory.FactorySummary, error) {
	var out struct {
		Factories []factory.FactorySummary `json:"factories"`
	}
	return out.Factories, c.Do(ctx, http.MethodGet, "/v1/factories", nil, &out)
}

// Factory reads one factory's status, with its webhooks and automations.
func (c *Client) Factory(ctx context.Context, uid string) (*factory.FactoryStatus, error) {
	out := &factory.FactoryStatus{}
	return out, c.Do(ctx, http.MethodGet, "/v1/factories/"+url.PathEscape(uid), nil, out)
}

// SyncFactory asks the server to sync a factory now and answers its status.
func (c *Client) SyncFactory(ctx context.Context, uid string) (*factory.FactoryStatus, error) {
	out := &factory.FactoryStatus{}
	return out, c.Do(ctx, http.MethodPost, "/v1/factories/"+url.PathEscape(uid)+"/sync", nil, out)
}

// FactoryState reads the state a plan compares with (admin scope), so that
// a dry-run against a server checks everything a local one would.
func (c *Client) FactoryState(name string) (*factory.State, error) {
	out := &factory.State{}
	return out, c.Do(context.Background(), http.MethodGet, "/v1/admin/factories/"+url.PathEscape(name)+"/state", nil, out)
}

// RevealSecret reads a webhook's generated secret, which works once.
func (c *Client) RevealSecret(ctx context.Context, uid string) (string, error) {
	var out struct {
		Secret string `json:"secret"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/webhooks/"+url.PathEscape(uid)+"/reveal-secret", nil, &out)
	return out.Secret, err
}

// Secret is a managed secret's metadata, as the admin API lists it.
type Secret = factory.Secret

// Secrets lists the managed secrets: names, versions and dates, never values.
func (c *Client) Secrets(ctx context.Context) ([]*Secret, error) {
	var out struct {
		Secrets []*Secret `json:"secrets"`
	}
	return out.Secrets, c.Do(ctx, http.MethodGet, "/v1/secrets", nil, &out)
}

// SecretResult is a created or rotated secret; Value is set, once, when the
// server generated it.
type SecretResult = factory.SecretResponse

// CreateSecret creates a secret; a nil value asks the server to generate one.
func (c *Client) CreateSecret(ctx context.Context, name string, value []byte, urlSafe bool) (*SecretResult, error) {
	return c.putSecret(ctx, "/v1/secrets", map[string]any{"name": name, "url_safe": urlSafe}, value)
}

// RotateSecret replaces a secret's value; a nil value asks the server to
// generate one. Webhooks using it have switched when the call returns.
func (c *Client) RotateSecret(ctx context.Context, name string, value []byte) (*SecretResult, error) {
	return c.putSecret(ctx, "/v1/secrets/"+url.PathEscape(name)+"/rotate", map[string]any{}, value)
}

func (c *Client) putSecret(ctx context.Context, path string, body map[string]any, value []byte) (*SecretResult, error) {
	if value != nil {
		body["value"] = string(value)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	out := &SecretResult{}
	return out, c.Do(ctx, http.MethodPost, path, bytes.NewReader(b), out)
}

// DeleteSecret deletes a secret no webhook uses.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/secrets/"+url.PathEscape(name), nil, nil)
}

// Delivery is one record of a webhook's delivery log; Payload is set when
// one delivery of the Accepted label is read.
type Delivery = factory.DeliveryView

// PageInfo says whether more items follow and where.
type PageInfo = factory.PageInfo

// Deliveries lists a webhook's delivery log, newest first.
func (c *Client) Deliveries(ctx context.Context, uid string, limit int, cursor string) ([]Delivery, PageInfo, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out struct {
		Deliveries []Delivery `json:"deliveries"`
		PageInfo   PageInfo   `json:"page_info"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/webhooks/"+url.PathEscape(uid)+"/deliveries?"+q.Encode(), nil, &out)
	return out.Deliveries, out.PageInfo, err
}

// Delivery reads one delivery, with its payload when it was accepted.
func (c *Client) Delivery(ctx context.Context, uid, id string) (*Delivery, error) {
	out := &Delivery{}
	return out, c.Do(ctx, http.MethodGet, "/v1/webhooks/"+url.PathEscape(uid)+"/deliveries/"+url.PathEscape(id), nil, out)
}

// SetSuspended suspends or resumes a webhook and answers it.
func (c *Client) SetSuspended(ctx context.Context, uid string, suspended bool) (*factory.WebhookStatus, error) {
	verb := "resume"
	if suspended {
		verb = "suspend"
	}
	out := &factory.WebhookStatus{}
	return out, c.Do(ctx, http.MethodPost, "/v1/webhooks/"+url.PathEscape(uid)+"/"+verb, nil, out)
}

// TestFilter evaluates an automation against a stored accepted delivery.
// The answer is decoded into out (server.TestResult's shape).
func (c *Client) TestFilter(ctx context.Context, automationUID, deliveryID string, out any) error {
	b, _ := json.Marshal(map[string]string{"delivery_id": deliveryID})
	return c.Do(ctx, http.MethodPost, "/v1/automations/"+url.PathEscape(automationUID)+"/test-filter", bytes.NewReader(b), out)
}

// RecentPayloads reads the bodies of a webhook's most recent accepted
// deliveries, newest first, at most n. Kept for callers from before
// RecentDeliveries, which also gives each delivery's event type.
func (c *Client) RecentPayloads(webhookUID string, n int) ([][]byte, error) {
	ds, err := c.RecentDeliveries(webhookUID, n)
	out := make([][]byte, len(ds))
	for i, d := range ds {
		out[i] = d.Body
	}
	return out, err
}

// RecentDeliveries reads a webhook's most recent accepted deliveries
// (body and event type), newest first, at most n (for a dry-run's impact
// report).
func (c *Client) RecentDeliveries(webhookUID string, n int) ([]factory.RecentDelivery, error) {
	ctx := context.Background()
	var out []factory.RecentDelivery
	cursor := ""
	for len(out) < n {
		list, page, err := c.Deliveries(ctx, webhookUID, 100, cursor)
		if err != nil {
			var e *Error
			if errors.As(err, &e) && e.Status == http.StatusNotFound {
				return nil, nil // a UID the server does not know: nothing to replay
			}
			return nil, err
		}
		for _, d := range list {
			if d.Label != factory.LabelAccepted || len(out) == n {
				continue
			}
			full, err := c.Delivery(ctx, webhookUID, d.ID)
			if err != nil {
				return nil, err
			}
			out = append(out, factory.RecentDelivery{EventType: full.EventType, Body: full.Payload})
		}
		if !page.HasNextPage {
			break
		}
		cursor = page.NextCursor
	}
	return out, nil
}

// APIKeys lists the API keys' records (admin): names, scopes, prefixes.
func (c *Client) APIKeys(ctx context.Context) ([]*factory.APIKey, error) {
	var out struct {
		Keys []*factory.APIKey `json:"api_keys"`
	}
	return out.Keys, c.Do(ctx, http.MethodGet, "/v1/admin/api-keys", nil, &out)
}

// CreateAPIKey creates an API key (admin); the key is in the answer, once.
func (c *Client) CreateAPIKey(ctx context.Context, name, scope string) (*factory.NewAPIKey, error) {
	return c.CreateAPIKeyWith(ctx, factory.APIKeyRequest{Name: name, Scope: scope})
}

// CreateAPIKeyWith creates an API key (admin) with the secrets of its
// person's own code host tokens; the key is in the answer, once.
func (c *Client) CreateAPIKeyWith(ctx context.Context, req factory.APIKeyRequest) (*factory.NewAPIKey, error) {
	b, _ := json.Marshal(req)
	out := &factory.NewAPIKey{}
	return out, c.Do(ctx, http.MethodPost, "/v1/admin/api-keys", bytes.NewReader(b), out)
}

// RevokeAPIKey revokes an API key (admin), given the key itself.
func (c *Client) RevokeAPIKey(ctx context.Context, key string) (*factory.APIKey, error) {
	b, _ := json.Marshal(map[string]string{"key": key})
	var out struct {
		Key *factory.APIKey `json:"api_key"`
	}
	return out.Key, c.Do(ctx, http.MethodPost, "/v1/admin/api-keys/revoke", bytes.NewReader(b), &out)
}

// FindDelivery reads a delivery by its ID alone, with its payload when it
// was accepted (read scope).
func (c *Client) FindDelivery(ctx context.Context, id string) (*Delivery, error) {
	out := &Delivery{}
	return out, c.Do(ctx, http.MethodGet, "/v1/deliveries/"+url.PathEscape(id), nil, out)
}

// Redeliver delivers an accepted delivery's payload again, as a new
// delivery evaluated as if it had just arrived (admin); it returns the new
// delivery's ID.
func (c *Client) Redeliver(ctx context.Context, id string) (string, error) {
	var out struct {
		ID string `json:"delivery_id"`
	}
	return out.ID, c.Do(ctx, http.MethodPost, "/v1/deliveries/"+url.PathEscape(id)+"/redeliver", nil, &out)
}
