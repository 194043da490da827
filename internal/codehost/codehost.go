// Package codehost is what the factory asks of a code host (GitHub,
// GitLab; docs/spec/codehosts.md): a short-lived token for an agent's
// repositories, where to clone them from, a progress comment on the issue
// or pull request a run came from (made once, then edited), a reaction to
// the comment that asked, the pull requests of a run's branch, and a check
// on a pull request. Each host's API stays in a package of its own
// (codehost/github, codehost/gitlab), behind Host.
package codehost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Hosts a repository can be on, as factory.yaml's codeForges and the
// events name them.
const (
	GitHub = "github"
	GitLab = "gitlab"
)

// Repo is a repository on a code host: GitHub's owner/name, or GitLab's
// project path (group/subgroup/name).
type Repo struct {
	Host string `json:"host"`
	Path string `json:"path"`
}

func (r Repo) String() string { return r.Host + ":" + r.Path }

// Owner is the repository's first path element (a GitHub owner, a GitLab
// top-level group).
func (r Repo) Owner() string {
	owner, _, _ := strings.Cut(r.Path, "/")
	return owner
}

// Name is the repository's last path element.
func (r Repo) Name() string { return r.Path[strings.LastIndexByte(r.Path, '/')+1:] }

// RepoInfo is what a host says of a repository: where to clone it from (as
// its API answers, so that an Enterprise server or a test host works
// through the API's address alone), its default branch, its page.
type RepoInfo struct {
	CloneURL      string
	DefaultBranch string
	WebURL        string
}

// Token is a credential for a turn: valid until Expires (at most an hour
// for GitHub's installation tokens).
type Token struct {
	Value   string
	Expires time.Time
}

// Thread is where a run reports: an issue or a pull (merge) request, and
// the comment that started the run when one did (it gets the reaction).
type Thread struct {
	Repo Repo `json:"repo"`
	// Number is the or pull request's number (GitLab: the iid).
	Number int `json:"number"`
	// Merge says the number is a pull (merge) request's: GitLab keeps
	// merge requests' notes apart from issues'.
	Merge bool `json:"merge,omitempty"`
	// CommentID is the comment that started the run, if one did;
	// ReviewComment says it is a comment on a pull request's diff (its
	// reactions are elsewhere on GitHub).
	CommentID     int64 `json:"comment_id,omitempty"`
	ReviewComment bool  `json:"review_comment,omitempty"`
}

// Key is the thread's work item key (docs/spec/codehosts.md, Work items):
// github:owner/repo#12, gitlab:group/project!3 (merge request) or #3.
func (t Thread) Key() string {
	sep := "#"
	if t.Host() == GitLab && t.Merge {
		sep = "!"
	}
	return fmt.Sprintf("%s:%s%s%d", t.Repo.Host, t.Repo.Path, sep, t.Number)
}

// Host is the thread's code host.
func (t Thread) Host() string { return t.Repo.Host }

// Pull request statuses (the SDK's PullRequestArtifact status).
const (
	PROpen    = "open"
	PRDraft   = "draft"
	PRMerged  = "merged"
	PRClosed  = "closed"
	PRUnknown = "unknown"
)

// PullRequest is a pull (merge) request as the host says it.
type PullRequest struct {
	URL    string
	Number int
	Title  string
	Branch string
	Status string
}

// Check is a check run on a commit: a conclusion (success or failure), a
// title and a Markdown summary, and annotations at file:line.
type Check struct {
	Name        string
	HeadSHA     string
	Conclusion  string
	Title       string
	Summary     string
	Annotations []Annotation
}

// Annotation is one problem a check shows at a file's line.
type Annotation struct {
	Path    string
	Line    int
	Level   string // failure, warning or notice
	Message string
}

// Host is one code host as the factory uses it.
type Host interface {
	// Name is the host's kind: GitHub or GitLab.
	Name() string
	// Token mints a token for the repositories (all of one owner on
	// GitHub: one installation), scoped to them and to what an agent
	// needs: contents, pull requests, issues, checks.
	Token(ctx context.Context, repos []Repo) (Token, error)
	// Repository says where to clone a repository from.
	Repository(ctx context.Context, r Repo) (RepoInfo, error)
	// Comment posts a comment on the thread and returns its ID;
	// EditComment replaces its body.
	Comment(ctx context.Context, t Thread, body string) (id string, err error)
	EditComment(ctx context.Context, t Thread, id, body string) error
	// React marks the comment that started the run (👀).
	React(ctx context.Context, t Thread) error
	// PullRequests are the pull requests whose head is the branch.
	PullRequests(ctx context.Context, r Repo, branch string) ([]PullRequest, error)
	// Check posts a check run on a commit.
	Check(ctx context.Context, r Repo, c Check) error
	// Env is what an agent's tools read to reach the host with a token:
	// GH_TOKEN, GITHUB_TOKEN and GITHUB_API_URL; GITLAB_TOKEN and
	// GITLAB_URL.
	Env(tok Token) []string
}

// ErrNoHost is the error of a repository whose host has no credential on
// this server: it is not reached at all, not even anonymously.
var ErrNoHost = errors.New("no credential for this code host is configured on this server")

// Hosts are the code hosts this server has credentials for.
type Hosts struct {
	GitHub Host
	GitLab Host
	// GitLabOf, when set, is a factory's own GitLab (its entry's
	// codeHosts.gitlab in the server config), over GitLab.
	GitLabOf map[string]Host
}

// For is the host of a repository for a factory, or ErrNoHost.
func (h *Hosts) For(factoryName, host string) (Host, error) {
	if h == nil {
		return nil, ErrNoHost
	}
	var out Host
	switch host {
	case GitHub:
		out = h.GitHub
	case GitLab:
		out = h.GitLab
		if own := h.GitLabOf[factoryName]; own != nil {
			out = own
		}
	}
	if out == nil {
		return nil, fmt.Errorf("%s: %w", host, ErrNoHost)
	}
	return out, nil
}

// TokenVar is the environment variable a host's token reaches an agent
// (and git's credential helper) as.
func TokenVar(host string) string {
	if host == GitLab {
		return "GITLAB_TOKEN"
	}
	return "GH_TOKEN"
}
