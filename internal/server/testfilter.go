package server

import (
	"encoding/json"
	"net/http"

	"factory"
)

// testFilter is POST /v1/automations/{id}/test-filter: {"delivery_id"}
// evaluates the automation against a stored delivery (filters.md); this
// server also takes {"payload", "webhook_uid"?, "event_type"?}, a payload
// tested as if it had arrived through the webhook (the dashboard's pasted
// payload).
func (s *Server) testFilter(w http.ResponseWriter, r *http.Request) error {
	var q struct {
		DeliveryID string          `json:"delivery_id"`
		Payload    json.RawMessage `json:"payload"`
		WebhookUID string          `json:"webhook_uid"`
		EventType  string          `json:"event_type"`
	}
	if r.ContentLength != 0 {
		if _, err := readJSON(r, factory.MaxWebhookBodyBytes+4096, &q); err != nil {
			return err
		}
	}
	var res *factory.TestResult
	var err error
	switch {
	case q.DeliveryID != "" && len(q.Payload) > 0:
		return errorf(CodeInvalidRequest, "send delivery_id or payload, not both")
	case len(q.Payload) > 0:
		res, err = s.svc.TestPayload(r.Context(), r.PathValue("id"), q.WebhookUID, q.EventType, q.Payload)
	default:
		res, err = s.svc.TestFilter(r.Context(), r.PathValue("id"), q.DeliveryID)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
