package trigger

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"factory"
)

// provider is what docs/spec/triggers.md says of one trigger provider: its
// events, and for each filter key the events that take it (nil: all).
type provider struct {
	events []string
	keys   map[string][]string
	// payload: whether a payload filter applies to its events.
	payload bool
}

var (
	githubIssue = []string{"issue_created", "issue_labeled", "issue_assigned", "issue_mentioned"}
	githubPR    = []string{"pull_request_opened", "pull_request_merged", "pull_request_closed", "pull_request_labeled",
		"pull_request_assigned", "pull_request_reopened", "pull_request_ready", "pull_request_synchronized",
		"pull_request_review_requested", "pull_request_review_submitted", "pull_request_mentioned"}
	githubCI = []string{"check_suite_completed", "check_suite_rerequested", "check_run_rerequested", "workflow_run_completed"}
)

var providers = map[string]provider{
	factory.ProviderWebhook:  {events: []string{"received"}, payload: true},
	factory.ProviderSchedule: {events: []string{"cron_fired"}},
	factory.ProviderGitHub: {
		events:  slices.Concat(githubIssue, githubPR, []string{"push"}, githubCI),
		payload: true,
		keys: map[string][]string{
			"repos":          nil,
			"authors":        nil,
			"branches":       slices.Concat([]string{"push"}, githubCI),
			"base_branches":  githubPR,
			"paths":          slices.Concat([]string{"push"}, githubPR),
			"labels":         slices.Concat(githubIssue, githubPR),
			"assignees":      slices.Concat(githubIssue, githubPR),
			"mentioned":      {"issue_mentioned", "pull_request_mentioned", "pull_request_review_submitted"},
			"reviewers":      {"pull_request_review_requested"},
			"reviewer_teams": {"pull_request_review_requested"},
			"workflows":      {"workflow_run_completed"},
			"conclusions":    {"check_suite_completed", "workflow_run_completed"},
		},
	},
	factory.ProviderGitLab: {
		events:  []string{"merge_request", "bot_mentioned", "push"},
		payload: true,
		keys:    map[string][]string{"repos": nil, "actions": {"merge_request", "push"}, "paths": {"merge_request"}},
	},
	factory.ProviderLinear: {
		events:  []string{"issue_created", "issue_labeled", "issue_assigned", "issue_state_changed", "comment_created", "agent_session_created"},
		payload: true,
		keys: map[string][]string{"teams": nil, "labels": nil, "projects": nil, "states": nil, "assignees": nil, "mentions": nil,
			"issues": nil},
	},
	factory.ProviderSlack: {
		events:  []string{"app_mention", "message_posted", "message_dm", "message_im", "message_mpim", "reaction_added", "member_joined_channel"},
		payload: true,
		keys:    map[string][]string{"channel_ids": nil, "channels": nil, "users": nil, "keywords": nil, "emojis": {"reaction_added"}},
	},
	factory.ProviderJira: {
		events:  []string{"issue_created", "issue_labeled", "status_changed", "agent_session_created"},
		payload: true,
		keys:    map[string][]string{"project_keys": nil, "keywords": nil},
	},
	// Microsoft Teams (docs/spec/talkback.md; the product's teams.mdx):
	// every trigger names exactly one team and at least one channel.
	factory.ProviderTeams: {
		events:  []string{"app_mention", "message_posted"},
		payload: true,
		keys:    map[string][]string{"team_ids": nil, "channel_ids": nil, "keywords": nil, "user_ids": nil},
	},
	// Azure DevOps Services' service hooks (the product's azure-devops.mdx).
	factory.ProviderAzureDevOps: {
		events:  slices.Concat(azureWorkItem, azurePR, []string{"push"}),
		payload: true,
		keys: map[string][]string{
			"repos":           slices.Concat(azurePR, []string{"push"}),
			"source_repos":    azurePR,
			"branches":        slices.Concat(azurePR, []string{"push"}),
			"work_item_types": azureWorkItem[:3],
			"labels":          azureWorkItem[:3],
			"assignees":       azureWorkItem[:3],
			"authors":         azureWorkItem[:3],
			"mentioned":       {"work_item_mentioned", "pull_request_mentioned"},
		},
	},
	factory.ProviderFactory: {events: []string{"work_item_stage_changed"}, keys: map[string][]string{"stages": nil, "from_stages": nil}},
}

var (
	// azureWorkItem: the first three take the work item's filters.
	azureWorkItem = []string{"work_item_created", "work_item_assigned", "work_item_labeled", "work_item_mentioned"}
	azurePR       = []string{"pull_request_created", "pull_request_merged", "pull_request_closed", "pull_request_updated",
		"pull_request_commented", "pull_request_mentioned"}
)

// Problem is something wrong with one trigger, at a JSON pointer relative
// to the trigger.
type Problem struct {
	Pointer string
	Message string
	Warning bool
}

// Check validates a trigger against its provider (docs/spec/triggers.md):
// the event, the filter keys the event takes, and the cron of a schedule.
// suggest turns a wrong name and its candidates into a "did you mean".
func Check(t factory.Trigger, suggest func(got string, candidates []string) string) []Problem {
	p, ok := providers[t.Provider]
	if !ok {
		return nil // the schema's enum has said so
	}
	if !slices.Contains(p.events, t.Event) {
		return []Problem{{Pointer: "/event", Message: fmt.Sprintf("%q is not an event of provider %s (its events: %s)%s",
			t.Event, t.Provider, strings.Join(p.events, ", "), suggest(t.Event, p.events))}}
	}
	if t.Provider == factory.ProviderSchedule {
		var out []Problem
		if len(t.Filter.Keys) > 0 || len(t.Filter.WebhookIDs) > 0 || len(t.Filter.Payload) > 0 {
			out = append(out, Problem{Pointer: "/filter", Message: "schedule triggers take no filter"})
		}
		if t.Schedule != nil {
			if err := CheckCron(t.Schedule.Cron); err != nil {
				out = append(out, Problem{Pointer: "/schedule/cron", Message: err.Error()})
			}
		}
		return out
	}
	var out []Problem
	if t.Provider == factory.ProviderTeams {
		out = append(out, teamsScope(t.Filter.Keys)...)
	}
	if len(t.Filter.Payload) > 0 && !p.payload {
		out = append(out, Problem{Pointer: "/filter/payload", Message: fmt.Sprintf("%s triggers take no payload filter", t.Provider)})
	}
	for _, key := range slices.Sorted(maps.Keys(t.Filter.Keys)) {
		events, known := p.keys[key]
		switch {
		case !known:
			out = append(out, Problem{Pointer: "/filter/" + key, Message: fmt.Sprintf("unknown filter key %q for provider %s%s%s",
				key, t.Provider, keyList(p.keys), suggest(key, slices.Sorted(maps.Keys(p.keys))))})
		case t.Provider == factory.ProviderSlack && key == "channels":
			out = append(out, Problem{Pointer: "/filter/channels", Warning: true,
				Message: "channels are matched against channel IDs (C0123456789): names are resolved only with the factory's Slack bot token (botTokenSecret); else list IDs, or use channel_ids"})
		case events != nil && !slices.Contains(events, t.Event):
			out = append(out, Problem{Pointer: "/filter/" + key, Message: fmt.Sprintf("filter key %s does not apply to %s %s (it applies to %s)",
				key, t.Provider, t.Event, strings.Join(events, ", "))})
		}
		if v := t.Filter.Keys[key]; len(v.In) > 0 && len(v.NotIn) > 0 {
			out = append(out, Problem{Pointer: "/filter/" + key, Message: "use in or not_in, not both"})
		}
	}
	return out
}

// teamsScope checks what every Teams trigger names: exactly one team and
// at least one channel, as lists of what to include.
func teamsScope(keys map[string]factory.ValueSet) []Problem {
	var out []Problem
	for key, want := range map[string]string{"team_ids": "exactly one team ID", "channel_ids": "at least one channel ID"} {
		v, ok := keys[key]
		switch {
		case !ok:
			out = append(out, Problem{Pointer: "/filter", Message: fmt.Sprintf("a teams trigger needs %s: filter.%s", want, key)})
		case len(v.NotIn) > 0:
			out = append(out, Problem{Pointer: "/filter/" + key, Message: key + " lists what to include: not_in is not taken"})
		case key == "team_ids" && len(v.In) != 1, len(v.In) == 0:
			out = append(out, Problem{Pointer: "/filter/" + key, Message: fmt.Sprintf("a teams trigger needs %s (has %d)", want, len(v.In))})
		}
	}
	slices.SortFunc(out, func(a, b Problem) int { return strings.Compare(a.Pointer+a.Message, b.Pointer+b.Message) })
	return out
}

func keyList(keys map[string][]string) string {
	if len(keys) == 0 {
		return " (it takes none)"
	}
	return " (it takes " + strings.Join(slices.Sorted(maps.Keys(keys)), ", ") + ")"
}

// cronParser reads five fields or a descriptor (@hourly, @every 90s).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a schedule's cron expression, in UTC.
func ParseCron(expr string) (cron.Schedule, error) {
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, fmt.Errorf("schedules are always UTC: remove the %s prefix", expr[:strings.Index(expr, "=")+1])
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("not a cron expression: %v (write five fields, \"minute hour day-of-month month day-of-week\", or @hourly, @daily, @weekly, @monthly, @every 90s)", err)
	}
	return s, nil
}

// CheckCron reports whether a cron expression parses.
func CheckCron(expr string) error {
	_, err := ParseCron(expr)
	return err
}

// CheckInterval reports whether a schedule fires more often than once
// every min: only @every can (five cron fields fire at most once a
// minute). An expression that does not parse passes: CheckCron says why.
func CheckInterval(expr string, min time.Duration) error {
	s, err := ParseCron(expr)
	if err != nil {
		return nil
	}
	if c, ok := s.(cron.ConstantDelaySchedule); ok && c.Delay < min {
		return fmt.Errorf("%s fires more often than %s, the most a schedule may: write @every %s or more", strings.TrimSpace(expr), onceEvery(min), shortDuration(min))
	}
	return nil
}

func onceEvery(d time.Duration) string {
	if d == time.Minute {
		return "once a minute"
	}
	return "once every " + shortDuration(d)
}

// shortDuration writes 1m rather than 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Schedule is a parsed cron in UTC whose instants do not depend on when it
// was parsed: @every D fires at the multiples of D since the Unix epoch
// (docs/spec/triggers.md), so a restart does not shift them.
type Schedule struct {
	every time.Duration // @every, else 0
	cron  cron.Schedule
}

// AtLeast is s firing no more often than once every min: an @every of a
// record made before schedules were bounded fires at the multiples of min
// instead.
func (s *Schedule) AtLeast(min time.Duration) *Schedule {
	if s.every > 0 && s.every < min {
		return &Schedule{every: min}
	}
	return s
}

// CompileSchedule parses a schedule's cron expression.
func CompileSchedule(expr string) (*Schedule, error) {
	s, err := ParseCron(expr)
	if err != nil {
		return nil, err
	}
	if c, ok := s.(cron.ConstantDelaySchedule); ok {
		return &Schedule{every: c.Delay}, nil
	}
	return &Schedule{cron: s}, nil
}

// Next is the first instant strictly after t.
func (s *Schedule) Next(t time.Time) time.Time {
	t = t.UTC()
	if s.every > 0 {
		return time.Unix(0, 0).UTC().Add((t.Sub(time.Unix(0, 0))/s.every + 1) * s.every)
	}
	return s.cron.Next(t)
}

// Latest is the last instant at or before t and strictly after since; zero
// when there is none (or when finding it would take over a million steps:
// a schedule that fires every second, down for weeks, skips its catch-up).
func (s *Schedule) Latest(since, t time.Time) time.Time {
	t, since = t.UTC(), since.UTC()
	if s.every > 0 {
		last := time.Unix(0, 0).UTC().Add(t.Sub(time.Unix(0, 0)) / s.every * s.every)
		if last.After(since) {
			return last
		}
		return time.Time{}
	}
	var latest time.Time
	for i, n := 0, s.cron.Next(since); !n.IsZero() && !n.After(t); i, n = i+1, s.cron.Next(n) {
		if i > 1_000_000 {
			return time.Time{}
		}
		latest = n
	}
	return latest
}
