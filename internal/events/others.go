package events

import (
	"slices"
	"strings"

	"factory"
)

// gitlab maps X-Gitlab-Event: a merge request (its action), a note that
// @-mentions someone (bot_mentioned), a push.
func gitlab(kind string, p map[string]any) ([]*factory.ProviderEvent, string) {
	repo := str(p, "project", "path_with_namespace")
	if repo == "" {
		return nil, "the " + kind + " payload has no project.path_with_namespace"
	}
	var name, link string
	f := map[string][]string{"repos": {repo}}
	switch kind {
	case "Merge Request Hook":
		name, link = "merge_request", str(p, "object_attributes", "url")
		f["actions"] = nonEmpty(str(p, "object_attributes", "action"))
	case "Note Hook":
		if len(Mentions(str(p, "object_attributes", "note"))) == 0 {
			return nil, "a GitLab note that mentions no one"
		}
		name, link = "bot_mentioned", str(p, "object_attributes", "url")
	case "Push Hook":
		name, link = "push", str(p, "project", "web_url")
	default:
		return nil, "GitLab event " + kind + " starts nothing (no trigger takes it)"
	}
	e := event(factory.ProviderGitLab, name, repo, link, f)
	e.Repository = repo
	e.Subject = gitlabSubject(kind, p)
	return []*factory.ProviderEvent{e}, ""
}

// gitlabSubject is the issue or merge request an event is about (its iid,
// the note that made the event), and the commit work on it starts from: a
// merge request's last commit, a push's after.
func gitlabSubject(kind string, p map[string]any) *factory.Subject {
	s := &factory.Subject{}
	switch kind {
	case "Merge Request Hook":
		s.Number, s.Merge, s.Ref = integer(p, "object_attributes", "iid"), true, str(p, "object_attributes", "last_commit", "id")
	case "Note Hook":
		s.CommentID = int64(integer(p, "object_attributes", "id"))
		if str(p, "object_attributes", "noteable_type") == "MergeRequest" {
			s.Number, s.Merge, s.Ref = integer(p, "merge_request", "iid"), true, str(p, "merge_request", "last_commit", "id")
		} else {
			s.Number = integer(p, "issue", "iid")
		}
	case "Push Hook":
		s.Ref = firstOf(str(p, "checkout_sha"), str(p, "after"))
	}
	if *s == (factory.Subject{}) {
		return nil
	}
	return s
}

// linear maps a Linear webhook (type, action, and what updatedFrom says
// changed) to its events; fields are names, as in the payload.
func linear(p map[string]any) ([]*factory.ProviderEvent, string) {
	typ, action := str(p, "type"), str(p, "action")
	data := get(p, "data")
	f := map[string][]string{"teams": nonEmpty(str(data, "team", "key"), str(data, "team", "name")), "labels": strs(data, "name", "labels"),
		"projects": nonEmpty(str(data, "project", "name")), "states": nonEmpty(str(data, "state", "name"))}
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
	case strings.HasPrefix(typ, "AgentSession") && action == "created":
		names = append(names, "agent_session_created")
		data = firstNonNil(get(p, "agentSession"), data)
	}
	if len(names) == 0 {
		return nil, "Linear " + typ + " " + action + " starts nothing (no trigger takes it)"
	}
	var out []*factory.ProviderEvent
	slices.Sort(names)
	for _, n := range names {
		out = append(out, event(factory.ProviderLinear, n, where, firstOf(str(p, "url"), str(data, "url")), copyFields(f)))
	}
	return out, ""
}

func firstNonNil(a, b any) any {
	if a != nil {
		return a
	}
	return b
}

func copyFields(f map[string][]string) map[string][]string {
	out := make(map[string][]string, len(f))
	for k, v := range f {
		out[k] = v
	}
	return out
}

// slack maps an Events API callback: a mention of the app, a message (by
// the kind of conversation), a reaction, a member joining.
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
		switch str(ev, "channel_type") {
		case "im":
			names = []string{"message_dm", "message_im"}
		case "mpim":
			names = []string{"message_mpim"}
		default:
			names = []string{"message_posted"}
		}
	case "reaction_added":
		names = []string{"reaction_added"}
		f["emojis"] = nonEmpty(str(ev, "reaction"))
		f["keywords"] = nil
	case "member_joined_channel":
		names = []string{"member_joined_channel"}
	default:
		return nil, "Slack event " + str(ev, "type") + " starts nothing (no trigger takes it)"
	}
	var out []*factory.ProviderEvent
	for _, n := range names {
		out = append(out, event(factory.ProviderSlack, n, channel, "", copyFields(f)))
	}
	return out, ""
}

// jira maps a Jira webhook: an issue created, or updated with its labels or
// its status changed (from the changelog).
func jira(p map[string]any) ([]*factory.ProviderEvent, string) {
	issue := get(p, "issue")
	key := str(issue, "key")
	project := str(issue, "fields", "project", "key")
	f := map[string][]string{"project_keys": nonEmpty(project),
		"keywords": nonEmpty(str(issue, "fields", "summary"), str(issue, "fields", "description"))}
	link := ""
	if self := str(issue, "self"); key != "" {
		if i := strings.Index(self, "/rest/"); i > 0 {
			link = self[:i] + "/browse/" + key
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
	return out, ""
}
