package server

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"factory/internal/store"

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
// returns the position after the last one written. A position is the
// event's place among all the run's events (an event the timeline does not
// show is passed over): IDs stay the same at every read.
func (s *Server) sendEvents(w http.ResponseWriter, run *factory.Run, next int) (int, error) {
	for next < run.Events {
		// A page at a time: the stream never holds the whole timeline.
		events, err := s.store.RunEventsPage(run.ID, next, factory.TimelinePage)
		if err != nil || len(events) == 0 {
			return next, err
		}
		for _, e := range events {
			te, ok := factory.TimelineEntry(run.ID, next, e)
			next++
			if !ok {
				continue
			}
			b, err := json.Marshal(te)
			if err != nil {
				return next, err
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", next-1, te.EventType, b); err != nil {
				return next, err
			}
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

// factoryEvents is GET /v1/events?factory_uid=: a Server-Sent Events stream
// of a factory's deliveries (as the delivery log records them), its
// runs' changes (the run as the API shows it) and its tasks' (created,
// moved, deleted: the task as the API shows it), each {"kind": "delivery"|
// "run"|"task", ...}, in time order. An event's ID is its time in Unix
// nanoseconds (a delivery's arrival, a run's last update): Last-Event-ID
// (or last_event_id in the query) resumes after it. Without either the
// stream starts now.
func (s *Server) factoryEvents(w http.ResponseWriter, r *http.Request) error {
	uid := r.URL.Query().Get("factory_uid")
	if uid == "" {
		return errorf(CodeInvalidRequest, "factory_uid: required")
	}
	f, err := s.factoryByUID(uid)
	if err != nil {
		return err
	}
	cursor := time.Now().UnixNano()
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		// A page's first connection names the moment it was rendered, so
		// that nothing between the render and the connection is missed;
		// a reconnection's header wins.
		last = r.URL.Query().Get("last_event_id")
	}
	if last != "" {
		if cursor, err = strconv.ParseInt(last, 10, 64); err != nil {
			return errorf(CodeInvalidRequest, "Last-Event-ID: must be the ID of an event of this stream")
		}
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": factory "+f.UID+"\n\n")
	_ = rc.Flush()
	poll, beat := time.NewTicker(eventsPoll), time.NewTicker(eventsHeartbeat)
	defer poll.Stop()
	defer beat.Stop()
	for {
		evs, err := s.factoryChanges(f, cursor)
		if err != nil {
			return nil
		}
		for _, e := range evs {
			b, _ := json.Marshal(e.body)
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.at, e.kind, b); err != nil {
				return nil
			}
			cursor = e.at
		}
		if len(evs) > 0 {
			_ = rc.Flush()
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-beat.C:
			fmt.Fprint(w, ": heartbeat\n\n")
			_ = rc.Flush()
		case <-poll.C:
		}
	}
}

type change struct {
	at   int64
	kind string
	body map[string]any
}

// factoryChanges lists what happened in a factory after a moment: its
// webhooks' deliveries, its runs' updates and its tasks', oldest first.
func (s *Server) factoryChanges(f *factory.Factory, after int64) ([]change, error) {
	var out []change
	hooks, err := s.store.Webhooks(f.Name)
	if err != nil {
		return nil, err
	}
	for _, hook := range hooks {
		ds, err := s.store.DeliveriesSince(hook.UID, time.Unix(0, after), 50)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if at := d.Time.UnixNano(); at > after {
				out = append(out, change{at: at, kind: "delivery", body: map[string]any{"kind": "delivery", "delivery": d}})
			}
		}
	}
	page, err := s.store.ListRuns(store.RunQuery{Equal: map[string]string{"factory_uid": f.UID}, SortBy: "updated_at", Asc: true, MinNanos: after + 1, Limit: 100})
	if err != nil {
		return nil, err
	}
	for _, run := range page.Runs {
		out = append(out, change{at: run.UpdatedAt.UnixNano(), kind: "run", body: map[string]any{"kind": "run", "run": run.Item()}})
	}
	tasks, err := s.taskChanges(f, after)
	if err != nil {
		return nil, err
	}
	out = append(out, tasks...)
	slices.SortStableFunc(out, func(a, b change) int { return cmp.Compare(a.at, b.at) })
	return out, nil
}

// taskChanges are the factory's tasks changed after a moment, each as
// the API shows it (and whether it was deleted): the dashboard's board and
// task pages reload on them.
func (s *Server) taskChanges(f *factory.Factory, after int64) ([]change, error) {
	if s.foreman == nil {
		return nil, nil
	}
	tasks, err := s.store.Tasks(f.UID)
	if err != nil {
		return nil, err
	}
	var out []change
	for _, t := range tasks {
		if at := t.UpdatedAt.UnixNano(); at > after {
			out = append(out, change{at: at, kind: "task", body: map[string]any{"kind": "task", "task": t.Item(true), "deleted": t.Deleted != nil}})
		}
	}
	return out, nil
}
