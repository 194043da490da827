package factory

import (
	"slices"
	"strings"
)

// Code forges of factory.yaml's codeForges (docs/spec/v1alpha1.md).
const (
	CodeForgeGitHub = "GITHUB"
	CodeForgeGitLab = "GITLAB"
	CodeForgeNone   = "NONE"
)

// RepoCheckout is a repository a run works on: its code host (github,
// gitlab), its path (owner/name, or a GitLab project's path), and the
// commit it starts from ("" its default branch). The run's workspace holds
// a clone of it, on a branch of the run's own.
type RepoCheckout struct {
	Host string `json:"host"`
	Path string `json:"path"`
	Ref  string `json:"ref,omitempty"`
}

// Origin is where a run came from, and where it reports back: an issue or
// a pull (merge) request on a code host, and the comment that asked, if
// one did; or a chat's thread, a tracker's issue or agent session (Chat,
// docs/spec/talkback.md). WorkItem is the key a later event on the same item
// continues the run by.
type Origin struct {
	Provider      string `json:"provider"`
	Repo          string `json:"repo,omitempty"`
	Number        int    `json:"number,omitempty"`
	Merge         bool   `json:"merge,omitempty"`
	CommentID     int64  `json:"comment_id,omitempty"`
	ReviewComment bool   `json:"review_comment,omitempty"`
	WorkItem      string `json:"work_item,omitempty"`
	// Silent: the run does not report back (its automation's writeBack:
	// false).
	Silent bool `json:"silent,omitempty"`
	// Link is the page of what the run came from (the thread, session or
	// issue), as the event said.
	Link string `json:"link,omitempty"`
	Chat
}

// OnceKey names the chat message an origin's event came from, so that it
// reaches a run once however many of its events arrive (Slack sends a
// message that mentions the app as app_mention and as message); "" for an
// origin of no chat message.
func (o *Origin) OnceKey() string {
	if o == nil || o.Message == "" {
		return ""
	}
	return "chat:" + o.Provider + ":" + o.Channel + ":" + o.Message
}

// OriginOf is the origin of a run an event starts: its issue or pull
// request; nil for an event about none.
func OriginOf(ev *ProviderEvent) *Origin {
	key := ev.WorkItem()
	if key == "" {
		return nil
	}
	s := ev.Subject
	return &Origin{Provider: ev.Provider, Repo: ev.Repository, Number: s.Number, Merge: s.Merge, CommentID: s.CommentID,
		ReviewComment: s.ReviewComment, WorkItem: key, Link: ev.Link, Chat: s.Chat.Target()}
}

// CheckoutsFor are the repositories a run of a factory works on
// (docs/spec/codehosts.md, Checkout): the repository of the event that
// started it, at the event's commit, when the factory lists it (or lists
// none); else every repository the factory lists, at its default branch.
// A factory whose codeForges is NONE works on none.
func CheckoutsFor(s *Settings, ev *ProviderEvent) []RepoCheckout {
	if slices.Contains(s.CodeForges, CodeForgeNone) {
		return nil
	}
	if ev != nil && ev.Repository != "" && (ev.Provider == ProviderGitHub || ev.Provider == ProviderGitLab) {
		if len(s.Repositories) == 0 || s.Lists(ev.Repository) {
			ref := ""
			if ev.Subject != nil {
				ref = ev.Subject.Ref
			}
			return []RepoCheckout{{Host: ev.Provider, Path: ev.Repository, Ref: ref}}
		}
	}
	host := ProviderGitHub
	if slices.Contains(s.CodeForges, CodeForgeGitLab) && !slices.Contains(s.CodeForges, CodeForgeGitHub) {
		host = ProviderGitLab
	}
	out := make([]RepoCheckout, 0, len(s.Repositories))
	for _, r := range s.Repositories {
		out = append(out, RepoCheckout{Host: host, Path: r.Owner + "/" + r.Name})
	}
	return out
}

// Lists reports whether factory.yaml's repositories list a repository,
// ignoring case. A GitLab project may sit in subgroups: acme/platform/widgets
// is acme's widgets. (It allocates nothing: every delivery asks.)
func (s *Settings) Lists(repo string) bool {
	for _, r := range s.Repositories {
		if len(repo) <= len(r.Owner) || repo[len(r.Owner)] != '/' || !strings.EqualFold(repo[:len(r.Owner)], r.Owner) {
			continue
		}
		rest := repo[len(r.Owner)+1:]
		if strings.EqualFold(rest, r.Name) {
			return true
		}
		if n := len(rest) - len(r.Name); n > 0 && rest[n-1] == '/' && strings.EqualFold(rest[n:], r.Name) {
			return true
		}
	}
	return false
}
