package server

import (
	"fmt"
	"net/http"
	"strconv"

	"factory"
	"factory/internal/cursor"
	"factory/internal/notify"
	"factory/internal/runs"
	"factory/internal/secrets"
)

// notificationRoutes are the run-status webhooks' API (docs/spec/talkback.md):
// the delivery log, a redelivery, a route's generated secret shown once.
func (s *Server) notificationRoutes(mux *routes) {
	if s.cfg.Notify == nil {
		return
	}
	read := func(h handler) http.Handler { return s.auth(h, factory.ScopeRead) }
	admin := func(h handler) http.Handler { return s.auth(h, factory.ScopeAdmin) }
	mux.Handle("GET /v1/notifications/deliveries", read(s.listNotifications))
	mux.Handle("GET /v1/notifications/deliveries/{id}", read(s.getNotification))
	mux.Handle("POST /v1/notifications/deliveries/{id}/redeliver", admin(s.redeliverNotification))
	mux.Handle("POST /v1/notifications/routes/{factory}/{name}/reveal-secret", admin(s.revealRouteSecret))
}

// listNotifications is GET /v1/notifications/deliveries[?route=NAME]
// [&factory=UID][&limit=N][&cursor=C]: newest first, each with its
// attempts and last status.
func (s *Server) listNotifications(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return errorf(CodeInvalidRequest, "limit must be a whole number from 1 to 500")
		}
		limit = n
	}
	factoryUID := ""
	if v := q.Get("factory"); v != "" {
		f, err := s.factoryByUID(v)
		if err != nil {
			return err
		}
		factoryUID = f.UID
	}
	key, err := s.cursorKey()
	if err != nil {
		return err
	}
	scope := "notifications|" + q.Get("route") + "|" + factoryUID
	var before string
	if c := q.Get("cursor"); c != "" {
		if before, err = cursor.Open(key, scope, c); err != nil {
			return errorf(CodeInvalidRequest, "the cursor is not one this server gave for this list")
		}
	}
	ns, more, err := s.cfg.Notify.Deliveries(q.Get("route"), factoryUID, before, limit)
	if err != nil {
		return err
	}
	page := factory.PageInfo{HasNextPage: more}
	if more {
		page.NextCursor = cursor.Seal(key, scope, ns[len(ns)-1].ID)
	}
	if ns == nil {
		ns = []*factory.Notification{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"deliveries": ns, "page_info": page})
	return nil
}

func (s *Server) getNotification(w http.ResponseWriter, r *http.Request) error {
	nt, err := s.cfg.Notify.Delivery(r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, nt)
	return nil
}

// redeliverNotification is POST .../deliveries/{id}/redeliver: the same
// message sent again, now (202 with the new delivery).
func (s *Server) redeliverNotification(w http.ResponseWriter, r *http.Request) error {
	nt, err := s.cfg.Notify.Redeliver(r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, nt)
	return nil
}

// revealRouteSecret is POST /v1/notifications/routes/{factory}/{name}/reveal-secret:
// the secret generated for a route that names none, once.
func (s *Server) revealRouteSecret(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("factory"))
	if err != nil {
		return err
	}
	v, err := s.cfg.Notify.RevealSecret(f, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"route": r.PathValue("name"), "secret": string(v)})
	return nil
}

// maxWebhookSecret bounds a run webhook's secret.
const maxWebhookSecret = 1 << 10

// runWebhook gives a run to create its own webhook (run create's webhook):
// the URL checked as the notifier will (https; http to loopback only when
// allowed), the secret sealed with the run, generated when none is given
// (then returned, for the answer to show once).
func (s *Server) runWebhook(req *runs.CreateRequest, hook *factory.RunWebhookRequest) (generated string, err error) {
	if hook == nil {
		return "", nil
	}
	if s.cfg.Notify == nil {
		return "", errorf(CodeInvalidRequest, "webhook: this server sends no run-status webhooks")
	}
	if err := s.cfg.Notify.CheckURL(hook.URL); err != nil {
		return "", errorf(CodeInvalidRequest, "webhook.url: "+err.Error())
	}
	secret := []byte(hook.Secret)
	switch {
	case len(secret) > maxWebhookSecret:
		return "", errorf(CodeInvalidRequest, fmt.Sprintf("webhook.secret: at most %d bytes", maxWebhookSecret))
	case len(secret) == 0:
		secret = secrets.NewStandardWebhooksSecret()
		generated = string(secret)
	}
	if req.ID == "" {
		req.ID = factory.NewUID(factory.PrefixRun)
	}
	sealed, err := s.cfg.Notify.SealRunSecret(req.ID, secret)
	if err != nil {
		return "", err
	}
	req.Webhook = &factory.RunWebhook{URL: hook.URL, Sealed: sealed}
	return generated, nil
}

// Notifier is what the server asks of the run-status webhooks.
type Notifier = notify.Notifier
