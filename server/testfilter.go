package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"factory"

	"factory/filter"
	"factory/store"
	"factory/trigger"
)

// TestResult is the Test filter action's answer (filters.md).
type TestResult struct {
	WouldTrigger bool         `json:"would_trigger"`
	WebhookCheck WebhookCheck `json:"webhook_check"`
	PayloadCheck PayloadCheck `json:"payload_check"`
	// Note explains a verdict the two checks do not (a disabled automation).
	Note string `json:"note,omitempty"`
}

// WebhookCheck says whether the delivery came through a selected, enabled
// webhook.
type WebhookCheck struct {
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

// PayloadCheck lists each condition's outcome.
type PayloadCheck struct {
	Passed bool               `json:"passed"`
	Keys   []filter.KeyResult `json:"keys"`
}

// TestFilter evaluates an automation against a stored accepted delivery
// without starting anything. The automation is named by UID; the delivery
// by ID, among its factory's webhooks.
func TestFilter(s *store.Store, automationUID, deliveryID string) (*TestResult, error) {
	a, err := s.AutomationByUID(automationUID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(CodeNotFound, fmt.Sprintf("no automation %s", automationUID))
	}
	if err != nil {
		return nil, err
	}
	hooks, err := s.AllWebhooksOf(a.Factory)
	if err != nil {
		return nil, err
	}
	var d *factory.Delivery
	var hook *factory.Webhook
	for _, w := range hooks {
		if got, err := s.Delivery(w.UID, deliveryID); err == nil {
			d, hook = got, w
			break
		}
	}
	if d == nil {
		return nil, errorf(CodeNotFound, fmt.Sprintf("no delivery %s to a webhook of factory %s", deliveryID, a.Factory))
	}
	if d.Label != factory.LabelAccepted {
		return nil, errorf(CodeConflict, fmt.Sprintf("delivery %s was logged %s: rejected and duplicate deliveries have no stored payload to test against", d.ID, d.Label))
	}
	body, err := s.DeliveryPayload(hook.UID, d.ID)
	if err != nil {
		return nil, err
	}
	payload, err := filter.DecodePayload(body)
	if err != nil {
		return nil, fmt.Errorf("stored payload of %s: %w", d.ID, err)
	}

	set, err := trigger.Compile(a.Spec.Triggers)
	if err != nil {
		return nil, err
	}
	x := set.Explain(trigger.Event{Source: trigger.Webhook(hook.UID), Payload: payload})
	res := &TestResult{PayloadCheck: PayloadCheck{Passed: x.PayloadMatched, Keys: x.Keys}}
	name := fmt.Sprintf("%s (%s)", hook.UID, hook.Key)
	switch {
	case len(x.Selecting) == 0:
		res.WebhookCheck.Detail = fmt.Sprintf("delivery came through %s, which no trigger selects (they select %s)", name, strings.Join(x.Selected, ", "))
	case hook.DeletedAt != nil:
		res.WebhookCheck.Detail = fmt.Sprintf("delivery came through %s, which trigger %d selects, but the webhook is deleted", name, x.Selecting[0])
	case !hook.Active():
		res.WebhookCheck.Detail = fmt.Sprintf("delivery came through %s, which trigger %d selects, but the webhook is disabled or suspended", name, x.Selecting[0])
	default:
		res.WebhookCheck.Passed = true
		res.WebhookCheck.Detail = fmt.Sprintf("delivery came through %s, which trigger %d selects", name, x.Selecting[0])
	}
	res.WouldTrigger = res.WebhookCheck.Passed && res.PayloadCheck.Passed && a.Spec.Enabled
	if !a.Spec.Enabled {
		res.Note = "the automation is disabled: it does not fire"
	}
	return res, nil
}

func (s *Server) testFilter(w http.ResponseWriter, r *http.Request) error {
	var q struct {
		DeliveryID string `json:"delivery_id"`
	}
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	if q.DeliveryID == "" {
		return errorf(CodeInvalidRequest, "delivery_id is required")
	}
	res, err := TestFilter(s.store, r.PathValue("id"), q.DeliveryID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
