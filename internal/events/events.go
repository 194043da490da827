// Package events normalizes the deliveries of providers' webhooks (GitHub,
// GitLab, Linear, Slack, Jira, Azure DevOps, Microsoft Teams) into the events of docs/spec/triggers.md, and
// matches them against triggers' filter keys. A delivery gives no event, or
// several (an opened issue that @-mentions someone is issue_created and
// issue_mentioned); when it gives none, the reason says why, for the
// delivery log.
package events

import (
	"encoding/json"
	"slices"
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
	case factory.ProviderAzureDevOps:
		return azureDevOps(p)
	case factory.ProviderTeams:
		return teams(p)
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

// Mentions lists the @-mentioned logins and org/team names in a text, each
// once: "@" not preceded by a word character (or @ . / -), then a login
// (a letter or digit, then up to 38 letters, digits or '-'), then
// optionally /team. A scan, not a regular expression: descriptions run to
// tens of kilobytes, and the regexp took 70% of matching a delivery
// (BENCHMARKS.md).
func Mentions(text string) []string {
	var out []string
	for i := 0; i < len(text); i++ {
		at := strings.IndexByte(text[i:], '@')
		if at < 0 {
			break
		}
		i += at
		if i > 0 && mentionBlocked(text[i-1]) {
			continue
		}
		end := i + 1
		for end < len(text) && end-i-1 < 39 && (isAlnum(text[end]) || text[end] == '-' && end > i+1) {
			end++
		}
		if end == i+1 {
			continue
		}
		name := text[i+1 : end]
		if end < len(text) && text[end] == '/' {
			team := end + 1
			for team < len(text) && (isAlnum(text[team]) || strings.IndexByte("_.-", text[team]) >= 0) {
				team++
			}
			if team > end+1 {
				name, end = text[i+1:team], team
			}
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
		i = end - 1
	}
	return out
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// mentionBlocked: an "@" after these is part of something else (an
// e-mail address, a path, a word).
func mentionBlocked(c byte) bool {
	return isAlnum(c) || c == '_' || c == '@' || c == '.' || c == '/' || c == '-'
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

// integer is a whole number at a path (a JSON number decoded either way);
// 0 when there is none.
func integer(v any, path ...string) int {
	switch n := get(v, path...).(type) {
	case float64:
		return int(n)
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	case int:
		return n
	case int64:
		return int(n)
	}
	return 0
}
