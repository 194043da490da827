package trigger

import (
	"cmp"
	"fmt"

	"factory"
	"factory/internal/events"
)

// Delivery is a delivery to a webhook as the decision reads it: the
// webhook, the provider whose events that webhook carries, the payload,
// and the provider's events the payload was read as.
type Delivery struct {
	WebhookUID string
	// Provider is the provider whose events the webhook carries
	// (factory.EventSourceOf); "" for a custom webhook.
	Provider string
	// Payload is the body decoded with filter.DecodePayload.
	Payload any
	// Events are the provider's events the payload was read as
	// (events.Normalize), in order; when there are none, Unread says why.
	Events []*factory.ProviderEvent
	Unread string
	// files are its pull request's changed files (SetFiles).
	files *Files
}

// Read prepares a delivery for Decide: a provider's delivery is read as
// its events once, however many automations are then decided. eventType
// is the provider's name of the event (X-GitHub-Event, X-Gitlab-Event; ""
// where the payload names it).
func Read(webhookUID, provider, eventType string, payload any) *Delivery {
	d := &Delivery{WebhookUID: webhookUID, Provider: provider, Payload: payload}
	if provider != "" {
		d.Events, d.Unread = events.Normalize(provider, eventType, payload)
	}
	return d
}

// Stage is how far a delivery got toward firing an automation.
type Stage uint8

const (
	// Unread: a provider's delivery that was read as no event (a ping).
	Unread Stage = iota
	// Unrouted: the delivery's events are of a repository that
	// factory.yaml's repositories does not list.
	Unrouted
	// Unmatched: the delivery reached the triggers, and none matched.
	Unmatched
	// Fired: a trigger selects the delivery's source and matches it.
	Fired
)

// NoMatch is the reason of a delivery that reached an automation's
// triggers and matched none (Test filter's checks say which key stopped it).
const NoMatch = "no trigger matches"

// Verdict is whether a delivery fires an automation, and why.
type Verdict struct {
	Stage Stage
	// Reason says why it does not fire ("" when it does). For Unread and
	// Unrouted it is the delivery's own outcome, the same for every
	// automation: "a GitHub ping: ...", "not routed: repository evil/fork
	// is not in factory.yaml repositories".
	Reason string
	// Event is the provider's event that fired the automation; nil when
	// a webhook trigger fired it, or nothing did.
	Event *factory.ProviderEvent

	set   *Set
	shown Event // the event Explain explains
}

// Fires reports whether the delivery fires the automation. (Whether the
// automation and the webhook are enabled is for the caller.)
func (v Verdict) Fires() bool { return v.Stage == Fired }

// Explain is the verdict key by key, for Test filter: the trigger that
// fired, or the one that came closest, for the event the verdict is about.
// An unrouted event is explained as if it had been routed, so that a user
// sees what its repository alone stopped.
func (v Verdict) Explain() Explanation { return v.set.Explain(v.shown) }

// Decide says whether a delivery fires an automation whose triggers are s,
// in a factory whose factory.yaml says settings, and why: evaluation of
// accepted deliveries, Test filter and the dry-run's replay all ask here.
//
// A webhook trigger that selects the delivery's webhook and whose payload
// filter matches fires it. Otherwise a provider's delivery fires through
// its events: the first event that factory.yaml's repositories lets
// through and that a provider trigger matches. An automation fires at most
// once per delivery, however many of its events match.
//
// A pull request event's paths are the files SetFiles gave the delivery:
// without them (unread, or never read) it matches no trigger that filters
// on paths, and when such a trigger is all that stopped it, the reason
// says why the files are missing.
func Decide(settings *factory.Settings, d *Delivery, s *Set) Verdict {
	hook := Event{Source: Webhook(d.WebhookUID), Payload: d.Payload}
	v := Verdict{set: s, shown: hook}
	switch {
	case s.Match(hook):
		v.Stage = Fired
		return v
	case d.Provider == "":
		v.Stage, v.Reason = Unmatched, NoMatch
		return v
	case len(d.Events) == 0:
		v.Stage, v.Reason = Unread, d.Unread
		return v
	}
	src := ProviderDelivery(d.Provider, d.WebhookUID)
	if s.Selects(src) {
		v.shown = d.event(src, d.Events[0])
	}
	routed, unread := false, ""
	for _, ev := range d.Events {
		if !listsRepository(settings, ev.Repository) {
			continue
		}
		routed = true
		e := d.event(src, ev)
		if s.Match(e) {
			v.Stage, v.Event, v.shown = Fired, ev, e
			return v
		}
		if unread == "" && e.PathsUnread != "" && s.awaitsPaths(e) {
			unread, v.shown = e.PathsUnread, e
		}
	}
	if !routed {
		v.Stage, v.Reason = Unrouted, notRouted(d.Events[0].Repository)
		return v
	}
	v.Stage, v.Reason = Unmatched, cmp.Or(unread, NoMatch)
	return v
}

// event is one of the delivery's provider events as the triggers read it.
func (d *Delivery) event(src Source, ev *factory.ProviderEvent) Event {
	return Event{Source: src, Payload: d.Payload, Provider: ev, PathsUnread: d.filesUnread(ev)}
}

// Outcome is why a delivery reaches no automation of its factory, whatever
// their triggers, for the delivery log: a provider's delivery read as no
// event, or whose events are of a repository factory.yaml's repositories
// does not list (Decide's Reason for Unread and Unrouted). "" when it
// reaches the triggers, as every custom webhook's delivery does.
func (d *Delivery) Outcome(settings *factory.Settings) string {
	if d.Provider == "" {
		return ""
	}
	if len(d.Events) == 0 {
		return d.Unread
	}
	for _, ev := range d.Events {
		if listsRepository(settings, ev.Repository) {
			return ""
		}
	}
	return notRouted(d.Events[0].Repository)
}

func notRouted(repo string) string {
	return fmt.Sprintf("not routed: repository %s is not in factory.yaml repositories", repo)
}

// listsRepository reports whether events of a repository may fire: the
// factory lists it (ignoring case), it has no repositories list (the flat
// layout), or the event is of no repository (Slack, Linear, Jira). A
// GitLab project may sit in subgroups: acme/platform/widgets is acme's
// widgets.
func listsRepository(settings *factory.Settings, repo string) bool {
	return repo == "" || len(settings.Repositories) == 0 || settings.Lists(repo)
}
