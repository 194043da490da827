package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"factory"
)

// Live run events (docs/spec/dashboard.md, "Live updates"): GET
// /v1/agent/runs/{runId}/events is a Server-Sent Events stream of the run's
// timeline events, the same objects as the timeline endpoint, each with
// its position in the timeline as its ID, so that a client that
// reconnects with Last-Event-ID gets what it missed and nothing twice.

// Intervals of the stream: how often the run is looked at (a state change
// reaches the client within it), and how often an idle stream says it is
// alive.
var (
	eventsPoll      = 100 * time.Millisecond
	eventsHeartbeat = 15 * time.Second
)

// runEvents streams a run's timeline. It ends once the run has ended and
// every event is sent (a follow-up that continues the run is seen by a new
// stream, resumed from the last ID).
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) error {
	run, err := s.runOf(r)
	if err != nil {
		return err
	}
	next, err := resumeFrom(r)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	flusher := flushFunc(func() { _ = rc.Flush() })
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not buffer the stream
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": run "+run.ID+"\n\n")
	flusher.Flush()
	poll, beat := time.NewTicker(eventsPoll), time.NewTicker(eventsHeartbeat)
	defer poll.Stop()
	defer beat.Stop()
	sent := -1 // the run's event count when the events were last read
	for {
		run, err := s.store.Run(run.ID)
		if err != nil {
			return nil // the stream has started: an error ends it
		}
		if run.Events != sent {
			if next, err = s.sendEvents(w, run, next); err != nil {
				return nil
			}
			sent = run.Events
			flusher.Flush()
		}
		if run.State.Terminal() && next >= run.Events {
			fmt.Fprint(w, "event: end\ndata: {\"state\":\""+string(run.State)+"\"}\n\n")
			flusher.Flush()
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-beat.C:
			fmt.Fprint(w, ": heartbeat\n\n")
			flusher.Flush()
		case <-poll.C:
		}
	}
}

// sendEvents writes the run's timeline events from position next on, and
// returns the position after the last one written.
func (s *Server) sendEvents(w http.ResponseWriter, run *factory.Run, next int) (int, error) {
	events, err := s.store.RunEvents(run.ID)
	if err != nil {
		return next, err
	}
	timeline := factory.Timeline(run.ID, events)
	for ; next < len(timeline); next++ {
		b, err := json.Marshal(timeline[next])
		if err != nil {
			return next, err
		}
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", next, timeline[next].EventType, b); err != nil {
			return next, err
		}
	}
	return next, nil
}

// resumeFrom is the first position to send: after Last-Event-ID (the
// header, or last_event_id in the query for clients that cannot set it).
func resumeFrom(r *http.Request) (int, error) {
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("last_event_id")
	}
	if last == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(last))
	if err != nil || n < 0 {
		return 0, errorf(CodeInvalidRequest, "Last-Event-ID: must be the ID of an event of this stream (a number)")
	}
	return n + 1, nil
}

// flushFunc flushes a stream through its ResponseController.
type flushFunc func()

func (f flushFunc) Flush() { f() }
