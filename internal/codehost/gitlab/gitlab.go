// Package gitlab is the factory's GitLab: an instance and an access token
// (a project, group or bot token), with which runs clone and the factory
// writes back to issues and merge requests and sets commit statuses. It
// is the only importer of GitLab's client.
package gitlab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"factory/internal/codehost"

	gl "gitlab.com/gitlab-org/api/client-go"
)

// Instance is a GitLab instance as the factory uses it.
type Instance struct {
	url, token string
	client     *gl.Client
	http       *http.Client // for answers read as they arrive
}

// DefaultURL is gitlab.com.
const DefaultURL = "https://gitlab.com"

// New is the GitLab at baseURL (gitlab.com by default) with a token.
func New(baseURL, token string) (*Instance, error) {
	if baseURL == "" {
		baseURL = DefaultURL
	}
	baseURL = strings.TrimRight(baseURL, "/")
	c, err := gl.NewClient(token, gl.WithBaseURL(baseURL+"/api/v4"), gl.WithoutRetries())
	if err != nil {
		return nil, fmt.Errorf("the GitLab client: %w", err)
	}
	return &Instance{url: baseURL, token: token, client: c, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// Name is codehost.GitLab.
func (g *Instance) Name() string { return codehost.GitLab }

// Token is the configured token: GitLab's project, group and bot tokens
// are not minted per turn (their scopes and expiry are the token's).
func (g *Instance) Token(ctx context.Context, repos []codehost.Repo) (codehost.Token, error) {
	return codehost.Token{Value: g.token}, nil
}

// Env is what glab and the GitLab libraries read.
func (g *Instance) Env(tok codehost.Token) []string {
	host := g.url
	if u, err := url.Parse(g.url); err == nil {
		host = u.Host
	}
	return []string{"GITLAB_TOKEN=" + tok.Value, "GITLAB_HOST=" + host, "GITLAB_URL=" + g.url}
}

// Repository says where to clone a project from.
func (g *Instance) Repository(ctx context.Context, r codehost.Repo) (codehost.RepoInfo, error) {
	p, _, err := g.client.Projects.GetProject(r.Path, nil, gl.WithContext(ctx))
	if err != nil {
		return codehost.RepoInfo{}, fmt.Errorf("project %s: %w", r.Path, err)
	}
	return codehost.RepoInfo{CloneURL: p.HTTPURLToRepo, DefaultBranch: p.DefaultBranch, WebURL: p.WebURL}, nil
}

// Comment posts a note on an issue or merge request.
func (g *Instance) Comment(ctx context.Context, t codehost.Thread, body string) (string, error) {
	var n *gl.Note
	var err error
	if t.Merge {
		n, _, err = g.client.Notes.CreateMergeRequestNote(t.Repo.Path, int64(t.Number), &gl.CreateMergeRequestNoteOptions{Body: &body}, gl.WithContext(ctx))
	} else {
		n, _, err = g.client.Notes.CreateIssueNote(t.Repo.Path, int64(t.Number), &gl.CreateIssueNoteOptions{Body: &body}, gl.WithContext(ctx))
	}
	if err != nil {
		return "", fmt.Errorf("commenting on %s: %w", t.Key(), err)
	}
	return strconv.FormatInt(n.ID, 10), nil
}

// EditComment replaces a note's body.
func (g *Instance) EditComment(ctx context.Context, t codehost.Thread, id, body string) error {
	note, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return fmt.Errorf("note ID %q: %w", id, err)
	}
	if t.Merge {
		_, _, err = g.client.Notes.UpdateMergeRequestNote(t.Repo.Path, int64(t.Number), note, &gl.UpdateMergeRequestNoteOptions{Body: &body}, gl.WithContext(ctx))
	} else {
		_, _, err = g.client.Notes.UpdateIssueNote(t.Repo.Path, int64(t.Number), note, &gl.UpdateIssueNoteOptions{Body: &body}, gl.WithContext(ctx))
	}
	if err != nil {
		return fmt.Errorf("editing note %s on %s: %w", id, t.Key(), err)
	}
	return nil
}

// React awards 👀 to the note that started the run, or to the issue or
// merge request itself.
func (g *Instance) React(ctx context.Context, t codehost.Thread) error {
	eyes := &gl.CreateAwardEmojiOptions{Name: "eyes"}
	var err error
	switch {
	case t.CommentID != 0 && t.Merge:
		_, _, err = g.client.AwardEmoji.CreateMergeRequestAwardEmojiOnNote(t.Repo.Path, int64(t.Number), t.CommentID, eyes, gl.WithContext(ctx))
	case t.CommentID != 0:
		_, _, err = g.client.AwardEmoji.CreateIssuesAwardEmojiOnNote(t.Repo.Path, int64(t.Number), t.CommentID, eyes, gl.WithContext(ctx))
	case t.Merge:
		_, _, err = g.client.AwardEmoji.CreateMergeRequestAwardEmoji(t.Repo.Path, int64(t.Number), eyes, gl.WithContext(ctx))
	default:
		_, _, err = g.client.AwardEmoji.CreateIssueAwardEmoji(t.Repo.Path, int64(t.Number), eyes, gl.WithContext(ctx))
	}
	if err != nil {
		return fmt.Errorf("reacting on %s: %w", t.Key(), err)
	}
	return nil
}

// PullRequests are the merge requests whose source branch is branch.
func (g *Instance) PullRequests(ctx context.Context, r codehost.Repo, branch string) ([]codehost.PullRequest, error) {
	mrs, _, err := g.client.MergeRequests.ListProjectMergeRequests(r.Path, &gl.ListProjectMergeRequestsOptions{SourceBranch: &branch}, gl.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("merge requests of %s on %s: %w", branch, r.Path, err)
	}
	out := make([]codehost.PullRequest, 0, len(mrs))
	for _, mr := range mrs {
		out = append(out, codehost.PullRequest{URL: mr.WebURL, Number: int(mr.IID), Title: mr.Title, Branch: mr.SourceBranch,
			Status: Status(mr.State, mr.Draft)})
	}
	return out, nil
}

// maxFilePages bounds the pages of a merge request's diffs read: enough
// for codehost.MaxChangedFiles, 100 a page.
const maxFilePages = codehost.MaxChangedFiles / codehost.FilesPerPage

// ChangedFiles lists the files a merge request changes (GET
// /projects/:id/merge_requests/:merge_request_iid/diffs), a page of 100 at
// a time, each page read one file at a time as it arrives (its diff is
// not kept), at most max files: each file's new path, and its old one
// where it differs. GitLab lists a merge request's diffs within its
// instance's diff limits (1,000 files by default): capped says the list
// reached max.
func (g *Instance) ChangedFiles(ctx context.Context, r codehost.Repo, number, max int) ([]string, bool, error) {
	list := &codehost.FileList{Max: min(max, codehost.MaxChangedFiles)}
	for page, pages := int64(1), 0; page > 0 && !list.Full(); pages++ {
		if pages == maxFilePages {
			return nil, false, fmt.Errorf("the diffs of %s!%d: more than %d pages", r.Path, number, maxFilePages)
		}
		next, err := g.diffsPage(ctx, r, number, page, list)
		if err != nil {
			return nil, false, fmt.Errorf("the diffs of %s!%d: %w", r.Path, number, err)
		}
		page = next
	}
	return list.Paths, list.Full(), nil
}

// diffsPage reads one page of a merge request's diffs into list, and
// says which page is next (0: none).
func (g *Instance) diffsPage(ctx context.Context, r codehost.Repo, number int, page int64, list *codehost.FileList) (int64, error) {
	opt := &gl.ListMergeRequestDiffsOptions{ListOptions: gl.ListOptions{Page: page, PerPage: codehost.FilesPerPage}}
	req, err := g.client.NewRequest(http.MethodGet, fmt.Sprintf("projects/%s/merge_requests/%d/diffs", gl.PathEscape(r.Path), number), opt,
		[]gl.RequestOptionFunc{gl.WithContext(ctx)})
	if err != nil {
		return 0, err
	}
	req.Header.Set("PRIVATE-TOKEN", g.token)
	resp, err := g.http.Do(req.Request)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body := resp.Body
	resp.Body = io.NopCloser(io.LimitReader(body, 64<<10)) // what an error's message is read from, at most
	if err := gl.CheckResponse(resp); err != nil {
		return 0, err
	}
	if _, err := list.ReadPage(body, "new_path", "old_path"); err != nil {
		return 0, fmt.Errorf("page %d: %w", page, err)
	}
	next, _ := strconv.ParseInt(resp.Header.Get("X-Next-Page"), 10, 64)
	if next <= page {
		return 0, nil // none, or one that would go back
	}
	return next, nil
}

// Status is a merge request's status as the SDK's PullRequestArtifact
// says it, from GitLab's state and draft flag.
func Status(state string, draft bool) string {
	switch state {
	case "merged":
		return codehost.PRMerged
	case "closed", "locked":
		return codehost.PRClosed
	case "opened":
		if draft {
			return codehost.PRDraft
		}
		return codehost.PROpen
	}
	return codehost.PRUnknown
}

// Check sets a commit status: GitLab has no check runs with annotations,
// so the status says the title, and the name is the check's.
func (g *Instance) Check(ctx context.Context, r codehost.Repo, c codehost.Check) error {
	state := gl.Success
	if c.Conclusion != "success" {
		state = gl.Failed
	}
	desc := c.Title
	if len(desc) > 255 {
		desc = desc[:252] + "..."
	}
	if _, _, err := g.client.Commits.SetCommitStatus(r.Path, c.HeadSHA, &gl.SetCommitStatusOptions{State: state, Name: &c.Name,
		Description: &desc}, gl.WithContext(ctx)); err != nil {
		return fmt.Errorf("commit status %s on %s: %w", c.Name, r.Path, err)
	}
	return nil
}
