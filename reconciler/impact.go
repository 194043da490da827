package reconciler

import (
	"slices"
	"sort"

	"factory/filter"
	"factory/schema"
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

// Fires reports whether an automation's triggers fire for a delivery of a
// webhook: a trigger selects the webhook and its payload filter matches.
// (Whether the webhook is enabled is for the caller.)
func Fires(triggers []schema.Trigger, compiled []*filter.Filter, webhookUID string, payload any) bool {
	for i, t := range triggers {
		if slices.Contains(t.Filter.WebhookIDs, webhookUID) && compiled[i].Match(payload) {
			return true
		}
	}
	return false
}

// CompileTriggers compiles each trigger's payload filter.
func CompileTriggers(triggers []schema.Trigger) ([]*filter.Filter, error) {
	out := make([]*filter.Filter, len(triggers))
	for i, t := range triggers {
		f, err := filter.Compile(t.Filter.Payload)
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
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
		newF, err := CompileTriggers(a.Triggers)
		if err != nil {
			return nil, err
		}
		var oldT []schema.Trigger
		var oldF []*filter.Filter
		old := c.State.Automations[a.Key]
		if old != nil {
			oldT = old.Spec.Triggers
			if oldF, err = CompileTriggers(oldT); err != nil {
				return nil, err
			}
		}
		uids := map[string]bool{}
		for _, t := range append(append([]schema.Trigger{}, oldT...), a.Triggers...) {
			for _, u := range t.Filter.WebhookIDs {
				uids[u] = true
			}
		}
		sorted := make([]string, 0, len(uids))
		for u := range uids {
			sorted = append(sorted, u)
		}
		sort.Strings(sorted)
		for _, uid := range sorted {
			ps, err := payloads(uid)
			if err != nil {
				return nil, err
			}
			im := Impact{Automation: a.Key, WebhookUID: uid, Deliveries: len(ps), New: old == nil}
			for _, p := range ps {
				if old != nil && Fires(oldT, oldF, uid, p) {
					im.Before++
				}
				if Fires(a.Triggers, newF, uid, p) {
					im.After++
				}
			}
			impacts = append(impacts, im)
		}
	}
	return impacts, nil
}
