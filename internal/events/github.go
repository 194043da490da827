package events

import (
	"strings"

	"factory"
)

// github maps X-GitHub-Event and the payload's action to the events of the
// contract's GitHub table; ping and anything else give none.
func github(kind string, p map[string]any) ([]*factory.ProviderEvent, string) {
	repo := str(p, "repository", "full_name")
	action := str(p, "action")
	if kind == "ping" {
		return nil, "a GitHub ping: the webhook is connected; nothing to do"
	}
	if repo == "" {
		return nil, "the " + kind + " payload has no repository.full_name"
	}
	var out []*factory.ProviderEvent
	add := func(name, link string, fields map[string][]string) {
		fields["repos"] = []string{repo}
		e := event(factory.ProviderGitHub, name, repo, link, fields)
		e.Repository = repo
		out = append(out, e)
	}
	switch kind {
	case "issues":
		githubIssue(p, action, add)
	case "pull_request":
		githubPullRequest(p, action, add)
	case "pull_request_review":
		if action == "submitted" {
			pr := get(p, "pull_request")
			f := prFields(pr, p)
			f["authors"] = nonEmpty(str(p, "review", "user", "login"))
			f["mentioned"] = Mentions(str(p, "review", "body"))
			add("pull_request_review_submitted", firstOf(str(p, "review", "html_url"), str(pr, "html_url")), f)
		}
	case "issue_comment", "pull_request_review_comment":
		githubComment(kind, p, action, add)
	case "push":
		githubPush(p, add)
	case "check_suite", "check_run", "workflow_run":
		githubCI(kind, p, action, add)
	default:
		return nil, "GitHub event " + kind + " starts nothing (no trigger takes it)"
	}
	if len(out) == 0 {
		return nil, "GitHub " + kind + " with action " + action + " starts nothing (no trigger takes it)"
	}
	subject := githubSubject(kind, p)
	for _, e := range out {
		e.Subject = subject
	}
	return out, ""
}

// githubSubject is the issue or pull request an event is about (its
// number, the comment that made the event), and the commit work on it
// starts from: a pull request's head, a push's after, a CI run's head;
// an issue's work starts from the default branch.
func githubSubject(kind string, p map[string]any) *factory.Subject {
	s := &factory.Subject{}
	switch kind {
	case "issues":
		s.Number = integer(p, "issue", "number")
	case "pull_request", "pull_request_review":
		s.Number, s.Merge, s.Ref = integer(p, "pull_request", "number"), true, str(p, "pull_request", "head", "sha")
	case "issue_comment":
		s.Number, s.CommentID = integer(p, "issue", "number"), int64(integer(p, "comment", "id"))
		s.Merge = get(p, "issue", "pull_request") != nil
	case "pull_request_review_comment":
		s.Number, s.Merge, s.Ref = integer(p, "pull_request", "number"), true, str(p, "pull_request", "head", "sha")
		s.CommentID, s.ReviewComment = int64(integer(p, "comment", "id")), true
	case "push":
		s.Ref = str(p, "after")
	case "check_suite":
		s.Ref = str(p, "check_suite", "head_sha")
	case "check_run":
		s.Ref = str(p, "check_run", "head_sha")
	case "workflow_run":
		s.Ref = str(p, "workflow_run", "head_sha")
	}
	if *s == (factory.Subject{}) {
		return nil
	}
	return s
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func githubIssue(p map[string]any, action string, add func(string, string, map[string][]string)) {
	issue := get(p, "issue")
	fields := func() map[string][]string {
		return map[string][]string{"authors": nonEmpty(str(issue, "user", "login")), "labels": strs(issue, "name", "labels"),
			"assignees": strs(issue, "login", "assignees")}
	}
	link := str(issue, "html_url")
	switch action {
	case "opened":
		add("issue_created", link, fields())
	case "labeled":
		f := fields()
		f["labels"] = nonEmpty(str(p, "label", "name")) // the label just added
		add("issue_labeled", link, f)
	case "assigned":
		f := fields()
		f["assignees"] = appendNew(f["assignees"], str(p, "assignee", "login"))
		add("issue_assigned", link, f)
	}
	if action == "opened" || action == "edited" {
		if m := Mentions(str(issue, "body")); len(m) > 0 {
			f := fields()
			f["mentioned"] = m
			add("issue_mentioned", link, f)
		}
	}
}

func appendNew(list []string, s string) []string {
	if s == "" {
		return list
	}
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// prFields are the keys every pull_request_* event takes.
func prFields(pr any, p map[string]any) map[string][]string {
	return map[string][]string{"authors": nonEmpty(str(pr, "user", "login")), "labels": strs(pr, "name", "labels"),
		"assignees": strs(pr, "login", "assignees"), "base_branches": nonEmpty(str(pr, "base", "ref"))}
}

var prActions = map[string]string{"opened": "pull_request_opened", "labeled": "pull_request_labeled", "assigned": "pull_request_assigned",
	"reopened": "pull_request_reopened", "ready_for_review": "pull_request_ready", "synchronize": "pull_request_synchronized",
	"review_requested": "pull_request_review_requested"}

func githubPullRequest(p map[string]any, action string, add func(string, string, map[string][]string)) {
	pr := get(p, "pull_request")
	link := str(pr, "html_url")
	f := prFields(pr, p)
	switch name := prActions[action]; {
	case action == "closed" && boolean(pr, "merged"):
		add("pull_request_merged", link, f)
	case action == "closed":
		add("pull_request_closed", link, f)
	case action == "labeled":
		f["labels"] = nonEmpty(str(p, "label", "name"))
		add(name, link, f)
	case action == "assigned":
		f["assignees"] = appendNew(f["assignees"], str(p, "assignee", "login"))
		add(name, link, f)
	case action == "review_requested":
		f["reviewers"] = nonEmpty(str(p, "requested_reviewer", "login"))
		f["reviewer_teams"] = nonEmpty(str(p, "requested_team", "slug"))
		add(name, link, f)
	case name != "":
		add(name, link, f)
	}
	if action == "opened" || action == "edited" {
		if m := Mentions(str(pr, "body")); len(m) > 0 {
			f := prFields(pr, p)
			f["mentioned"] = m
			add("pull_request_mentioned", link, f)
		}
	}
}

// githubComment: a new comment that @-mentions someone is issue_mentioned,
// or pull_request_mentioned on a pull request.
func githubComment(kind string, p map[string]any, action string, add func(string, string, map[string][]string)) {
	if action != "created" {
		return
	}
	m := Mentions(str(p, "comment", "body"))
	if len(m) == 0 {
		return
	}
	link := str(p, "comment", "html_url")
	if kind == "pull_request_review_comment" || get(p, "issue", "pull_request") != nil {
		subject := get(p, "pull_request")
		if subject == nil {
			subject = get(p, "issue")
		}
		f := map[string][]string{"authors": nonEmpty(str(p, "comment", "user", "login")), "labels": strs(subject, "name", "labels"),
			"assignees": strs(subject, "login", "assignees"), "base_branches": nonEmpty(str(subject, "base", "ref")), "mentioned": m}
		add("pull_request_mentioned", link, f)
		return
	}
	issue := get(p, "issue")
	add("issue_mentioned", link, map[string][]string{"authors": nonEmpty(str(p, "comment", "user", "login")),
		"labels": strs(issue, "name", "labels"), "assignees": strs(issue, "login", "assignees"), "mentioned": m})
}

// githubPush: the branch (a tag push is not a branch) and every file the
// push added, modified or removed.
func githubPush(p map[string]any, add func(string, string, map[string][]string)) {
	f := map[string][]string{"authors": nonEmpty(firstOf(str(p, "sender", "login"), str(p, "pusher", "name")))}
	if b, ok := strings.CutPrefix(str(p, "ref"), "refs/heads/"); ok {
		f["branches"] = []string{b}
	}
	seen := map[string]bool{}
	for _, c := range list(p, "commits") {
		for _, k := range []string{"added", "modified", "removed"} {
			for _, file := range list(c, k) {
				if s, _ := file.(string); s != "" && !seen[s] {
					seen[s] = true
					f["paths"] = append(f["paths"], s)
				}
			}
		}
	}
	add("push", str(p, "compare"), f)
}

func githubCI(kind string, p map[string]any, action string, add func(string, string, map[string][]string)) {
	switch {
	case kind == "check_suite" && (action == "completed" || action == "rerequested"):
		cs := get(p, "check_suite")
		f := map[string][]string{"branches": nonEmpty(str(cs, "head_branch")), "authors": nonEmpty(str(p, "sender", "login"))}
		if action == "completed" {
			f["conclusions"] = nonEmpty(str(cs, "conclusion"))
		}
		add("check_suite_"+action, firstOf(str(cs, "url"), str(p, "repository", "html_url")), f)
	case kind == "check_run" && action == "rerequested":
		cr := get(p, "check_run")
		add("check_run_rerequested", str(cr, "html_url"), map[string][]string{"branches": nonEmpty(str(cr, "check_suite", "head_branch")),
			"authors": nonEmpty(str(p, "sender", "login"))})
	case kind == "workflow_run" && action == "completed":
		wr := get(p, "workflow_run")
		add("workflow_run_completed", str(wr, "html_url"), map[string][]string{"branches": nonEmpty(str(wr, "head_branch")),
			"authors": nonEmpty(firstOf(str(wr, "actor", "login"), str(p, "sender", "login"))), "workflows": nonEmpty(firstOf(str(wr, "name"), str(p, "workflow", "name"))),
			"conclusions": nonEmpty(str(wr, "conclusion"))})
	}
}
