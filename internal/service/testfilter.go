package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"factory"
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
	a, err := s.automation(automationUID)
	if err != nil {
		return nil, err
	}
	hook, d, payload, err := s.storedPayload(a, deliveryID)
	if err != nil {
		return nil, err
	}
	return s.explainDelivery(ctx, a, hook, d.EventType, payload, d)
}

// TestPayload is Test filter on a pasted payload: the automation evaluated
// as if the payload had arrived through one of its factory's webhooks
// (webhookUID, or the first its triggers select), with the provider's
// event name when the webhook is a provider's. Nothing is stored.
func (s *Service) TestPayload(ctx context.Context, automationUID, webhookUID, eventType string, body []byte) (*factory.TestResult, error) {
	a, err := s.automation(automationUID)
	if err != nil {
		return nil, err
	}
	if len(body) > factory.MaxWebhookBodyBytes {
		return nil, factory.Errorf(factory.EINVALID, "payload: over %d bytes, the most a webhook accepts", factory.MaxWebhookBodyBytes)
	}
	if !json.Valid(body) {
		return nil, factory.Errorf(factory.EINVALID, "payload: not valid JSON")
	}
	payload, err := filter.DecodePayload(body)
	if err != nil {
		return nil, factory.Errorf(factory.EINVALID, "payload: %v", err)
	}
	hook, err := s.testWebhook(a, webhookUID)
	if err != nil {
		return nil, err
	}
	return s.explainDelivery(ctx, a, hook, eventType, payload, nil)
}

// testWebhook is the webhook a pasted payload is tested as arriving
// through: the one named, which must be of the automation's factory, or
// the first one the automation's triggers select.
func (s *Service) testWebhook(a *factory.Automation, uid string) (*factory.Webhook, error) {
	if uid == "" {
		for _, t := range a.Spec.Triggers {
			if len(t.Filter.WebhookIDs) > 0 {
				uid = t.Filter.WebhookIDs[0]
				break
			}
		}
	}
	if uid == "" {
		return nil, factory.Errorf(factory.EINVALID, "automation %s has no webhook trigger: name the webhook the payload would arrive through (webhook_uid)", a.Key)
	}
	hooks, err := s.Store.AllWebhooksOf(a.Factory)
	if err != nil {
		return nil, err
	}
	for _, w := range hooks {
		if w.UID == uid {
			return w, nil
		}
	}
	return nil, factory.Errorf(factory.ENOTFOUND, "no webhook %s in factory %s", uid, a.Factory)
}

// explainDelivery is the Test filter result of a payload arriving through
// a webhook (stored: the delivery it is, when it is one): trigger.Decide's
// verdict, as evaluation would reach it, with its checks key by key.
func (s *Service) explainDelivery(ctx context.Context, a *factory.Automation, hook *factory.Webhook, eventType string, payload any,
	stored *factory.Delivery) (*factory.TestResult, error) {
	set, err := trigger.Compile(a.Spec.Triggers)
	if err != nil {
		return nil, err
	}
	f, err := s.Store.Factory(a.Factory)
	if err != nil {
		return nil, fmt.Errorf("factory %s: %w", a.Factory, err)
	}
	read := trigger.Read(hook.UID, factory.EventSourceOf(&hook.Spec), eventType, payload)
	filesNote := s.pullRequestFiles(ctx, f, set, read, stored)
	v := trigger.Decide(&f.Settings, read, set)
	x := v.Explain()
	res := &factory.TestResult{PayloadCheck: factory.PayloadCheck{Passed: x.PayloadMatched, Keys: x.Keys}}
	res.WebhookCheck = webhookCheck(hook, x)
	res.WouldTrigger = v.Fires() && hook.Active() && a.Spec.Enabled
	var notes []string
	if (v.Stage == trigger.Unread || v.Stage == trigger.Unrouted) && v.Reason != "" {
		// The delivery reaches no automation, whatever the checks say: the
		// delivery log gives the same reason.
		notes = append(notes, v.Reason)
	}
	if filesNote != "" {
		notes = append(notes, filesNote)
	}
	if !a.Spec.Enabled {
		notes = append(notes, "the automation is disabled: it does not fire")
	}
	res.Note = strings.Join(notes, "; ")
	return res, nil
}

// pullRequestFiles gives a pull request's delivery its changed files when
// the automation filters on paths for it, and says what it did: the files
// the delivery's evaluation read, kept with it, else those its code host
// lists now (Files), or why they could not be read.
func (s *Service) pullRequestFiles(ctx context.Context, f *factory.Factory, set *trigger.Set, read *trigger.Delivery, stored *factory.Delivery) string {
	if !set.NeedsFiles(&f.Settings, read) {
		return ""
	}
	pr := read.PullRequest()
	if stored != nil && stored.Event != nil && stored.Event.Event == pr.Event {
		if paths, ok := stored.Event.Fields["paths"]; ok {
			files := trigger.Files{Paths: paths}
			read.SetFiles(files)
			return files.Note() + " (as read when the delivery was evaluated)"
		}
	}
	files := trigger.Files{Unread: trigger.NoReader}
	if s.Files != nil {
		files = s.Files(ctx, f.Name, pr)
	}
	read.SetFiles(files)
	if files.Unread != "" {
		return files.Note()
	}
	return files.Note() + " (read from its code host now)"
}

// automation is an automation by UID, or a not-found error naming it.
func (s *Service) automation(uid string) (*factory.Automation, error) {
	a, err := s.Store.AutomationByUID(uid)
	if errors.Is(err, store.ErrNotFound) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no automation %s", uid)
	}
	return a, err
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
