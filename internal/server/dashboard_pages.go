package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"factory"
)

// The dashboard's factory pages: Overview, Definition, Webhooks and a
// webhook's pane with its delivery log.

// countCap bounds the dashboard's counts: past it a page says "1000+",
// and costs no more at a million runs than at ten thousand.
const countCap = 1_000

// count is a bounded count as a page shows it.
type count struct {
	N    int
	More bool
}

func (c count) String() string {
	if c.More {
		return strconv.Itoa(c.N) + "+"
	}
	return strconv.Itoa(c.N)
}

// today is the start of the current UTC day: what "today" means on the
// dashboard's counts.
func today() time.Time { return time.Now().UTC().Truncate(24 * time.Hour) }

// stateCount is the runs of one state created today.
type stateCount struct {
	State factory.RunState
	Count count
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request, sess *session) error {
	sts, err := s.factoryStatuses()
	if err != nil {
		return err
	}
	var counts []stateCount
	for _, st := range factory.RunStates {
		n, more, err := s.store.CountRunsSince(st, today(), countCap)
		if err != nil {
			return err
		}
		counts = append(counts, stateCount{st, count{n, more}})
	}
	metrics := map[string]*overviewMetrics{}
	for _, st := range sts {
		if metrics[st.UID], err = s.factoryMetrics(st.UID, time.Now().UTC()); err != nil {
			return err
		}
	}
	s.render(w, "overview.html", map[string]any{"Title": "Overview", "Session": sess, "Factories": sts, "Counts": counts,
		"Metrics": metrics, "Admin": isAdmin(sess), "Served": s.runners, "Synced": r.URL.Query().Get("synced")})
	return nil
}

// syncFactoryPage is Overview's "Sync now" (admin keys, the API's own
// sync): it waits for the sync and shows the overview again.
func (s *Server) syncFactoryPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	if !isAdmin(sess) {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; syncing needs admin")
	}
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	if err := s.SyncNow(ctx, f.Name); err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/?synced="+f.Name, http.StatusSeeOther)
	return nil
}

// definitionPage is the applied tree of each factory: agents, automations
// with their triggers (and each schedule's next fire), runners, skills,
// webhooks, scorers and benchmark suites.
func (s *Server) definitionPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	sts, err := s.factoryStatuses()
	if err != nil {
		return err
	}
	s.render(w, "definition.html", map[string]any{"Title": "Definition", "Session": sess, "Factories": sts})
	return nil
}

// webhookRow is a webhook on the Webhooks page.
type webhookRow struct {
	factory.WebhookStatus
	Factory string
	Today   count
}

// webhooksPage lists every factory's webhooks with their deliveries today.
func (s *Server) webhooksPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	sts, err := s.factoryStatuses()
	if err != nil {
		return err
	}
	var rows []webhookRow
	for _, st := range sts {
		for _, wh := range st.Webhooks {
			n, more, err := s.store.CountDeliveriesSince(wh.UID, today(), countCap)
			if err != nil {
				return err
			}
			rows = append(rows, webhookRow{WebhookStatus: wh, Factory: st.Name, Today: count{n, more}})
		}
	}
	s.render(w, "webhooks.html", map[string]any{"Title": "Webhooks", "Session": sess, "Webhooks": rows})
	return nil
}

// webhookStatus is one webhook as status shows it, with its factory's UID.
func (s *Server) webhookStatus(uid string) (*factory.WebhookStatus, *factory.Factory, error) {
	wh, err := s.svc.Webhook(context.Background(), uid)
	if err != nil {
		return nil, nil, err
	}
	f, err := s.store.Factory(wh.Factory)
	if err != nil {
		return nil, nil, err
	}
	st := factory.BuildStatus(f, []*factory.Webhook{wh}, nil, s.cfg.PublicURL)
	return &st.Webhooks[0], f, nil
}

// webhookPage is a webhook's detail pane and its delivery log, which
// updates itself from the factory's event stream; ?before= pages back
// through older deliveries (and then does not update).
func (s *Server) webhookPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	wh, f, err := s.webhookStatus(r.PathValue("uid"))
	if err != nil {
		return err
	}
	data := map[string]any{"Title": "Webhook " + wh.Name, "Session": sess, "Webhook": wh, "Factory": f, "Admin": isAdmin(sess),
		"Before": r.URL.Query().Get("before"), "Now": time.Now().UnixNano()}
	if wh.SecretName != "" {
		if sec, err := s.store.Secret(wh.SecretName); err == nil {
			data["Secret"] = sec
		}
	}
	s.render(w, "webhook.html", data)
	return nil
}

// deliveriesPage is how many deliveries the log shows at once.
const deliveriesPage = 25

// deliveriesFragment is the delivery log's table: newest first, a page at
// a time (before= the last ID of the previous page).
func (s *Server) deliveriesFragment(w http.ResponseWriter, r *http.Request, _ *session) error {
	wh, _, err := s.webhookStatus(r.PathValue("uid"))
	if err != nil {
		return err
	}
	ds, more, err := s.store.Deliveries(wh.UID, r.URL.Query().Get("before"), deliveriesPage)
	if err != nil {
		return err
	}
	data := map[string]any{"Deliveries": ds, "UID": wh.UID, "IngressURL": wh.IngressURL}
	if more {
		data["Older"] = ds[len(ds)-1].ID
	}
	s.render(w, "deliveries", data)
	return nil
}

// toggleWebhook suspends or resumes a webhook: admin keys only, as the
// API's suspend and resume.
func (s *Server) toggleWebhook(w http.ResponseWriter, r *http.Request, sess *session) error {
	if !isAdmin(sess) {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; enabling and disabling webhooks needs admin")
	}
	wh, _, err := s.webhookStatus(r.PathValue("uid"))
	if err != nil {
		return err
	}
	if _, err := s.svc.SetSuspended(r.Context(), wh.UID, !wh.Suspended); err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/webhooks/"+wh.UID, http.StatusSeeOther)
	return nil
}

// revealConfirm asks before revealing a webhook's generated secret: it
// can be shown once only.
func (s *Server) revealConfirm(w http.ResponseWriter, r *http.Request, sess *session) error {
	if !isAdmin(sess) {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; revealing secrets needs admin")
	}
	wh, _, err := s.webhookStatus(r.PathValue("uid"))
	if err != nil {
		return err
	}
	s.render(w, "reveal.html", map[string]any{"Title": "Reveal the secret of " + wh.Name, "Session": sess, "Webhook": wh})
	return nil
}

// revealSecretPage reveals the secret (the API's own reveal, which marks
// it revealed before it answers), on a page no cache keeps.
func (s *Server) revealSecretPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	if !isAdmin(sess) {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; revealing secrets needs admin")
	}
	wh, _, err := s.webhookStatus(r.PathValue("uid"))
	if err != nil {
		return err
	}
	v, err := s.svc.RevealWebhookSecret(r.Context(), wh.UID)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, "reveal.html", map[string]any{"Title": "The secret of " + wh.Name, "Session": sess, "Webhook": wh, "Value": string(v)})
	return nil
}

func isAdmin(sess *session) bool { return sess.Scope == factory.ScopeAdmin }

// canRun says whether the session's key may start and act on runs.
func canRun(sess *session) bool {
	return (&factory.APIKey{Scope: sess.Scope}).Allows(factory.ScopeRuns)
}
