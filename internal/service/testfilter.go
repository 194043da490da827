package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"factory"
	"factory/internal/events"
	"factory/internal/filter"
	"factory/internal/store"
	"factory/internal/trigger"
)

// TestFilter evaluates an automation against a stored accepted delivery
// without starting anything (the Test filter action). The automation is
// named by UID; the delivery by ID, among its factory's webhooks.
func (s *Service) TestFilter(ctx context.Context, automationUID, deliveryID string) (*factory.TestResult, error) {
	if deliveryID == "" {
		return nil, factory.Errorf(factory.EINVALID, "delivery_id is required")
	}
	a, err := s.Store.AutomationByUID(automationUID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no automation %s", automationUID)
	}
	if err != nil {
		return nil, err
	}
	hook, d, payload, err := s.storedPayload(a, deliveryID)
	if err != nil {
		return nil, err
	}
	set, err := trigger.Compile(a.Spec.Triggers)
	if err != nil {
		return nil, err
	}
	x := set.Explain(trigger.Event{Source: trigger.Webhook(hook.UID), Payload: payload})
	if provider := factory.EventSourceOf(&hook.Spec); provider != "" && !x.Fires() {
		// A provider's delivery: explain its events against the
		// provider's triggers, key by key ("labels: wanted [...], got [...]").
		evs, _ := events.Normalize(provider, d.EventType, payload)
		for i, ev := range evs {
			px := set.Explain(trigger.Event{Source: trigger.ProviderDelivery(provider, hook.UID), Payload: payload, Provider: ev})
			if px.Fires() || i == 0 && len(px.Selecting) > 0 {
				x = px
			}
			if px.Fires() {
				break
			}
		}
	}
	res := &factory.TestResult{PayloadCheck: factory.PayloadCheck{Passed: x.PayloadMatched, Keys: x.Keys}}
	res.WebhookCheck = webhookCheck(hook, x)
	res.WouldTrigger = res.WebhookCheck.Passed && res.PayloadCheck.Passed && a.Spec.Enabled
	if !a.Spec.Enabled {
		res.Note = "the automation is disabled: it does not fire"
	}
	return res, nil
}

// storedPayload finds an accepted delivery among the webhooks (live or
// deleted) of an automation's factory, and decodes its payload.
func (s *Service) storedPayload(a *factory.Automation, deliveryID string) (*factory.Webhook, *factory.Delivery, any, error) {
	hooks, err := s.Store.AllWebhooksOf(a.Factory)
	if err != nil {
		return nil, nil, nil, err
	}
	var d *factory.Delivery
	var hook *factory.Webhook
	for _, w := range hooks {
		if got, err := s.Store.Delivery(w.UID, deliveryID); err == nil {
			d, hook = got, w
			break
		}
	}
	if d == nil {
		return nil, nil, nil, factory.Errorf(factory.ENOTFOUND, "no delivery %s to a webhook of factory %s", deliveryID, a.Factory)
	}
	if d.Label != factory.LabelAccepted {
		return nil, nil, nil, factory.Errorf(factory.ECONFLICT, "delivery %s was logged %s: rejected and duplicate deliveries have no stored payload to test against", d.ID, d.Label)
	}
	body, err := s.Store.DeliveryPayload(hook.UID, d.ID)
	if err != nil {
		return nil, nil, nil, err
	}
	payload, err := filter.DecodePayload(body)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("stored payload of %s: %w", d.ID, err)
	}
	return hook, d, payload, nil
}

// webhookCheck says whether the delivery came through a webhook a trigger
// selects, and whether that webhook answers senders.
func webhookCheck(hook *factory.Webhook, x trigger.Explanation) factory.WebhookCheck {
	name := fmt.Sprintf("%s (%s)", hook.UID, hook.Key)
	switch {
	case len(x.Selecting) == 0:
		return factory.WebhookCheck{Detail: fmt.Sprintf("delivery came through %s, which no trigger selects (they select %s)", name, strings.Join(x.Selected, ", "))}
	case hook.DeletedAt != nil:
		return factory.WebhookCheck{Detail: fmt.Sprintf("delivery came through %s, which trigger %d selects, but the webhook is deleted", name, x.Selecting[0])}
	case !hook.Active():
		return factory.WebhookCheck{Detail: fmt.Sprintf("delivery came through %s, which trigger %d selects, but the webhook is disabled or suspended", name, x.Selecting[0])}
	}
	return factory.WebhookCheck{Passed: true, Detail: fmt.Sprintf("delivery came through %s, which trigger %d selects", name, x.Selecting[0])}
}
