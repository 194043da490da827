package server

import (
	"net/http"

	"factory"
)

// webhookView is GET /v1/webhooks/{uid}: the webhook as status shows it,
// with its factory's UID.
type webhookView struct {
	factory.WebhookStatus
	FactoryUID string `json:"factory_uid"`
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.svc.Webhook(r.Context(), r.PathValue("uid"))
	if err != nil {
		return err
	}
	return s.writeWebhook(w, wh)
}

func (s *Server) revealSecret(w http.ResponseWriter, r *http.Request) error {
	v, err := s.svc.RevealWebhookSecret(r.Context(), r.PathValue("uid"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"secret": string(v)})
	return nil
}
