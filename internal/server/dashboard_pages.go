package server

import (
	"context"
	"net/http"
	"strings"

	"factory"
	"factory/internal/reconciler"
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
