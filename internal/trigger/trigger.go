// Package trigger decides which events fire an automation. Decide is the
// one answer to "does this delivery fire this automation, and why", asked
// by evaluation of accepted deliveries, the Test filter action and the
// plan's replay of recent deliveries alike; its compiled type (Set) also
// serves the plan's warnings.
//
// An event comes from a source: a webhook delivery today; schedules and
// provider events (GitHub, GitLab, Linear, Slack, Jira) plug in as further
// providers of Source, each with its own selection rule in Selects, while
// payload filters apply to all of them alike.
package trigger

import (
	"fmt"
	"maps"
	"slices"

	"factory"
	"factory/internal/events"
	"factory/internal/filter"
)

// Source is where an event came from.
type Source struct {
	// Provider is the trigger provider that speaks for the source:
	// factory.ProviderWebhook for a delivery to a webhook.
	Provider string
	// WebhookUID is the webhook a delivery came through.
	WebhookUID string
}

// Webhook is the source of a delivery to a webhook.
func Webhook(uid string) Source {
	return Source{Provider: factory.ProviderWebhook, WebhookUID: uid}
}

// Event is something that may fire an automation: where it came from, and
// its payload decoded (filter.DecodePayload); for a provider's delivery,
// the event it was normalized into (events.Normalize).
type Event struct {
	Source   Source
	Payload  any
	Provider *factory.ProviderEvent
	// PathsUnread says why the event's paths are not known (a pull
	// request's files that were not read): it then matches no trigger
	// that filters on paths.
	PathsUnread string
}

// ProviderDelivery is the source of a delivery to a provider's webhook
// (GitHub, GitLab, Linear, Slack, Jira): the provider's triggers listen to
// every such webhook of their factory.
func ProviderDelivery(provider, uid string) Source {
	return Source{Provider: provider, WebhookUID: uid}
}

// Set is an automation's triggers, compiled. The automation fires for an
// event when any of its triggers selects the event's source and its payload
// filter matches.
type Set struct {
	triggers []compiled
}

type compiled struct {
	spec    factory.Trigger
	payload *filter.Filter
}

// Compile compiles each trigger's payload filter.
func Compile(triggers []factory.Trigger) (*Set, error) {
	s := &Set{triggers: make([]compiled, len(triggers))}
	for i, t := range triggers {
		f, err := filter.Compile(t.Filter.Payload)
		if err != nil {
			return nil, fmt.Errorf("trigger %d: %w", i+1, err)
		}
		s.triggers[i] = compiled{spec: t, payload: f}
	}
	return s, nil
}

// selects reports whether one trigger listens to a source.
func (c *compiled) selects(src Source) bool {
	switch src.Provider {
	case factory.ProviderWebhook:
		return c.spec.Provider == factory.ProviderWebhook && slices.Contains(c.spec.Filter.WebhookIDs, src.WebhookUID)
	case factory.ProviderSchedule, "":
		return false
	}
	return c.spec.Provider == src.Provider
}

// matches reports whether one trigger fires for an event: it selects the
// source, a provider event is its event with every filter key matching,
// and the payload filter matches.
func (c *compiled) matches(ev Event) bool {
	if !c.selects(ev.Source) {
		return false
	}
	if c.spec.Provider != factory.ProviderWebhook {
		if ev.Provider == nil || ev.Provider.Event != c.spec.Event || ev.PathsUnread != "" && c.filtersPaths() ||
			!events.MatchKeys(c.spec.Filter.Keys, ev.Provider) {
			return false
		}
	}
	return c.payload.Match(ev.Payload)
}

// awaitsPaths reports whether only unknown paths stop a trigger of s from
// firing for an event: it filters on paths, and everything else matches.
func (s *Set) awaitsPaths(ev Event) bool {
	for i := range s.triggers {
		c := &s.triggers[i]
		if ev.PathsUnread == "" || ev.Provider == nil || !c.filtersPaths() || !c.selects(ev.Source) || ev.Provider.Event != c.spec.Event {
			continue
		}
		rest := maps.Clone(c.spec.Filter.Keys)
		delete(rest, "paths")
		if events.MatchKeys(rest, ev.Provider) && c.payload.Match(ev.Payload) {
			return true
		}
	}
	return false
}

// Selects reports whether any trigger listens to a source, whatever the
// payload: a delivery no automation selects need not be read at all.
func (s *Set) Selects(src Source) bool {
	for i := range s.triggers {
		if s.triggers[i].selects(src) {
			return true
		}
	}
	return false
}

// Match reports whether the event fires the automation: a trigger selects
// its source and that trigger's payload filter matches. (Whether the
// automation and the webhook are enabled is for the caller.)
func (s *Set) Match(ev Event) bool {
	for i := range s.triggers {
		if s.triggers[i].matches(ev) {
			return true
		}
	}
	return false
}

// Ref is a trigger's reference to a webhook, where the definition says it.
type Ref struct {
	UID     string
	Pointer string // JSON pointer into the automation's front matter
}

// WebhookRefs lists every webhook reference of some triggers, in order:
// what a plan checks against the webhooks that exist.
func WebhookRefs(triggers []factory.Trigger) []Ref {
	var out []Ref
	for ti, t := range triggers {
		if t.Provider != factory.ProviderWebhook {
			continue
		}
		for i, uid := range t.Filter.WebhookIDs {
			out = append(out, Ref{UID: uid, Pointer: fmt.Sprintf("/triggers/%d/filter/webhook_ids/%d", ti, i)})
		}
	}
	return out
}

// WebhookUIDs lists the webhooks the triggers select, in order, each once.
func (s *Set) WebhookUIDs() []string {
	var out []string
	for _, t := range s.triggers {
		for _, uid := range t.spec.Filter.WebhookIDs {
			if !slices.Contains(out, uid) {
				out = append(out, uid)
			}
		}
	}
	return out
}

// Explanation says, key by key, why an event fires an automation or not.
type Explanation struct {
	// Selecting numbers (from 1) the triggers that select the event's
	// source; empty when none does.
	Selecting []int
	// Selected lists every webhook UID the triggers select.
	Selected []string
	// Trigger numbers (from 1) the trigger whose payload check is shown:
	// the first selecting one that matches, else the first selecting one,
	// else the first trigger; 0 when there are no triggers.
	Trigger int
	// PayloadMatched and Keys are that trigger's payload check.
	PayloadMatched bool
	Keys           []factory.KeyResult
}

// Fires reports whether the explanation is of an event that fires.
func (x *Explanation) Fires() bool { return len(x.Selecting) > 0 && x.PayloadMatched }

// Explain evaluates an event against every trigger and reports the
// outcome in full, for the Test filter action and for plans.
func (s *Set) Explain(ev Event) Explanation {
	x := Explanation{Keys: []factory.KeyResult{}}
	var selected []string
	for i := range s.triggers {
		if s.triggers[i].selects(ev.Source) {
			x.Selecting = append(x.Selecting, i+1)
		}
		selected = append(selected, s.triggers[i].spec.Filter.WebhookIDs...)
	}
	x.Selected = selected
	candidates := x.Selecting
	if len(candidates) == 0 && len(s.triggers) > 0 {
		candidates = []int{1}
	}
	for n, i := range candidates {
		t := &s.triggers[i-1]
		matched := t.matches(ev) || len(x.Selecting) == 0 && t.payload.Match(ev.Payload)
		if matched || n == 0 {
			x.Trigger, x.PayloadMatched, x.Keys = i, matched, t.explain(ev)
			if matched {
				break
			}
		}
	}
	return x
}

// explain is one trigger's checks, key by key: for a provider event, the
// event's name and each filter key (what it wanted, what the event had),
// then the payload filter's.
func (c *compiled) explain(ev Event) []factory.KeyResult {
	var out []factory.KeyResult
	if c.spec.Provider != factory.ProviderWebhook && ev.Provider != nil {
		out = append(out, factory.KeyResult{Path: "event", Operator: "in", Expected: []string{c.spec.Event}, Actual: ev.Provider.Event,
			ActualPresent: true, Passed: ev.Provider.Event == c.spec.Event})
		keys := events.ExplainKeys(c.spec.Filter.Keys, ev.Provider)
		for i := range keys {
			if keys[i].Path == "paths" && ev.PathsUnread != "" {
				keys[i].Passed = false // not_in too: files not read pass no check
			}
		}
		out = append(out, keys...)
	}
	return append(out, c.payload.Explain(ev.Payload)...)
}
