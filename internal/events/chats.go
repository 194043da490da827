package events

import (
	"encoding/json"
	"slices"
	"strings"

	"factory"
)

// slack maps an Events API callback: a mention of the app, a message (by
// the kind of conversation), a reaction, a member joining. A message's
// subject is its thread (its own ts when it starts one): a reply in a
// thread continues the thread's run (docs/spec/talkback.md). A bot's message
// (the factory's own replies among them) starts nothing.
func slack(p map[string]any) ([]*factory.ProviderEvent, string) {
	if str(p, "type") != "event_callback" {
		return nil, "a Slack " + str(p, "type") + " request starts nothing"
	}
	ev := get(p, "event")
	channel := firstOf(str(ev, "channel"), str(ev, "item", "channel"))
	f := map[string][]string{"channel_ids": nonEmpty(channel), "channels": nonEmpty(channel), "users": nonEmpty(str(ev, "user")),
		"keywords": nonEmpty(str(ev, "text"))}
	var names []string
	switch str(ev, "type") {
	case "app_mention":
		names = []string{"app_mention"}
	case "message":
		if str(ev, "subtype") != "" && str(ev, "subtype") != "thread_broadcast" {
			return nil, "a Slack message of subtype " + str(ev, "subtype") + " starts nothing"
		}
		names = slackMessageEvents(str(ev, "channel_type"))
	case "reaction_added":
		names = []string{"reaction_added"}
		f["emojis"] = nonEmpty(str(ev, "reaction"))
		f["keywords"] = nil
	case "member_joined_channel":
		names = []string{"member_joined_channel"}
	default:
		return nil, "Slack event " + str(ev, "type") + " starts nothing (no trigger takes it)"
	}
	if str(ev, "bot_id") != "" {
		return nil, "a Slack message of a bot (bot_id " + str(ev, "bot_id") + ") starts nothing"
	}
	var out []*factory.ProviderEvent
	for _, n := range names {
		out = append(out, event(factory.ProviderSlack, n, channel, "", copyFields(f)))
	}
	return withSubject(out, slackSubject(p, ev, channel)), ""
}

func slackMessageEvents(channelType string) []string {
	switch channelType {
	case "im":
		return []string{"message_dm", "message_im"}
	case "mpim":
		return []string{"message_mpim"}
	}
	return []string{"message_posted"}
}

// slackSubject is a message's thread: the team, the channel, the thread's
// first message (its thread_ts, else the message itself), the message
// (its 👀), and, for a reply in a thread, that it continues the thread.
func slackSubject(p map[string]any, ev any, channel string) *factory.Subject {
	ts := str(ev, "ts")
	if str(ev, "type") == "reaction_added" || ts == "" || channel == "" {
		return nil
	}
	team := firstOf(str(p, "team_id"), str(ev, "team"))
	thread := firstOf(str(ev, "thread_ts"), ts)
	return &factory.Subject{Chat: factory.Chat{Key: factory.SlackKey(team, channel, thread), Team: team, Channel: channel,
		Thread: thread, Message: ts, Continues: thread != ts, Text: chatText(str(ev, "text"))}}
}

// linear maps a Linear webhook (type, action, and what updatedFrom says
// changed) to its events; fields are names and IDs, as in the payload. An
// agent session's events are about the session (a prompted event continues
// its run); the others about their issue.
func linear(p map[string]any) ([]*factory.ProviderEvent, string) {
	typ, action := str(p, "type"), str(p, "action")
	if strings.HasPrefix(typ, "AgentSession") {
		return linearSession(p, action)
	}
	data := get(p, "data")
	where := firstOf(str(data, "team", "key"), str(data, "team", "name"))
	var names []string
	switch {
	case typ == "Issue" && action == "create":
		names = append(names, "issue_created")
	case typ == "Issue" && action == "update":
		from, _ := get(p, "updatedFrom").(map[string]any) // what changed, by its old value
		for key, name := range map[string]string{"labelIds": "issue_labeled", "assigneeId": "issue_assigned", "stateId": "issue_state_changed"} {
			if _, changed := from[key]; changed {
				names = append(names, name)
			}
		}
	case typ == "Comment" && action == "create":
		names = append(names, "comment_created")
		where = firstOf(str(data, "issue", "team", "key"), where)
	}
	if len(names) == 0 {
		return nil, "Linear " + typ + " " + action + " starts nothing (no trigger takes it)"
	}
	f := linearFields(data, typ == "Comment")
	var out []*factory.ProviderEvent
	slices.Sort(names)
	for _, n := range names {
		out = append(out, event(factory.ProviderLinear, n, where, firstOf(str(p, "url"), str(data, "url")), copyFields(f)))
	}
	issue := str(data, "id")
	if typ == "Comment" {
		issue = firstOf(str(data, "issueId"), str(data, "issue", "id"))
	}
	if issue == "" {
		return out, ""
	}
	return withSubject(out, &factory.Subject{Chat: factory.Chat{Key: factory.LinearIssueKey(issue), Issue: issue}}), ""
}

// linearFields are the filter keys' values of an issue, or of a comment
// and its issue.
func linearFields(data any, comment bool) map[string][]string {
	issue := data
	if comment {
		issue = get(data, "issue")
	}
	text := str(data, "description")
	rich := get(data, "descriptionData")
	if comment {
		text, rich = str(data, "body"), get(data, "bodyData")
	}
	return map[string][]string{
		"teams":  nonEmpty(str(issue, "team", "key"), str(issue, "team", "name")),
		"labels": strs(issue, "name", "labels"), "projects": nonEmpty(str(issue, "project", "name")),
		"states":    nonEmpty(str(issue, "state", "name")),
		"assignees": nonEmpty(firstOf(str(issue, "assignee", "id"), str(issue, "assigneeId")), str(issue, "assignee", "email")),
		"mentions":  linearMentions(rich, text),
		"issues":    nonEmpty(str(issue, "identifier")),
	}
}

// linearMentions are the users a text mentions: the IDs of the mention
// nodes of its rich form (ProseMirror JSON, as an object or a string), then
// the @names of its Markdown.
func linearMentions(rich any, text string) []string {
	if s, ok := rich.(string); ok {
		var v any
		if json.Unmarshal([]byte(s), &v) == nil {
			rich = v
		}
	}
	var out []string
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > 32 {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			if t := str(x, "type"); strings.Contains(strings.ToLower(t), "mention") {
				if id := str(x, "attrs", "id"); id != "" && !slices.Contains(out, id) {
					out = append(out, id)
				}
			}
			for _, c := range list(x, "content") {
				walk(c, depth+1)
			}
		case []any:
			for _, c := range x {
				walk(c, depth+1)
			}
		}
	}
	walk(rich, 0)
	for _, m := range Mentions(text) {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// linearSession maps an agent session's events: created starts a run
// (agent_session_created); prompted (someone answered in the session)
// continues the session's run.
func linearSession(p map[string]any, action string) ([]*factory.ProviderEvent, string) {
	s := firstNonNil(get(p, "agentSession"), get(p, "data"))
	issue := firstNonNil(get(s, "issue"), s)
	var name, text string
	switch action {
	case "created":
		name = "agent_session_created"
		text = firstOf(str(s, "comment", "body"), str(p, "promptContext"))
	case "prompted":
		name = "agent_session_prompted"
		text = firstOf(str(p, "agentActivity", "content", "body"), str(p, "agentActivity", "body"))
	default:
		return nil, "Linear " + str(p, "type") + " " + action + " starts nothing (no trigger takes it)"
	}
	f := linearFields(issue, false)
	f["mentions"] = linearMentions(get(s, "comment", "bodyData"), str(s, "comment", "body"))
	where := firstOf(str(issue, "team", "key"), str(s, "team", "key"), str(issue, "team", "name"))
	e := event(factory.ProviderLinear, name, where, firstOf(str(issue, "url"), str(s, "url")), f)
	id := str(s, "id")
	if id == "" {
		return []*factory.ProviderEvent{e}, ""
	}
	e.Subject = &factory.Subject{Chat: factory.Chat{Key: factory.LinearSessionKey(id), Thread: id,
		Issue: firstOf(str(issue, "id"), str(s, "issueId")), Continues: action == "prompted", Text: chatText(text)}}
	return []*factory.ProviderEvent{e}, ""
}

// jira maps a Jira webhook: an issue created, or updated with its labels or
// its status changed (from the changelog). Its subject is the issue, on
// its site (the part of the issue's self link before /rest/).
func jira(p map[string]any) ([]*factory.ProviderEvent, string) {
	issue := get(p, "issue")
	key := str(issue, "key")
	project := str(issue, "fields", "project", "key")
	f := map[string][]string{"project_keys": nonEmpty(project),
		"keywords": nonEmpty(str(issue, "fields", "summary"), str(issue, "fields", "description"))}
	link, site := "", ""
	if self := str(issue, "self"); key != "" {
		if i := strings.Index(self, "/rest/"); i > 0 {
			site = self[:i]
			link = site + "/browse/" + key
		}
	}
	var names []string
	switch str(p, "webhookEvent") {
	case "jira:issue_created":
		names = []string{"issue_created"}
	case "jira:issue_updated":
		for _, item := range list(p, "changelog", "items") {
			switch str(item, "field") {
			case "labels":
				names = appendNew(names, "issue_labeled")
			case "status":
				names = appendNew(names, "status_changed")
			}
		}
	case "agent_session_created", "jira:agent_session_created":
		names = []string{"agent_session_created"}
	}
	if len(names) == 0 {
		return nil, "Jira " + str(p, "webhookEvent") + " starts nothing (no trigger takes it)"
	}
	var out []*factory.ProviderEvent
	for _, n := range names {
		out = append(out, event(factory.ProviderJira, n, project, link, copyFields(f)))
	}
	if key == "" || site == "" {
		return out, ""
	}
	return withSubject(out, &factory.Subject{Chat: factory.Chat{Key: factory.JiraKey(site, key), Site: site, Issue: key}}), ""
}

// teams maps a Bot Framework activity from Microsoft Teams: a message that
// mentions the bot (app_mention) or another message (message_posted). Its
// subject is the reply chain (a channel conversation's ;messageid=, else
// the message itself); a reply in a chain continues the chain's run.
func teams(p map[string]any) ([]*factory.ProviderEvent, string) {
	if str(p, "type") != "message" {
		return nil, "a Teams " + str(p, "type") + " activity starts nothing"
	}
	if str(p, "channelId") != "" && str(p, "channelId") != "msteams" {
		return nil, "an activity of channel " + str(p, "channelId") + " starts nothing: only msteams"
	}
	cd := get(p, "channelData")
	var team []string
	for _, id := range nonEmpty(str(cd, "team", "id"), str(cd, "team", "aadGroupId"), str(cd, "teamsTeamId")) {
		team = appendNew(team, id)
	}
	channel := firstOf(str(cd, "channel", "id"), str(cd, "teamsChannelId"))
	text := str(p, "text")
	f := map[string][]string{"team_ids": team, "channel_ids": nonEmpty(channel), "keywords": nonEmpty(teamsPlain(text)),
		"user_ids": nonEmpty(str(p, "from", "id"), str(p, "from", "aadObjectId"))}
	name := "message_posted"
	if teamsMentionsBot(p) {
		name = "app_mention"
	}
	e := event(factory.ProviderTeams, name, firstOf(str(cd, "channel", "name"), channel), "", f)
	conv, id := str(p, "conversation", "id"), str(p, "id")
	if conv == "" || id == "" {
		return []*factory.ProviderEvent{e}, ""
	}
	chain := id
	if _, after, ok := strings.Cut(conv, ";messageid="); ok && after != "" {
		chain = after
	}
	e.Subject = &factory.Subject{Chat: factory.Chat{Key: factory.TeamsKey(conv, chain), Team: firstOf(str(cd, "tenant", "id"),
		str(p, "conversation", "tenantId")), Site: str(p, "serviceUrl"), Channel: conv, Thread: chain, Message: id,
		Continues: chain != id, Text: chatText(teamsPlain(text))}}
	return []*factory.ProviderEvent{e}, ""
}

// teamsMentionsBot reports whether a message's mention entities name its
// recipient (the bot).
func teamsMentionsBot(p map[string]any) bool {
	bot := str(p, "recipient", "id")
	for _, e := range list(p, "entities") {
		if str(e, "type") == "mention" && bot != "" && str(e, "mentioned", "id") == bot {
			return true
		}
	}
	return false
}

// teamsPlain is a message's text without Teams' <at>...</at> tags (the
// name of whoever is mentioned stays).
func teamsPlain(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "<at>", ""), "</at>", "")
	return strings.TrimSpace(s)
}
