package reconciler

import (
	"slices"

	"factory/internal/filter"
	"factory/internal/trigger"
)

// ImpactSample is how many recent deliveries are read per webhook.
const ImpactSample = 50

// Payloads gives a webhook's most recent accepted delivery bodies: the
// store, or a running server.
type Payloads interface {
	RecentPayloads(webhookUID string, n int) ([][]byte, error)
}

// Impact is, for one automation whose triggers change and one webhook it
// selects (before or after), how many of that webhook's recent deliveries
// would have triggered it before the change and after it.
type Impact struct {
	Automation string `json:"automation"`
	WebhookUID string `json:"webhook_uid"`
	Deliveries int    `json:"deliveries"`
	Before     int    `json:"before"`
	After      int    `json:"after"`
	New        bool   `json:"new,omitempty"` // the automation is created: Before is 0
}

// MeasureImpact replays each selected webhook's recent deliveries against
// the old and the new triggers of every automation the plan creates or
// whose triggers it changes, so a reviewer sees what a filter edit does:
// "would have triggered 3 of the last 50, was 12".
func MeasureImpact(c *Checked, src Payloads) ([]Impact, error) {
	if c.Desired == nil || c.State == nil {
		return nil, nil
	}
	changed := map[string]bool{}
	for _, ch := range c.Plan.Changes {
		if ch.Kind == KindAutomation && (ch.Action == ActionCreate || ch.Action == ActionUpdate && slices.Contains(ch.Keys, "triggers")) {
			changed[ch.Name] = true
		}
	}
	cache := map[string][]any{} // webhook uid → decoded recent payloads
	payloads := func(uid string) ([]any, error) {
		if p, ok := cache[uid]; ok {
			return p, nil
		}
		raw, err := src.RecentPayloads(uid, ImpactSample)
		if err != nil {
			return nil, err
		}
		var out []any
		for _, b := range raw {
			if v, err := filter.DecodePayload(b); err == nil {
				out = append(out, v)
			}
		}
		cache[uid] = out
		return out, nil
	}
	var impacts []Impact
	for _, a := range c.Desired.Automations {
		if !changed[a.Key] {
			continue
		}
		after, err := trigger.Compile(a.Triggers)
		if err != nil {
			return nil, err
		}
		before := &trigger.Set{}
		old := c.State.Automations[a.Key]
		if old != nil {
			if before, err = trigger.Compile(old.Spec.Triggers); err != nil {
				return nil, err
			}
		}
		uids := append(before.WebhookUIDs(), after.WebhookUIDs()...)
		slices.Sort(uids)
		for _, uid := range slices.Compact(uids) {
			ps, err := payloads(uid)
			if err != nil {
				return nil, err
			}
			im := Impact{Automation: a.Key, WebhookUID: uid, Deliveries: len(ps), New: old == nil}
			for _, p := range ps {
				ev := trigger.Event{Source: trigger.Webhook(uid), Payload: p}
				if before.Match(ev) {
					im.Before++
				}
				if after.Match(ev) {
					im.After++
				}
			}
			impacts = append(impacts, im)
		}
	}
	return impacts, nil
}
