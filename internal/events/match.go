package events

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"factory"
)

// A filter key matches when, with a list (or in), one of the event's
// values for the key matches one of the list's; with not_in, when none
// does. A key the event has no value for fails in and passes not_in.
// repos compare ignoring case; keywords are case-insensitive words or
// phrases found in the text; paths are globs (** crosses folders); the
// other keys compare exactly.

// MatchKeys reports whether every filter key of a trigger matches.
func MatchKeys(keys map[string]factory.ValueSet, e *factory.ProviderEvent) bool {
	for k, vs := range keys {
		if !matchKey(k, vs, e.Fields[k]) {
			return false
		}
	}
	return true
}

func matchKey(key string, vs factory.ValueSet, got []string) bool {
	if len(vs.In) > 0 && !anyMatch(key, vs.In, got) {
		return false
	}
	return !(len(vs.NotIn) > 0 && anyMatch(key, vs.NotIn, got))
}

func anyMatch(key string, want, got []string) bool {
	for _, w := range want {
		for _, g := range got {
			if valueMatches(key, w, g) {
				return true
			}
		}
	}
	return false
}

func valueMatches(key, want, got string) bool {
	switch key {
	case "repos", "source_repos":
		return strings.EqualFold(want, got)
	case "keywords":
		return strings.Contains(lower(got), lower(want))
	case "paths":
		return glob(want).MatchString(got)
	}
	return want == got
}

var globs sync.Map // pattern → *regexp.Regexp

// glob compiles a path glob: ** matches across folders, * and ? within one.
func glob(pattern string) *regexp.Regexp {
	if re, ok := globs.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '*' && i+1 < len(pattern) && pattern[i+1] == '*':
			i++
			if i+1 < len(pattern) && pattern[i+1] == '/' {
				i++
				b.WriteString("(?:.*/)?") // **/ matches no folder too
			} else {
				b.WriteString(".*")
			}
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re := regexp.MustCompile(b.String())
	globs.Store(pattern, re)
	return re
}

// ExplainKeys reports each filter key's check, in key order: what the
// trigger wanted, what the event had ("labels: wanted [factory-ready], got
// [bug]").
func ExplainKeys(keys map[string]factory.ValueSet, e *factory.ProviderEvent) []factory.KeyResult {
	var out []factory.KeyResult
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		vs, got := keys[k], e.Fields[k]
		base := factory.KeyResult{Path: k, ActualPresent: len(got) > 0}
		if len(got) > 0 {
			base.Actual = got
		}
		if len(vs.In) > 0 {
			r := base
			r.Operator, r.Expected, r.Passed = "in", vs.In, anyMatch(k, vs.In, got)
			out = append(out, r)
		}
		if len(vs.NotIn) > 0 {
			r := base
			r.Operator, r.Expected, r.Passed = "not_in", vs.NotIn, !anyMatch(k, vs.NotIn, got)
			out = append(out, r)
		}
	}
	return out
}

// PullRequestFiles reports whether an event's paths are the files a pull
// (merge) request changes, which its payload does not list: its code host
// lists them (GitHub's pull_request_* events, GitLab's merge_request). A
// push lists its files itself.
func PullRequestFiles(e *factory.ProviderEvent) bool {
	switch e.Provider {
	case factory.ProviderGitHub:
		return strings.HasPrefix(e.Event, "pull_request_")
	case factory.ProviderGitLab:
		return e.Event == "merge_request"
	}
	return false
}
