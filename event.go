package factory

import "strconv"

// ProviderEvent is a delivery of a provider's webhook (GitHub, GitLab,
// Linear, Slack, Jira) normalized into an event of docs/spec/triggers.md:
// its provider and event name, the repository (or team, project, channel)
// it is about, a link to what it is about, and the values each filter key
// reads. It is kept with the delivery, so that Test filter, replay and the
// delivery log show it.
type ProviderEvent struct {
	Provider   string `json:"provider"`
	Event      string `json:"event"`
	Repository string `json:"repository,omitempty"`
	// Where names what the event is about for the envelope: the
	// repository, or the channel, team or project.
	Where string `json:"where,omitempty"`
	Link  string `json:"link,omitempty"`
	// Fields are the values each filter key reads (labels, authors, ...).
	Fields map[string][]string `json:"fields,omitempty"`
	// Subject is the item the event is about, where the provider has
	// one: what a run reports back to and continues by.
	Subject *Subject `json:"subject,omitempty"`
}

// Subject is the item an event is about: an issue, or a pull (merge)
// request (Merge), by its number (GitLab: its iid); the comment that made
// the event, if one did (ReviewComment: a comment on a pull request's
// diff); the commit work on it starts from ("" the default branch).
type Subject struct {
	Number        int    `json:"number,omitempty"`
	Merge         bool   `json:"merge,omitempty"`
	CommentID     int64  `json:"comment_id,omitempty"`
	ReviewComment bool   `json:"review_comment,omitempty"`
	Ref           string `json:"ref,omitempty"`
	// Chat is where a chat or tracker event happened (Slack, Linear, Jira,
	// Teams; docs/spec/talkback.md): what a run reports to and continues by.
	Chat
}

// WorkItem is the work item key of an event's subject
// (docs/spec/codehosts.md, Work items): github:owner/repo#12,
// gitlab:group/project!3 for a merge request, #3 for an issue; "" for an
// event about no issue or pull request.
func (e *ProviderEvent) WorkItem() string {
	if e != nil && e.Subject != nil && e.Subject.Key != "" {
		return e.Subject.Key
	}
	if e == nil || e.Subject == nil || e.Subject.Number <= 0 || e.Repository == "" {
		return ""
	}
	sep := "#"
	if e.Provider == ProviderGitLab && e.Subject.Merge {
		sep = "!"
	}
	return e.Provider + ":" + e.Repository + sep + strconv.Itoa(e.Subject.Number)
}

// Sources of runs that provider events start (docs/spec/triggers.md).
const (
	SourceGitHub = "GITHUB_WEBHOOK"
	SourceGitLab = "GITLAB_WEBHOOK"
	SourceLinear = "LINEAR"
	SourceSlack  = "SLACK"
	SourceJira   = "JIRA"
	SourceTeams  = "TEAMS"
	// SourceAzureDevOps is the source of runs that Azure DevOps service
	// hooks start.
	SourceAzureDevOps = "AZURE_DEVOPS_WEBHOOK"
)

// ProviderSource is the run source of a provider's events.
func ProviderSource(provider string) string {
	return map[string]string{ProviderGitHub: SourceGitHub, ProviderGitLab: SourceGitLab, ProviderLinear: SourceLinear,
		ProviderSlack: SourceSlack, ProviderJira: SourceJira, ProviderTeams: SourceTeams, ProviderAzureDevOps: SourceAzureDevOps}[provider]
}

// EventSourceOf is the provider whose events a webhook carries: its
// eventSource, else the one its signature scheme names; "" for a custom
// webhook.
func EventSourceOf(w *WebhookSpec) string {
	if w.EventSource != "" && w.EventSource != ProviderWebhook {
		return w.EventSource
	}
	switch w.SignatureScheme {
	case ProviderGitHub, ProviderGitLab, ProviderLinear, ProviderSlack, ProviderAzureDevOps:
		if w.AuthMode == AuthSignature {
			return w.SignatureScheme
		}
	}
	return ""
}

// RecentDelivery is an accepted delivery's body and the provider's name of
// its event, as a dry-run replays it against changed triggers.
type RecentDelivery struct {
	EventType string
	Body      []byte
}
