package events

import (
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

// withSubject gives each event the subject.
func withSubject(evs []*factory.ProviderEvent, s *factory.Subject) []*factory.ProviderEvent {
	for _, e := range evs {
		if s != nil {
			cp := *s
			e.Subject = &cp
		}
	}
	return evs
}

// chatText is a message's words as an event keeps them: at most
// factory.MaxChatText bytes, cut at a character's start.
func chatText(s string) string {
	if len(s) <= factory.MaxChatText {
		return s
	}
	cut := factory.MaxChatText
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
