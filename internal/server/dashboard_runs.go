package server

import (
	"net/http"
	"net/url"
	"strings"

	"factory"
)

// The dashboard's run pages: Runs (the API's list and filters), a Run with
// its live timeline, and the actions on runs.

// runsFilters are the list parameters the Runs page passes on to the API's
// list, as its form names them.
var runsFilters = []string{"state", "source", "automation_id", "factory_uid", "q", "cursor"}

// runsPage lists runs, newest first, through the API's own list: its
// filters, its errors, its cursors.
func (s *Server) runsPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	in := r.URL.Query()
	qs := url.Values{"limit": {"50"}}
	for _, k := range runsFilters {
		if v := strings.TrimSpace(in.Get(k)); v != "" {
			qs.Set(k, v)
		}
	}
	items, info, err := s.runList(qs)
	if err != nil {
		return err
	}
	sts, err := s.factoryStatuses()
	if err != nil {
		return err
	}
	data := map[string]any{"Title": "Runs", "Session": sess, "Runs": items, "States": factory.RunStates, "Sources": factory.RunSourceNames,
		"Factories": sts, "Filter": qs, "CanRun": canRun(sess), "Environments": s.cfg.Runs.EnvironmentList()}
	if info.HasNextPage {
		next := url.Values{}
		for k, v := range qs {
			if k != "limit" {
				next[k] = v
			}
		}
		next.Set("cursor", info.NextCursor)
		data["Next"] = "/ui/runs?" + next.Encode()
	}
	s.render(w, "runs.html", data)
	return nil
}

// newRun starts a run with the form's prompt (and environment), as the
// key that signed in, through the API's own request checks.
func (s *Server) newRun(w http.ResponseWriter, r *http.Request, sess *session) error {
	if !canRun(sess) {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; starting runs needs runs or admin")
	}
	q := factory.RunRequest{Prompt: r.PostFormValue("prompt"), Title: strings.TrimSpace(r.PostFormValue("title"))}
	if env := r.PostFormValue("environment"); env != "" {
		q.Config = map[string]any{"environment_id": env}
	}
	req, err := s.runRequestFor(r, &q, "")
	if err != nil {
		return err
	}
	key, err := s.store.APIKeyByHash(sess.KeyHash)
	if err != nil {
		return err
	}
	req.Creator, req.CreatorSecrets = apiKeyCreator(key), creatorSecrets(key)
	created, err := s.runs.Create(r.Context(), req, nil)
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/runs/"+created.RunID, http.StatusSeeOther)
	return nil
}

// runPage is a run: what it is and who started it, its attachments and
// artifacts, and its live part (state, timeline, conversation), which the
// page reloads on each event of the run's event stream.
func (s *Server) runPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	run, err := s.runOf(r)
	if err != nil {
		return err
	}
	item := run.Item()
	s.render(w, "run.html", map[string]any{"Title": "Run " + run.ID, "Session": sess, "Run": &item, "CanRun": canRun(sess),
		"EventTypes": factory.TimelineEventTypes, "Origin": run.Origin, "Talkback": run.Talkback})
	return nil
}

// runLive is the run's live part: its state, times, its task and the runs
// it dispatched, artifacts, and the last page of its timeline and
// conversation (the API's timeline pages through all of it).
func (s *Server) runLive(w http.ResponseWriter, r *http.Request, _ *session) error {
	run, err := s.runOf(r)
	if err != nil {
		return err
	}
	from, events, conv, err := s.lastPage(run)
	if err != nil {
		return err
	}
	timeline := make([]factory.TimelineEvent, 0, len(events))
	for i, e := range events {
		if te, ok := factory.TimelineEntry(run.ID, from+i, e); ok {
			timeline = append(timeline, te)
		}
	}
	item := run.Item()
	data, err := s.runRelations(run)
	if err != nil {
		return err
	}
	data["Run"], data["Events"], data["Earlier"], data["Conversation"] = &item, timeline, from, conv
	s.render(w, "runlive", data)
	return nil
}

// runAction is a run's Cancel, Interrupt or Follow-up: runs and admin keys
// only, through the same code as the API, then back to the run's page.
func (s *Server) runAction(w http.ResponseWriter, r *http.Request, sess *session) error {
	if !canRun(sess) {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; acting on runs needs runs or admin")
	}
	id := r.PathValue("runId")
	var err error
	switch r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:] {
	case "cancel":
		_, err = s.runs.Cancel(r.Context(), id)
	case "interrupt":
		err = s.runs.Interrupt(r.Context(), id)
	case "followup":
		msg := r.PostFormValue("message")
		if strings.TrimSpace(msg) == "" {
			return errorf(CodeInvalidRequest, "write a message to send")
		}
		_, err = s.runs.FollowUp(r.Context(), id, msg, nil)
	default:
		return errorf(CodeNotFound, "no such action")
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/runs/"+id, http.StatusSeeOther)
	return nil
}
