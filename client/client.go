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
	"net/http"
	"net/url"
	"strings"
	"time"

	"factory/reconciler"
	"factory/store"
)

// Client calls one server.
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
}

// New returns a client with a default timeout.
func New(baseURL, apiKey string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), APIKey: apiKey, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Error is a failed call: the status and the server's problem body.
type Error struct {
	Status int    `json:"status"`
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"-"`
}

func (e *Error) Error() string {
	msg := e.Title
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return fmt.Sprintf("server answered %d: %s", e.Status, msg)
}

// Do sends a request and decodes a JSON answer into out (when not nil). It
// is also the way to call an endpoint this package does not wrap.
func (c *Client) Do(ctx context.Context, method, path string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return err
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		e := &Error{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || e.Title == "" {
			e.Title = http.StatusText(resp.StatusCode)
		}
		e.Status = resp.StatusCode
		e.Code = e.Type[strings.LastIndex(e.Type, "/")+1:]
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// Factories lists the server's factories.
func (c *Client) Factories(ctx context.Context) ([]reconciler.FactorySummary, error) {
	var out struct {
		Factories []reconciler.FactorySummary `json:"factories"`
	}
	return out.Factories, c.Do(ctx, http.MethodGet, "/v1/factories", nil, &out)
}

// Factory reads one factory's status, with its webhooks and automations.
func (c *Client) Factory(ctx context.Context, uid string) (*reconciler.FactoryStatus, error) {
	out := &reconciler.FactoryStatus{}
	return out, c.Do(ctx, http.MethodGet, "/v1/factories/"+url.PathEscape(uid), nil, out)
}

// SyncFactory asks the server to sync a factory now and answers its status.
func (c *Client) SyncFactory(ctx context.Context, uid string) (*reconciler.FactoryStatus, error) {
	out := &reconciler.FactoryStatus{}
	return out, c.Do(ctx, http.MethodPost, "/v1/factories/"+url.PathEscape(uid)+"/sync", nil, out)
}

// FactoryState reads the state a plan compares with (admin scope), so that
// a dry-run against a server checks everything a local one would.
func (c *Client) FactoryState(name string) (*store.State, error) {
	out := &store.State{}
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
type Secret = store.Secret

// Secrets lists the managed secrets: names, versions and dates, never values.
func (c *Client) Secrets(ctx context.Context) ([]*Secret, error) {
	var out struct {
		Secrets []*Secret `json:"secrets"`
	}
	return out.Secrets, c.Do(ctx, http.MethodGet, "/v1/secrets", nil, &out)
}

// SecretResult is a created or rotated secret; Value is set, once, when the
// server generated it.
type SecretResult struct {
	Secret *Secret `json:"secret"`
	Value  string  `json:"value,omitempty"`
}

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
type Delivery struct {
	store.Delivery
	Payload json.RawMessage `json:"payload,omitempty"`
}

// PageInfo says whether more items follow and where.
type PageInfo struct {
	HasNextPage bool   `json:"has_next_page"`
	NextCursor  string `json:"next_cursor,omitempty"`
}

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
func (c *Client) SetSuspended(ctx context.Context, uid string, suspended bool) (*reconciler.WebhookStatus, error) {
	verb := "resume"
	if suspended {
		verb = "suspend"
	}
	out := &reconciler.WebhookStatus{}
	return out, c.Do(ctx, http.MethodPost, "/v1/webhooks/"+url.PathEscape(uid)+"/"+verb, nil, out)
}

// TestFilter evaluates an automation against a stored accepted delivery.
// The answer is decoded into out (server.TestResult's shape).
func (c *Client) TestFilter(ctx context.Context, automationUID, deliveryID string, out any) error {
	b, _ := json.Marshal(map[string]string{"delivery_id": deliveryID})
	return c.Do(ctx, http.MethodPost, "/v1/automations/"+url.PathEscape(automationUID)+"/test-filter", bytes.NewReader(b), out)
}

// RecentPayloads reads the bodies of a webhook's most recent accepted
// deliveries, newest first, at most n (for a dry-run's impact report).
func (c *Client) RecentPayloads(webhookUID string, n int) ([][]byte, error) {
	ctx := context.Background()
	var out [][]byte
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
			if d.Label != store.LabelAccepted || len(out) == n {
				continue
			}
			full, err := c.Delivery(ctx, webhookUID, d.ID)
			if err != nil {
				return nil, err
			}
			out = append(out, full.Payload)
		}
		if !page.HasNextPage {
			break
		}
		cursor = page.NextCursor
	}
	return out, nil
}
