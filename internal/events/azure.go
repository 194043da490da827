package events

import (
	"net/url"
	"slices"
	"strings"

	"factory"
)

// azureDevOps maps an Azure DevOps service hook (its eventType) to its
// events. A repository is <organization>/<project>/<repository>, as
// factory.yaml lists it (owner <organization>/<project>); work items belong
// to a project, not a repository. People are known by display name and
// unique name (an e-mail address): filters may name either.
func azureDevOps(p map[string]any) ([]*factory.ProviderEvent, string) {
	kind := str(p, "eventType")
	res := get(p, "resource")
	switch {
	case kind == "":
		return nil, "the payload has no eventType: not an Azure DevOps service hook"
	case strings.HasPrefix(kind, "workitem."):
		return azureWorkItem(kind, p, res)
	case kind == "git.pullrequest.created", kind == "git.pullrequest.updated", kind == "git.pullrequest.merged":
		return azurePullRequest(kind, p, res)
	case kind == "ms.vss-code.git-pullrequest-comment-event":
		return azurePullRequestComment(p, res)
	case kind == "git.push":
		return azurePush(p, res)
	}
	return nil, "Azure DevOps event " + kind + " starts nothing (no trigger takes it)"
}

// azureWorkItem: created (and mentioned, when its description mentions
// someone), updated (assigned, labeled, mentioned by what changed),
// commented (mentioned).
func azureWorkItem(kind string, p map[string]any, res any) ([]*factory.ProviderEvent, string) {
	// An update's resource holds what changed (oldValue, newValue) and,
	// under revision, the work item as it is now.
	item := res
	if kind == "workitem.updated" {
		item = get(res, "revision")
	}
	f := map[string][]string{"work_item_types": nonEmpty(str(item, "fields", "System.WorkItemType")),
		"labels": tags(str(item, "fields", "System.Tags")), "assignees": identity(get(item, "fields", "System.AssignedTo")),
		"authors": identity(get(item, "fields", "System.CreatedBy"))}
	where := str(item, "fields", "System.TeamProject")
	link := firstOf(str(item, "_links", "html", "href"), str(res, "_links", "html", "href"), str(item, "url"))
	var names, added []string
	var text string
	switch kind {
	case "workitem.created":
		names, text = []string{"work_item_created"}, str(item, "fields", "System.Description")
	case "workitem.commented":
		text = str(item, "fields", "System.History")
		f["authors"] = identity(get(item, "fields", "System.ChangedBy"))
	case "workitem.updated":
		changed, _ := get(res, "fields").(map[string]any)
		if v := get(changed, "System.AssignedTo", "newValue"); v != nil {
			names = append(names, "work_item_assigned")
		}
		if added = addedTags(changed); len(added) > 0 {
			names = append(names, "work_item_labeled")
		}
		text = str(changed, "System.History", "newValue")
		f["authors"] = identity(get(item, "fields", "System.ChangedBy"))
	default:
		return nil, "Azure DevOps event " + kind + " starts nothing (no trigger takes it)"
	}
	if m := azureMentions(text); len(m) > 0 {
		names = append(names, "work_item_mentioned")
		f["mentioned"] = m
	}
	if len(names) == 0 {
		return nil, "an Azure DevOps work item " + strings.TrimPrefix(kind, "workitem.") + " that assigns, labels and mentions no one"
	}
	out := make([]*factory.ProviderEvent, 0, len(names))
	for _, n := range names {
		e := event(factory.ProviderAzureDevOps, n, where, link, copyFields(f))
		if n == "work_item_labeled" {
			e.Fields["labels"] = added // on a labeling, the labels just added
		}
		out = append(out, e)
	}
	return out, ""
}

// azurePullRequest: created (and mentioned), updated (merged when it
// completed, closed when abandoned), merged (a merge that completed).
func azurePullRequest(kind string, p map[string]any, pr any) ([]*factory.ProviderEvent, string) {
	repo := azureRepo(p, get(pr, "repository"))
	if repo == "" {
		return nil, "the pull request payload names no repository"
	}
	var names []string
	status := str(pr, "status")
	switch {
	case kind == "git.pullrequest.created":
		names = append(names, "pull_request_created")
		if len(azureMentions(str(pr, "description"))) > 0 {
			names = append(names, "pull_request_mentioned")
		}
	case status == "completed":
		names = append(names, "pull_request_merged")
	case kind == "git.pullrequest.merged":
		return nil, "an Azure DevOps merge attempt that did not complete (status " + status + ")"
	case status == "abandoned":
		names = append(names, "pull_request_closed")
	default:
		names = append(names, "pull_request_updated")
	}
	f := prFieldsAzure(p, pr, repo)
	f["mentioned"] = azureMentions(str(pr, "description"))
	return azureEvents(names, repo, firstOf(str(pr, "_links", "web", "href"), str(pr, "url")), f), ""
}

// azurePullRequestComment: commented, and mentioned when the comment
// mentions someone.
func azurePullRequestComment(p map[string]any, res any) ([]*factory.ProviderEvent, string) {
	pr := get(res, "pullRequest")
	repo := azureRepo(p, get(pr, "repository"))
	if repo == "" {
		return nil, "the pull request comment names no repository"
	}
	names := []string{"pull_request_commented"}
	f := prFieldsAzure(p, pr, repo)
	if m := azureMentions(str(res, "comment", "content")); len(m) > 0 {
		names = append(names, "pull_request_mentioned")
		f["mentioned"] = m
	}
	return azureEvents(names, repo, firstOf(str(pr, "_links", "web", "href"), str(pr, "url")), f), ""
}

// azurePush: a push, with the branches it updated.
func azurePush(p map[string]any, push any) ([]*factory.ProviderEvent, string) {
	repo := azureRepo(p, get(push, "repository"))
	if repo == "" {
		return nil, "the push names no repository"
	}
	var branches []string
	for _, u := range list(push, "refUpdates") {
		if b, ok := strings.CutPrefix(str(u, "name"), "refs/heads/"); ok {
			branches = appendNew(branches, b)
		}
	}
	f := map[string][]string{"repos": {repo}, "branches": branches}
	return azureEvents([]string{"push"}, repo, firstOf(str(push, "repository", "remoteUrl"), str(push, "url")), f), ""
}

func azureEvents(names []string, repo, link string, f map[string][]string) []*factory.ProviderEvent {
	out := make([]*factory.ProviderEvent, 0, len(names))
	for _, n := range names {
		e := event(factory.ProviderAzureDevOps, n, repo, link, copyFields(f))
		e.Repository = repo
		out = append(out, e)
	}
	return out
}

// prFieldsAzure are a pull request's filter values: its repository, the
// repository of its source branch (a fork's, or its own), its target
// branch.
func prFieldsAzure(p map[string]any, pr any, repo string) map[string][]string {
	source := repo
	if fork := azureRepo(p, get(pr, "forkSource", "repository")); fork != "" {
		source = fork
	}
	return map[string][]string{"repos": {repo}, "source_repos": {source},
		"branches": nonEmpty(strings.TrimPrefix(str(pr, "targetRefName"), "refs/heads/"))}
}

// azureRepo is a repository's <organization>/<project>/<name>: the
// organization from its remote URL (dev.azure.com/<organization>/... or
// <organization>.visualstudio.com), else from the hook's account.
func azureRepo(p map[string]any, repo any) string {
	name, project := str(repo, "name"), str(repo, "project", "name")
	if name == "" || project == "" {
		return ""
	}
	org := azureOrganization(str(repo, "remoteUrl"))
	if org == "" {
		org = azureOrganization(str(p, "resourceContainers", "account", "baseUrl"))
	}
	if org == "" {
		return project + "/" + name
	}
	return org + "/" + project + "/" + name
}

func azureOrganization(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	if org, ok := strings.CutSuffix(strings.ToLower(u.Host), ".visualstudio.com"); ok {
		return org
	}
	first, _, _ := strings.Cut(strings.Trim(u.Path, "/"), "/")
	return first
}

// identity is a person as Azure DevOps gives one: an object with
// displayName and uniqueName, or a string "Name <email>".
func identity(v any) []string {
	switch x := v.(type) {
	case map[string]any:
		return nonEmpty(str(x, "displayName"), str(x, "uniqueName"))
	case string:
		name, rest, ok := strings.Cut(x, "<")
		if !ok {
			return nonEmpty(strings.TrimSpace(x))
		}
		return nonEmpty(strings.TrimSpace(name), strings.TrimSuffix(strings.TrimSpace(rest), ">"))
	}
	return nil
}

// tags reads System.Tags: "a; b".
func tags(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ";") {
		if t = strings.TrimSpace(t); t != "" {
			out = appendNew(out, t)
		}
	}
	return out
}

// addedTags are the tags an update added.
func addedTags(changed map[string]any) []string {
	old := tags(str(changed, "System.Tags", "oldValue"))
	var out []string
	for _, t := range tags(str(changed, "System.Tags", "newValue")) {
		if !slices.Contains(old, t) {
			out = append(out, t)
		}
	}
	return out
}

// azureMentions are the people a text mentions: Azure DevOps writes a
// mention as <a ... data-vss-mention="...">@Display Name</a>; plain @names
// count too.
func azureMentions(text string) []string {
	var out []string
	rest := text
	for {
		i := strings.Index(rest, "data-vss-mention")
		if i < 0 {
			break
		}
		rest = rest[i:]
		open := strings.Index(rest, ">")
		end := strings.Index(rest, "</a>")
		if open < 0 || end < open {
			break
		}
		if name := strings.TrimPrefix(strings.TrimSpace(rest[open+1:end]), "@"); name != "" {
			out = appendNew(out, name)
		}
		rest = rest[end:]
	}
	if len(out) == 0 {
		out = Mentions(text)
	}
	return out
}
