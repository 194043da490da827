package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"factory/client"
)

// misbehaving answers on purpose: 503 then 200, 429 with Retry-After, a
// slow body, a 404 problem. calls counts requests; keys records the
// Idempotency-Keys of creates.
func misbehaving(calls *atomic.Int32, keys *[]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch r.URL.Path {
		case "/v1/agent/runs":
			*keys = append(*keys, r.Header.Get("Idempotency-Key"))
			if n == 1 {
				w.WriteHeader(503)
				return
			}
			w.Write([]byte(`{"run_id":"run_1","task_id":"run_1","state":"QUEUED"}`))
		case "/v1/agent/runs/limited":
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(429)
				w.Write([]byte(`{"type":"https://x/errors/resource_unavailable","title":"Too Many Requests","status":429,"detail":"slow down"}`))
				return
			}
			w.Write([]byte(`{"run_id":"limited","state":"QUEUED"}`))
		case "/v1/agent/runs/slow":
			time.Sleep(300 * time.Millisecond)
			w.Write([]byte(`{"run_id":"slow"}`))
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(404)
			w.Write([]byte(`{"type":"https://x/errors/resource_not_found","title":"Not Found","status":404,"detail":"no run run_nope"}`))
		}
	}
}

// A server that misbehaves on purpose: each misbehaviour is retried, waited
// for, or surfaced as the typed error it is.
func TestRetriesTimeoutsAndErrors(t *testing.T) {
	var calls atomic.Int32
	var keys []string
	srv := httptest.NewServer(misbehaving(&calls, &keys))
	defer srv.Close()
	ctx := context.Background()
	c := client.New(srv.URL, "k")

	// 503 then 200: retried, with the same Idempotency-Key.
	created, err := c.CreateRun(ctx, client.RunRequest{Prompt: "x"})
	if err != nil || created.RunID != "run_1" || len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("503 then 200: %v %+v keys %v", err, created, keys)
	}

	// 429 with Retry-After: waited, then retried.
	calls.Store(0)
	start := time.Now()
	var raw *http.Response
	run, err := c.GetRun(ctx, "limited", client.WithRawResponse(&raw))
	if err != nil || run.RunID != "limited" || time.Since(start) < time.Second || raw.StatusCode != 200 {
		t.Fatalf("429: %v %+v after %v", err, run, time.Since(start))
	}
	// Without retries the 429 surfaces as a *RateLimitError with the wait.
	calls.Store(0)
	_, err = c.GetRun(ctx, "limited", client.WithMaxRetries(-1))
	var rl *client.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != time.Second || rl.Problem.Detail != "slow down" {
		t.Fatalf("429 without retries: %v", err)
	}

	// A per-request timeout, shorter than the slow body.
	_, err = c.GetRun(ctx, "slow", client.WithTimeout(100*time.Millisecond), client.WithMaxRetries(-1))
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("timeout: %v", err)
	}
	if run, err := c.GetRun(ctx, "slow"); err != nil || run.RunID != "slow" {
		t.Fatalf("default timeout: %v", err)
	}

	// A 404 is a *NotFoundError carrying the problem, and is not retried.
	calls.Store(0)
	_, err = c.GetRun(ctx, "run_nope")
	var nf *client.NotFoundError
	var base *client.Error
	if !errors.As(err, &nf) || !errors.As(err, &base) || base.Detail != "no run run_nope" || base.Code != "resource_not_found" || calls.Load() != 1 {
		t.Fatalf("404: %v (%d calls)", err, calls.Load())
	}
	if client.StatusOf(err) != 404 {
		t.Fatal("StatusOf")
	}

	// A connection error is retried, then reported.
	dead := client.New("http://127.0.0.1:1", "k")
	dead.MaxRetries = 1
	if _, err := dead.GetRun(ctx, "x"); err == nil || client.StatusOf(err) != 0 {
		t.Fatalf("connection error: %v", err)
	}
}
