package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ErrNoStream says the server does not stream run events (a server from
// before they existed): poll the timeline instead.
var ErrNoStream = errors.New("the server does not stream run events")

// FollowEvents reads a run's live events (GET /v1/agent/runs/{id}/events,
// Server-Sent Events) from position from on, calling fn with each timeline
// event and its position, until the run ends (the stream's end event: it
// returns the run's final state), ctx ends or fn fails. A stream that
// breaks is resumed after the last event read (Last-Event-ID).
func (c *Client) FollowEvents(ctx context.Context, id string, from int, fn func(pos int, e RunEvent) error) (string, error) {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	next := from
	for attempt := 0; ; attempt++ {
		state, err := c.stream(ctx, hc, id, &next, fn)
		if err == nil || errors.Is(err, ErrNoStream) || ctx.Err() != nil || attempt >= 5 {
			return state, err
		}
		var e *Error
		if errors.As(err, &e) {
			return "", err // the server refused: no point in trying again
		}
	}
}

func (c *Client) stream(ctx context.Context, hc *http.Client, id string, next *int, fn func(int, RunEvent) error) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/v1/agent/runs/"+url.PathEscape(id)+"/events", nil)
	if err != nil {
		return "", err
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	req.Header.Set("Accept", "text/event-stream")
	if *next > 0 {
		req.Header.Set("Last-Event-ID", strconv.Itoa(*next-1))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound && !strings.Contains(resp.Header.Get("Content-Type"), "problem"):
		return "", ErrNoStream
	case resp.StatusCode != http.StatusOK:
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := &Error{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || e.Title == "" {
			e.Title = http.StatusText(resp.StatusCode)
		}
		return "", typed(e)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var event, data, evID string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event == "end" {
				var end struct {
					State string `json:"state"`
				}
				_ = json.Unmarshal([]byte(data), &end)
				return end.State, nil
			}
			if data != "" {
				var e RunEvent
				if err := json.Unmarshal([]byte(data), &e); err != nil {
					return "", fmt.Errorf("run event %s: %w", evID, err)
				}
				pos, _ := strconv.Atoi(evID)
				if err := fn(pos, e); err != nil {
					return "", err
				}
				*next = pos + 1
			}
			event, data, evID = "", "", ""
		case strings.HasPrefix(line, "event: "):
			event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		case strings.HasPrefix(line, "id: "):
			evID = line[len("id: "):]
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", io.ErrUnexpectedEOF // the stream ended without its end event: resume
}
