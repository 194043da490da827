package reconciler

import (
	"slices"

	"factory"
	"factory/internal/filter"
	"factory/internal/trigger"
)

// ImpactSample is how many recent deliveries are read per webhook.
const ImpactSample = 50

// Payloads gives a webhook's most recent accepted deliveries: the store,
// or a running server.
type Payloads interface {
	RecentDeliveries(webhookUID string, n int) ([]factory.RecentDelivery, error)
}

// Impact is, for one automation whose triggers change and one webhook it
// listens to (before or after), how many of that webhook's recent
// deliveries would have triggered it before the change and after it.
type Impact struct {
	Automation string `json:"automation"`
	WebhookUID string `json:"webhook_uid"`
	Deliveries int    `json:"deliveries"`
	Before     int    `json:"before"`
	After      int    `json:"after"`
	// NotRouted counts the deliveries whose events factory.yaml's
	// repositories (after the change) does not list the repository of:
	// they trigger no automation.
	NotRouted int  `json:"not_routed,omitempty"`
	New       bool `json:"new,omitempty"` // the automation is created: Before is 0
}

// MeasureImpact replays the recent deliveries of the webhooks each
// automation listens to (the ones its webhook triggers select, and its
// factory's webhooks of each provider it has triggers of) against the old
// and the new triggers of every automation the plan creates or whose
// triggers it changes, so a reviewer sees what a filter edit does: "would
// have triggered 3 of the last 50, was 12".
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
	cache := map[string][]*trigger.Delivery{}
	recent := func(uid string) ([]*trigger.Delivery, error) {
		if p, ok := cache[uid]; ok {
			return p, nil
		}
		raw, err := src.RecentDeliveries(uid, ImpactSample)
		if err != nil {
			return nil, err
		}
		provider := ""
		if w := webhookByUID(c.State, uid); w != nil {
			provider = factory.EventSourceOf(&w.Spec)
		}
		var out []*trigger.Delivery
		for _, d := range raw {
			if v, err := filter.DecodePayload(d.Body); err == nil {
				out = append(out, trigger.Read(uid, provider, d.EventType, v))
			}
		}
		cache[uid] = out
		return out, nil
	}
	settings := replaySettings{after: &c.Desired.Settings, before: &factory.Settings{}}
	if c.State.Factory != nil {
		settings.before = &c.State.Factory.Settings
	}
	var impacts []Impact
	for _, a := range c.Desired.Automations {
		if !changed[a.Key] {
			continue
		}
		ims, err := impactOf(c.State, settings, a.Key, a.Triggers, recent)
		if err != nil {
			return nil, err
		}
		impacts = append(impacts, ims...)
	}
	return impacts, nil
}

// replaySettings are factory.yaml's settings before the change (as
// applied) and after it (as the revision says): the repositories rule
// of each applies to its side.
type replaySettings struct {
	before, after *factory.Settings
}

// impactOf replays one automation's webhooks' deliveries against its
// triggers before and after, each delivery decided as evaluation decides
// it (trigger.Decide).
func impactOf(st *factory.State, settings replaySettings, key string, triggers []factory.Trigger, recent func(string) ([]*trigger.Delivery, error)) ([]Impact, error) {
	after, err := trigger.Compile(triggers)
	if err != nil {
		return nil, err
	}
	before := &trigger.Set{}
	old := st.Automations[key]
	var oldTriggers []factory.Trigger
	if old != nil {
		oldTriggers = old.Spec.Triggers
		if before, err = trigger.Compile(oldTriggers); err != nil {
			return nil, err
		}
	}
	var impacts []Impact
	for _, uid := range listenedTo(st, append(slices.Clone(oldTriggers), triggers...), before, after) {
		ds, err := recent(uid)
		if err != nil {
			return nil, err
		}
		im := Impact{Automation: key, WebhookUID: uid, Deliveries: len(ds), New: old == nil}
		for _, d := range ds {
			if trigger.Decide(settings.before, d, before).Fires() {
				im.Before++
			}
			switch trigger.Decide(settings.after, d, after).Stage {
			case trigger.Fired:
				im.After++
			case trigger.Unrouted:
				im.NotRouted++
			}
		}
		impacts = append(impacts, im)
	}
	return impacts, nil
}

// listenedTo is every webhook UID the triggers select, and the factory's
// live webhooks of each provider the triggers name, each once, sorted.
func listenedTo(st *factory.State, triggers []factory.Trigger, sets ...*trigger.Set) []string {
	var uids []string
	for _, s := range sets {
		uids = append(uids, s.WebhookUIDs()...)
	}
	for _, t := range triggers {
		for _, w := range st.Webhooks {
			if t.Provider != factory.ProviderWebhook && factory.EventSourceOf(&w.Spec) == t.Provider {
				uids = append(uids, w.UID)
			}
		}
	}
	slices.Sort(uids)
	return slices.Compact(uids)
}

func webhookByUID(st *factory.State, uid string) *factory.Webhook {
	for _, w := range st.Webhooks {
		if w.UID == uid {
			return w
		}
	}
	return nil
}
