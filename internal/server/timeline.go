package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"factory"
	"factory/internal/cursor"
)

// A run's timeline is read a page at a time, by every reader (the API's
// timeline, conversation and event stream, the dashboard's run page): an
// agent's output is bounded (factory.MaxRunMessages), and no reader holds
// more than factory.TimelinePage entries of it at once.

// timelinePage is what a request asks of a run's timeline: from which
// position (a cursor the last page gave), how many entries (limit, 1 to
// factory.TimelinePage, that many by default), and the state the cursor
// carries (a conversation's turn in progress).
type timelinePage struct {
	from, limit int
	state       string
}

// readTimelinePage reads the page parameters of a request on a run's
// timeline of a kind (timeline, conversation): a cursor is sealed for
// that run and kind.
func (s *Server) readTimelinePage(r *http.Request, runID, kind string) (timelinePage, error) {
	p := timelinePage{limit: factory.TimelinePage}
	qs := r.URL.Query()
	if v := qs.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > factory.TimelinePage {
			return p, errorf(CodeInvalidRequest, fmt.Sprintf("limit: must be a whole number from 1 to %d", factory.TimelinePage))
		}
		p.limit = n
	}
	c := qs.Get("cursor")
	if c == "" {
		return p, nil
	}
	key, err := s.cursorKey()
	if err != nil {
		return p, err
	}
	pos, err := cursor.Open(key, kind+":"+runID, c)
	if err != nil {
		return p, errorf(CodeInvalidRequest, "cursor: not one this server gave for this run's "+kind)
	}
	n, state, _ := strings.Cut(pos, "|")
	if p.from, err = strconv.Atoi(n); err != nil || p.from < 0 {
		return p, errorf(CodeInvalidRequest, "cursor: not one this server gave for this run's "+kind)
	}
	p.state = state
	return p, nil
}

// pageInfo is the page's paging: the cursor of the next page (given
// always, so that a reader of a run in progress resumes from where it is),
// and whether the run has more entries now.
func (s *Server) pageInfo(run *factory.Run, kind string, next int, state string) (factory.PageInfo, error) {
	key, err := s.cursorKey()
	if err != nil {
		return factory.PageInfo{}, err
	}
	pos := strconv.Itoa(next)
	if state != "" {
		pos += "|" + state
	}
	return factory.PageInfo{HasNextPage: next < run.Events, NextCursor: cursor.Seal(key, kind+":"+run.ID, pos)}, nil
}

// runTimeline is GET /v1/agent/runs/{runId}/timeline: a page of the run's
// timeline, oldest first, and the cursor of the next.
func (s *Server) runTimeline(w http.ResponseWriter, r *http.Request) error {
	run, err := s.runOf(r)
	if err != nil {
		return err
	}
	p, err := s.readTimelinePage(r, run.ID, "timeline")
	if err != nil {
		return err
	}
	events, err := s.store.RunEventsPage(run.ID, p.from, p.limit)
	if err != nil {
		return err
	}
	out := make([]factory.TimelineEvent, 0, len(events))
	for i, e := range events {
		if te, ok := factory.TimelineEntry(run.ID, p.from+i, e); ok {
			out = append(out, te)
		}
	}
	page, err := s.pageInfo(run, "timeline", p.from+len(events), "")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": out, "page_info": page})
	return nil
}

// runConversation is GET /v1/agent/runs/{runId}/conversation: a page of
// the run's turns as the agent's session streamed them (built from a page
// of its timeline; a turn that began on an earlier page is continued), and
// the cursor of the next.
func (s *Server) runConversation(w http.ResponseWriter, r *http.Request) error {
	run, err := s.runOf(r)
	if err != nil {
		return err
	}
	p, err := s.readTimelinePage(r, run.ID, "conversation")
	if err != nil {
		return err
	}
	var from factory.ConversationState
	if p.state != "" {
		b, err := base64.RawURLEncoding.DecodeString(p.state)
		if err != nil || json.Unmarshal(b, &from) != nil {
			return errorf(CodeInvalidRequest, "cursor: not one this server gave for this run's conversation")
		}
	}
	events, err := s.store.RunEventsPage(run.ID, p.from, p.limit)
	if err != nil {
		return err
	}
	conv, end := factory.BuildConversationPage(run, events, from)
	b, _ := json.Marshal(end)
	page, err := s.pageInfo(run, "conversation", p.from+len(events), base64.RawURLEncoding.EncodeToString(b))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		factory.Conversation
		PageInfo factory.PageInfo `json:"page_info"`
	}{conv, page})
	return nil
}

// lastPage is the last page of a run's timeline (the dashboard's run
// page), with where it begins, and the conversation of its turns (the
// first, if it began earlier, continued).
func (s *Server) lastPage(run *factory.Run) (from int, events []*factory.RunEvent, conv factory.Conversation, err error) {
	from = max(0, run.Events-factory.TimelinePage)
	if events, err = s.store.RunEventsPage(run.ID, from, factory.TimelinePage); err != nil {
		return 0, nil, conv, err
	}
	var state factory.ConversationState
	if from > 0 {
		// The turn in progress where the page begins: the run's turns
		// less those that open on the page.
		opened := 0
		for _, e := range events {
			if e.Kind == "started" || e.Kind == "created" {
				opened++
			}
		}
		state.Turn = max(1, run.Turns-opened)
		if len(events) > 0 {
			at := events[0].Time // it began before: a start on the page opens the next
			state.StartedAt = &at
		}
	}
	conv, _ = factory.BuildConversationPage(run, events, state)
	return from, events, conv, nil
}
