package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/runtime"
)

func (s *Server) overview(w http.ResponseWriter, r *http.Request, sess *session) error {
	fs, err := s.store.Factories()
	if err != nil {
		return err
	}
	p := page{Title: "Overview", Session: sess}
	for _, f := range fs {
		st, err := reconciler.Status(s.store, f, s.cfg.PublicURL)
		if err != nil {
			return err
		}
		p.Factories = append(p.Factories, st)
	}
	s.render(w, "overview.html", p)
	return nil
}

// webhookStatus is one webhook as status shows it.
func (s *Server) webhookStatus(uid string) (*factory.WebhookStatus, error) {
	wh, err := s.svc.Webhook(context.Background(), uid)
	if err != nil {
		return nil, err
	}
	f, err := s.store.Factory(wh.Factory)
	if err != nil {
		return nil, err
	}
	st := factory.BuildStatus(f, []*factory.Webhook{wh}, nil, s.cfg.PublicURL)
	return &st.Webhooks[0], nil
}

func (s *Server) webhookPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	wh, err := s.webhookStatus(r.PathValue("uid"))
	if err != nil {
		return err
	}
	s.render(w, "webhook.html", page{Title: "Webhook " + wh.Name, Session: sess, Webhook: wh, Admin: sess.Scope == factory.ScopeAdmin})
	return nil
}

// deliveriesFragment is the delivery log's table, which the webhook page
// reloads every second: a new delivery appears without a reload.
func (s *Server) deliveriesFragment(w http.ResponseWriter, r *http.Request, _ *session) error {
	ds, _, err := s.store.Deliveries(r.PathValue("uid"), "", 20)
	if err != nil {
		return err
	}
	s.render(w, "deliveries", ds)
	return nil
}

// toggleWebhook suspends or resumes a webhook: admin keys only, as the
// API's suspend and resume.
func (s *Server) toggleWebhook(w http.ResponseWriter, r *http.Request, sess *session) error {
	if sess.Scope != factory.ScopeAdmin {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; enabling and disabling webhooks needs admin")
	}
	wh, err := s.webhookStatus(r.PathValue("uid"))
	if err != nil {
		return err
	}
	if _, err := s.svc.SetSuspended(r.Context(), wh.UID, !wh.Suspended); err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/webhooks/"+wh.UID, http.StatusSeeOther)
	return nil
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	if _, err := s.runOf(r); err != nil {
		return err
	}
	s.render(w, "run.html", page{Title: "Run " + r.PathValue("runId"), Session: sess, RunID: r.PathValue("runId"),
		Admin: (&factory.APIKey{Scope: sess.Scope}).Allows(factory.ScopeRuns)})
	return nil
}

// runLive is the run's state, prompt and timeline, which the run page
// reloads every half second until the run ends.
func (s *Server) runLive(w http.ResponseWriter, r *http.Request, _ *session) error {
	run, events, err := s.runWithEvents(r)
	if err != nil {
		return err
	}
	item := run.Item()
	s.render(w, "runlive", map[string]any{"Run": &item, "Events": events})
	return nil
}

// runAction is a run's Cancel, Interrupt or Follow-up: runs and admin keys
// only, through the same code as the API, then back to the run's page.
func (s *Server) runAction(w http.ResponseWriter, r *http.Request, sess *session) error {
	if !(&factory.APIKey{Scope: sess.Scope}).Allows(factory.ScopeRuns) {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; acting on runs needs runs or admin")
	}
	id := r.PathValue("runId")
	var err error
	switch r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:] {
	case "cancel":
		_, err = s.cancel(id)
	case "interrupt":
		err = s.interrupt(id)
	case "followup":
		msg := r.PostFormValue("message")
		if strings.TrimSpace(msg) == "" {
			return errorf(CodeInvalidRequest, "write a message to send")
		}
		_, err = s.followUpRun(id, msg, nil)
	default:
		return errorf(CodeNotFound, "no such action")
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/runs/"+id, http.StatusSeeOther)
	return nil
}

// runsPage lists the newest runs, with the API's state and search filters.
func (s *Server) runsPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	qs := url.Values{"limit": {"50"}}
	state, search := r.URL.Query().Get("state"), r.URL.Query().Get("q")
	if state != "" {
		qs.Set("state", state)
	}
	if search != "" {
		qs.Set("q", search)
	}
	q, err := parseRunQuery(qs)
	if err != nil {
		return err
	}
	page, err := s.store.ListRuns(q)
	if err != nil {
		return err
	}
	items := make([]factory.RunItem, 0, len(page.Runs))
	for _, run := range page.Runs {
		items = append(items, run.Item())
	}
	states := make([]string, 0, len(factory.RunStates))
	for _, st := range factory.RunStates {
		states = append(states, string(st))
	}
	s.render(w, "runs.html", map[string]any{"Title": "Runs", "Session": sess, "Runs": items, "States": states, "Filter": state,
		"Search": search, "CanRun": (&factory.APIKey{Scope: sess.Scope}).Allows(factory.ScopeRuns)})
	return nil
}

// newRun starts a run with the form's prompt, as the key that signed in,
// in the default environment.
func (s *Server) newRun(w http.ResponseWriter, r *http.Request, sess *session) error {
	if !(&factory.APIKey{Scope: sess.Scope}).Allows(factory.ScopeRuns) {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; starting runs needs runs or admin")
	}
	prompt := r.PostFormValue("prompt")
	if strings.TrimSpace(prompt) == "" {
		return errorf(CodeInvalidRequest, "write a prompt")
	}
	key, err := s.store.APIKeyByHash(sess.KeyHash)
	if err != nil {
		return err
	}
	run, err := s.cfg.Runs.Create(runtime.CreateRequest{Prompt: prompt, Source: factory.SourceAPI, Creator: apiKeyCreator(key)})
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/runs/"+run.ID, http.StatusSeeOther)
	return nil
}

// fileSchedule is a schedule trigger on the Schedules page.
type fileSchedule struct {
	Factory, Automation string
	S                   factory.ScheduleStatus
}

// schedulesPage shows the schedule triggers of every factory's automations
// and the Agents API's schedules, with their next and last fire.
func (s *Server) schedulesPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	fs, err := s.store.Factories()
	if err != nil {
		return err
	}
	var files []fileSchedule
	for _, f := range fs {
		st, err := reconciler.Status(s.store, f, s.cfg.PublicURL)
		if err != nil {
			return err
		}
		for _, a := range st.Automations {
			for _, sc := range a.Schedules {
				files = append(files, fileSchedule{Factory: f.Name, Automation: a.Name, S: sc})
			}
		}
	}
	api, err := s.scheduleItems()
	if err != nil {
		return err
	}
	s.render(w, "schedules.html", map[string]any{"Title": "Schedules", "Session": sess, "Files": files, "API": api,
		"CanRun": (&factory.APIKey{Scope: sess.Scope}).Allows(factory.ScopeRuns)})
	return nil
}

// scheduleAction pauses or resumes an API schedule, as the API does.
func (s *Server) scheduleAction(enabled bool) func(http.ResponseWriter, *http.Request, *session) error {
	return func(w http.ResponseWriter, r *http.Request, sess *session) error {
		if !(&factory.APIKey{Scope: sess.Scope}).Allows(factory.ScopeRuns) {
			return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; pausing schedules needs runs or admin")
		}
		v, err := s.schedule(r)
		if err != nil {
			return err
		}
		v.Enabled, v.UpdatedAt = enabled, time.Now().UTC()
		if key, err := s.store.APIKeyByHash(sess.KeyHash); err == nil {
			v.UpdatedBy = apiKeyCreator(key)
		}
		if err := s.saveSchedule(v); err != nil {
			return err
		}
		http.Redirect(w, r, "/ui/schedules", http.StatusSeeOther)
		return nil
	}
}

// automationsPage lists every factory's automations, and runs Test filter
// (the API's own) on one against a stored delivery when asked.
func (s *Server) automationsPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	fs, err := s.store.Factories()
	if err != nil {
		return err
	}
	var sts []*factory.FactoryStatus
	for _, f := range fs {
		st, err := reconciler.Status(s.store, f, s.cfg.PublicURL)
		if err != nil {
			return err
		}
		sts = append(sts, st)
	}
	data := map[string]any{"Title": "Automations", "Session": sess, "Factories": sts}
	if a, d := r.URL.Query().Get("automation"), strings.TrimSpace(r.URL.Query().Get("delivery")); a != "" {
		res, err := s.svc.TestFilter(r.Context(), a, d)
		if err != nil {
			return err
		}
		data["Result"], data["Tested"], data["Delivery"] = res, a, d
	}
	s.render(w, "automations.html", data)
	return nil
}

// deliveryPage is one delivery: what the log recorded, the event it was,
// the runs it started, and its payload pretty-printed (as text: a payload
// is untrusted).
func (s *Server) deliveryPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	d, payload, err := s.svc.Delivery(r.Context(), r.PathValue("uid"), r.PathValue("id"))
	if err != nil {
		return err
	}
	pretty := ""
	if len(payload) > 0 {
		var b bytes.Buffer
		if json.Indent(&b, payload, "", "  ") == nil {
			pretty = b.String()
		} else {
			pretty = string(payload)
		}
	}
	s.render(w, "delivery.html", map[string]any{"Title": "Delivery " + d.ID, "Session": sess, "D": d, "Payload": pretty,
		"Admin": sess.Scope == factory.ScopeAdmin})
	return nil
}

// redeliverPage evaluates a delivery again (admin keys, the API's own
// Redeliver), and shows the new delivery.
func (s *Server) redeliverPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	if sess.Scope != factory.ScopeAdmin {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; redelivering needs admin")
	}
	d, err := s.svc.Redeliver(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/webhooks/"+d.WebhookUID+"/deliveries/"+d.ID, http.StatusSeeOther)
	return nil
}
