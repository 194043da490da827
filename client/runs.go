package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"factory"
)

// Run is a run as the Agents API shows it (RunItem).
type Run = factory.RunItem

// RunRequest is RunAgentRequest.
type RunRequest = factory.RunRequest

// RunAttachment is a file sent with a run (Data is base64).
type RunAttachment = factory.RunAttachment

// RunCreated is the answer to a create.
type RunCreated struct {
	RunID string `json:"run_id"`
	State string `json:"state"`
}

// CreateRun creates a run. It sends an Idempotency-Key of its own, so that
// its retries cannot create the run twice.
func (c *Client) CreateRun(ctx context.Context, req RunRequest, opts ...Option) (*RunCreated, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	k := make([]byte, 16)
	rand.Read(k)
	opts = append([]Option{WithHeader("Idempotency-Key", hex.EncodeToString(k))}, opts...)
	out := &RunCreated{}
	return out, c.Do(ctx, http.MethodPost, "/v1/agent/runs", bytes.NewReader(b), out, opts...)
}

// GetRun reads one run.
func (c *Client) GetRun(ctx context.Context, id string, opts ...Option) (*Run, error) {
	out := &Run{}
	return out, c.Do(ctx, http.MethodGet, "/v1/agent/runs/"+url.PathEscape(id), nil, out, opts...)
}

// RunPage is one page of a list.
type RunPage struct {
	Runs     []Run    `json:"runs"`
	PageInfo PageInfo `json:"page_info"`
}

// ListRuns reads one page; query holds the list parameters (state, limit,
// sort_by, cursor, ...).
func (c *Client) ListRuns(ctx context.Context, query url.Values, opts ...Option) (*RunPage, error) {
	out := &RunPage{}
	return out, c.Do(ctx, http.MethodGet, "/v1/agent/runs?"+query.Encode(), nil, out, opts...)
}

// AllRuns iterates over every run the query matches, page after page.
func (c *Client) AllRuns(ctx context.Context, query url.Values) iter.Seq2[Run, error] {
	return func(yield func(Run, error) bool) {
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		for {
			page, err := c.ListRuns(ctx, q)
			if err != nil {
				yield(Run{}, err)
				return
			}
			for _, r := range page.Runs {
				if !yield(r, nil) {
					return
				}
			}
			if !page.PageInfo.HasNextPage {
				return
			}
			q.Set("cursor", page.PageInfo.NextCursor)
		}
	}
}

// FollowUp sends a message to a run.
func (c *Client) FollowUp(ctx context.Context, id, message string, opts ...Option) error {
	b, _ := json.Marshal(map[string]string{"message": message})
	return c.Do(ctx, http.MethodPost, "/v1/agent/runs/"+url.PathEscape(id)+"/followups", bytes.NewReader(b), nil, opts...)
}

// CancelRun cancels a queued or running run and returns its ID.
func (c *Client) CancelRun(ctx context.Context, id string, opts ...Option) (string, error) {
	var out string
	return out, c.Do(ctx, http.MethodPost, "/v1/agent/runs/"+url.PathEscape(id)+"/cancel", nil, &out, opts...)
}

// RunEvent is one entry of a run's timeline.
type RunEvent = factory.RunEvent

// Timeline reads a run's whole timeline, oldest first, a page at a time.
func (c *Client) Timeline(ctx context.Context, id string, opts ...Option) ([]RunEvent, error) {
	var all []RunEvent
	cursor := ""
	for {
		events, next, more, err := c.TimelinePage(ctx, id, cursor, opts...)
		if err != nil {
			return all, err
		}
		all = append(all, events...)
		if !more || next == "" {
			return all, nil
		}
		cursor = next
	}
}

// TimelinePage reads one page of a run's timeline, from cursor ("" for the
// first): its events, the cursor of what comes after them (given also
// for the last page, to read what a run in progress adds later), and
// whether more are there now.
func (c *Client) TimelinePage(ctx context.Context, id, cursor string, opts ...Option) (events []RunEvent, next string, more bool, err error) {
	var out struct {
		Events   []RunEvent       `json:"events"`
		PageInfo factory.PageInfo `json:"page_info"`
	}
	path := "/v1/agent/runs/" + url.PathEscape(id) + "/timeline"
	if cursor != "" {
		path += "?cursor=" + url.QueryEscape(cursor)
	}
	err = c.Do(ctx, http.MethodGet, path, nil, &out, opts...)
	return out.Events, out.PageInfo.NextCursor, out.PageInfo.HasNextPage, err
}

// LimitQuery is a query with a limit, for convenience.
func LimitQuery(limit int) url.Values { return url.Values{"limit": {strconv.Itoa(limit)}} }
