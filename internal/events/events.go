// Package events normalizes the deliveries of providers' webhooks (GitHub,
// GitLab, Linear, Slack, Jira) into the events of docs/spec/triggers.md, and
// matches them against triggers' filter keys. A delivery gives no event, or
// several (an opened issue that @-mentions someone is issue_created and
// issue_mentioned); when it gives none, the reason says why, for the
// delivery log.
package events

import (
	"encoding/json"
	"regexp"
	"strings"

	"factory"
)

// Normalize reads a provider's delivery: eventType is the provider's
// header naming the event (X-GitHub-Event, X-Gitlab-Event; "" for those
// that name it in the payload), payload the body decoded with
// filter.DecodePayload.
func Normalize(provider, eventType string, payload any) ([]*factory.ProviderEvent, string) {
	p, _ := payload.(map[string]any)
	if p == nil {
		return nil, "the payload is not a JSON object"
	}
	switch provider {
	case factory.ProviderGitHub:
		return github(eventType, p)
	case factory.ProviderGitLab:
		return gitlab(eventType, p)
	case factory.ProviderLinear:
		return linear(p)
	case factory.ProviderSlack:
		return slack(p)
	case factory.ProviderJira:
		return jira(p)
	}
	return nil, "no events come from provider " + provider
}

// get walks a path of object keys; nil when any step is missing.
func get(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...string) []any {
	l, _ := get(v, path...).([]any)
	return l
}

// strs collects a key of each object of a list (labels[].name).
func strs(v any, key string, path ...string) []string {
	var out []string
	for _, e := range list(v, path...) {
		if s := str(e, key); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func boolean(v any, path ...string) bool {
	b, _ := get(v, path...).(bool)
	return b
}

// nonEmpty keeps the non-empty strings.
func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// mention is an @-mention: a login, or org/team.
var mention = regexp.MustCompile(`(?:^|[^\w@/.-])@([A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9_.-]+)?)`)

// Mentions lists the @-mentioned logins and org/team names in a text.
func Mentions(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range mention.FindAllStringSubmatch(text, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}

func event(provider, name, where, link string, fields map[string][]string) *factory.ProviderEvent {
	for k, v := range fields {
		if len(v) == 0 {
			delete(fields, k)
		}
	}
	return &factory.ProviderEvent{Provider: provider, Event: name, Where: where, Link: link, Fields: fields}
}

// Encode is an event's JSON, for tests and logs.
func Encode(e *factory.ProviderEvent) string {
	b, _ := json.Marshal(e)
	return string(b)
}

func lower(s string) string { return strings.ToLower(s) }
