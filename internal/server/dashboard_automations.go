package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"factory"
	"factory/internal/store"
)

// The dashboard's automation pages: Automations with Test filter,
// Schedules, and a delivery with Redeliver.

// automationRow is an automation on the Automations page: its status, its
// newest runs, and the stored deliveries Test filter can pick from.
type automationRow struct {
	factory.AutomationStatus
	Runs []factory.RunItem
}

// factoryAutomations is one factory on the Automations page.
type factoryAutomations struct {
	Name        string
	Automations []automationRow
	// Deliveries are the newest accepted deliveries of the factory's
	// webhooks, for Test filter.
	Deliveries []*factory.Delivery
	Webhooks   []factory.WebhookStatus
}

// automationsPage lists every factory's automations, and runs Test filter
// (the API's own) on one against a stored delivery when asked.
func (s *Server) automationsPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	data, err := s.automationsData(sess)
	if err != nil {
		return err
	}
	if a, d := r.URL.Query().Get("automation"), strings.TrimSpace(r.URL.Query().Get("delivery")); a != "" {
		res, err := s.svc.TestFilter(r.Context(), a, d)
		if err != nil {
			return err
		}
		data["Result"], data["Tested"], data["Against"] = res, a, "delivery "+d
	}
	s.render(w, "automations.html", data)
	return nil
}

// testPayloadPage is Test filter on a pasted payload (a form POST: a
// payload can be as long as a webhook takes).
func (s *Server) testPayloadPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	r.Body = http.MaxBytesReader(w, r.Body, factory.MaxWebhookBodyBytes+16<<10)
	payload := strings.TrimSpace(r.PostFormValue("payload"))
	if payload == "" {
		return errorf(CodeInvalidRequest, "paste a JSON payload to test")
	}
	id := r.PathValue("id")
	res, err := s.svc.TestPayload(r.Context(), id, r.PostFormValue("webhook"), strings.TrimSpace(r.PostFormValue("event_type")), []byte(payload))
	if err != nil {
		return err
	}
	data, err := s.automationsData(sess)
	if err != nil {
		return err
	}
	data["Result"], data["Tested"], data["Against"], data["Pasted"] = res, id, "the pasted payload", payload
	s.render(w, "automations.html", data)
	return nil
}

// automationsData is what the Automations page shows before any test.
func (s *Server) automationsData(sess *session) (map[string]any, error) {
	sts, err := s.factoryStatuses()
	if err != nil {
		return nil, err
	}
	var out []factoryAutomations
	for _, st := range sts {
		fa := factoryAutomations{Name: st.Name, Webhooks: st.Webhooks}
		for _, a := range st.Automations {
			page, err := s.store.ListRuns(store.RunQuery{Equal: map[string]string{"automation_id": a.ID}, SortBy: "created_at", Limit: 3})
			if err != nil {
				return nil, err
			}
			row := automationRow{AutomationStatus: a}
			for _, run := range page.Runs {
				row.Runs = append(row.Runs, run.Item())
			}
			fa.Automations = append(fa.Automations, row)
		}
		if fa.Deliveries, err = s.testableDeliveries(st.Webhooks); err != nil {
			return nil, err
		}
		out = append(out, fa)
	}
	return map[string]any{"Title": "Automations", "Session": sess, "Factories": out}, nil
}

// testableDeliveries are the newest accepted deliveries of some webhooks,
// newest first: what Test filter offers to pick.
func (s *Server) testableDeliveries(hooks []factory.WebhookStatus) ([]*factory.Delivery, error) {
	var out []*factory.Delivery
	for _, wh := range hooks {
		ds, _, err := s.store.Deliveries(wh.UID, "", 10)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if d.Label == factory.LabelAccepted {
				out = append(out, d)
			}
		}
	}
	slices.SortFunc(out, func(a, b *factory.Delivery) int { return strings.Compare(b.ID, a.ID) })
	return out[:min(len(out), 20)], nil
}

// fileSchedule is a schedule trigger on the Schedules page.
type fileSchedule struct {
	Factory, Automation string
	S                   factory.ScheduleStatus
}

// schedulesPage shows the schedule triggers of every factory's automations
// and the Agents API's schedules, with their next and last fire.
func (s *Server) schedulesPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	sts, err := s.factoryStatuses()
	if err != nil {
		return err
	}
	var files []fileSchedule
	for _, st := range sts {
		for _, a := range st.Automations {
			for _, sc := range a.Schedules {
				files = append(files, fileSchedule{Factory: st.Name, Automation: a.Name, S: sc})
			}
		}
	}
	api, err := s.scheduleItems()
	if err != nil {
		return err
	}
	s.render(w, "schedules.html", map[string]any{"Title": "Schedules", "Session": sess, "Files": files, "API": api, "CanRun": canRun(sess)})
	return nil
}

// scheduleAction pauses or resumes an API schedule, as the API does.
func (s *Server) scheduleAction(enabled bool) func(http.ResponseWriter, *http.Request, *session) error {
	return func(w http.ResponseWriter, r *http.Request, sess *session) error {
		if !canRun(sess) {
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
	s.render(w, "delivery.html", map[string]any{"Title": "Delivery " + d.ID, "Session": sess, "D": d, "Payload": pretty, "Admin": isAdmin(sess)})
	return nil
}

// redeliverPage evaluates a delivery again (admin keys, the API's own
// Redeliver), and shows the new delivery.
func (s *Server) redeliverPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	if !isAdmin(sess) {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; redelivering needs admin")
	}
	d, err := s.svc.Redeliver(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/webhooks/"+d.WebhookUID+"/deliveries/"+d.ID, http.StatusSeeOther)
	return nil
}
