// Package github is the factory's GitHub: a GitHub App (its ID and private
// key) that mints installation tokens for runs, finds where to clone a
// repository, writes back to issues and pull requests, and posts checks.
// It is the only importer of go-github and ghinstallation.
package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"factory/internal/codehost"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v88/github"
)

// App is a GitHub App as the factory uses it.
type App struct {
	apps   *ghinstallation.AppsTransport
	app    *gh.Client // as the App itself (its JWT)
	apiURL string

	mu            sync.Mutex
	installations map[string]int64     // by owner
	clients       map[int64]*gh.Client // as an installation
}

// DefaultAPIURL is github.com's API.
const DefaultAPIURL = "https://api.github.com"

// New is the App of appID with its PEM private key, on the API at apiURL
// (github.com's by default; a GitHub Enterprise server's, or a test's).
func New(appID int64, privateKey []byte, apiURL string) (*App, error) {
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	apiURL = strings.TrimRight(apiURL, "/")
	atr, err := ghinstallation.NewAppsTransport(http.DefaultTransport, appID, privateKey)
	if err != nil {
		return nil, fmt.Errorf("the GitHub App's private key: %w", err)
	}
	atr.BaseURL = apiURL
	client, err := newClient(atr, apiURL)
	if err != nil {
		return nil, err
	}
	return &App{apps: atr, app: client, apiURL: apiURL, installations: map[string]int64{}, clients: map[int64]*gh.Client{}}, nil
}

func newClient(tr http.RoundTripper, apiURL string) (*gh.Client, error) {
	base := apiURL + "/"
	return gh.NewClient(gh.WithTransport(tr), gh.WithURLs(&base, &base), gh.WithTimeout(30*time.Second))
}

// Env is what gh and the GitHub libraries read: the token, and the API.
func (a *App) Env(tok codehost.Token) []string {
	return []string{"GH_TOKEN=" + tok.Value, "GITHUB_TOKEN=" + tok.Value, "GITHUB_API_URL=" + a.apiURL}
}

// Name is codehost.GitHub.
func (a *App) Name() string { return codehost.GitHub }

// installation is the App's installation on a repository's owner.
func (a *App) installation(ctx context.Context, r codehost.Repo) (int64, error) {
	a.mu.Lock()
	id, ok := a.installations[r.Owner()]
	a.mu.Unlock()
	if ok {
		return id, nil
	}
	inst, _, err := a.app.Apps.GetRepositoryInstallation(ctx, r.Owner(), r.Name())
	if err != nil {
		return 0, fmt.Errorf("the GitHub App's installation on %s: %w", r.Path, err)
	}
	a.mu.Lock()
	a.installations[r.Owner()] = inst.GetID()
	a.mu.Unlock()
	return inst.GetID(), nil
}

// client is a client as the App's installation on a repository's owner:
// what the factory itself writes back with.
func (a *App) client(ctx context.Context, r codehost.Repo) (*gh.Client, error) {
	id, err := a.installation(ctx, r)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.clients[id]; c != nil {
		return c, nil
	}
	tr := ghinstallation.NewFromAppsTransport(a.apps, id)
	tr.BaseURL = a.apiURL
	tr.InstallationTokenOptions = &gh.InstallationTokenOptions{Permissions: ownPermissions()}
	c, err := newClient(tr, a.apiURL)
	if err != nil {
		return nil, err
	}
	a.clients[id] = c
	return c, nil
}

// agentPermissions are what a run's token may do: push branches, open pull
// requests, comment on issues, post checks; read the rest.
func agentPermissions() *gh.InstallationPermissions {
	w, r := "write", "read"
	return &gh.InstallationPermissions{Contents: &w, PullRequests: &w, Issues: &w, Checks: &w, Metadata: &r}
}

// ownPermissions are what the factory itself does with an installation:
// comment and react on issues and pull requests, post checks, read
// repositories and find pull requests.
func ownPermissions() *gh.InstallationPermissions {
	w, r := "write", "read"
	return &gh.InstallationPermissions{Contents: &r, PullRequests: &w, Issues: &w, Checks: &w, Metadata: &r}
}

// Token mints an installation token for the repositories (one owner's:
// one installation), scoped to them and to agentPermissions; GitHub makes
// it valid for an hour.
func (a *App) Token(ctx context.Context, repos []codehost.Repo) (codehost.Token, error) {
	if len(repos) == 0 {
		return codehost.Token{}, errors.New("a token for no repository")
	}
	names := make([]string, 0, len(repos))
	for _, r := range repos {
		if r.Owner() != repos[0].Owner() {
			return codehost.Token{}, fmt.Errorf("repositories of two owners (%s, %s) need two tokens", repos[0].Owner(), r.Owner())
		}
		names = append(names, r.Name())
	}
	id, err := a.installation(ctx, repos[0])
	if err != nil {
		return codehost.Token{}, err
	}
	tok, _, err := a.app.Apps.CreateInstallationToken(ctx, id, &gh.InstallationTokenOptions{Repositories: names, Permissions: agentPermissions()})
	if err != nil {
		return codehost.Token{}, fmt.Errorf("minting a token for %s: %w", strings.Join(names, ", "), err)
	}
	return codehost.Token{Value: tok.GetToken(), Expires: tok.GetExpiresAt().Time}, nil
}

// Repository says where to clone a repository from.
func (a *App) Repository(ctx context.Context, r codehost.Repo) (codehost.RepoInfo, error) {
	c, err := a.client(ctx, r)
	if err != nil {
		return codehost.RepoInfo{}, err
	}
	repo, _, err := c.Repositories.Get(ctx, r.Owner(), r.Name())
	if err != nil {
		return codehost.RepoInfo{}, fmt.Errorf("repository %s: %w", r.Path, err)
	}
	return codehost.RepoInfo{CloneURL: repo.GetCloneURL(), DefaultBranch: repo.GetDefaultBranch(), WebURL: repo.GetHTMLURL()}, nil
}

// Comment posts a comment on an issue or pull request.
func (a *App) Comment(ctx context.Context, t codehost.Thread, body string) (string, error) {
	c, err := a.client(ctx, t.Repo)
	if err != nil {
		return "", err
	}
	cm, _, err := c.Issues.CreateComment(ctx, t.Repo.Owner(), t.Repo.Name(), t.Number, &gh.IssueComment{Body: &body})
	if err != nil {
		return "", fmt.Errorf("commenting on %s: %w", t.Key(), err)
	}
	return strconv.FormatInt(cm.GetID(), 10), nil
}

// EditComment replaces a comment's body.
func (a *App) EditComment(ctx context.Context, t codehost.Thread, id, body string) error {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return fmt.Errorf("comment ID %q: %w", id, err)
	}
	c, err := a.client(ctx, t.Repo)
	if err != nil {
		return err
	}
	if _, _, err := c.Issues.EditComment(ctx, t.Repo.Owner(), t.Repo.Name(), n, &gh.IssueComment{Body: &body}); err != nil {
		return fmt.Errorf("editing comment %s on %s: %w", id, t.Key(), err)
	}
	return nil
}

// React marks the comment that started the run with 👀, or the issue or
// pull request itself when no comment did.
func (a *App) React(ctx context.Context, t codehost.Thread) error {
	c, err := a.client(ctx, t.Repo)
	if err != nil {
		return err
	}
	owner, name := t.Repo.Owner(), t.Repo.Name()
	switch {
	case t.CommentID != 0 && t.ReviewComment:
		_, _, err = c.Reactions.CreatePullRequestCommentReaction(ctx, owner, name, t.CommentID, "eyes")
	case t.CommentID != 0:
		_, _, err = c.Reactions.CreateIssueCommentReaction(ctx, owner, name, t.CommentID, "eyes")
	default:
		_, _, err = c.Reactions.CreateIssueReaction(ctx, owner, name, t.Number, "eyes")
	}
	if err != nil {
		return fmt.Errorf("reacting on %s: %w", t.Key(), err)
	}
	return nil
}

// PullRequests are the pull requests whose head is branch, of any state.
func (a *App) PullRequests(ctx context.Context, r codehost.Repo, branch string) ([]codehost.PullRequest, error) {
	c, err := a.client(ctx, r)
	if err != nil {
		return nil, err
	}
	prs, _, err := c.PullRequests.List(ctx, r.Owner(), r.Name(), &gh.PullRequestListOptions{State: "all", Head: r.Owner() + ":" + branch})
	if err != nil {
		return nil, fmt.Errorf("pull requests of %s on %s: %w", branch, r.Path, err)
	}
	out := make([]codehost.PullRequest, 0, len(prs))
	for _, pr := range prs {
		out = append(out, codehost.PullRequest{URL: pr.GetHTMLURL(), Number: pr.GetNumber(), Title: pr.GetTitle(),
			Branch: pr.GetHead().GetRef(), Status: Status(pr.GetState(), pr.GetDraft(), pr.MergedAt != nil)})
	}
	return out, nil
}

// maxFilePages is how many pages of a pull request's files GitHub gives
// at most: 3,000 files, 100 a page.
const maxFilePages = 30

// ChangedFiles lists the files a pull request changes (GET
// /repos/{owner}/{repo}/pulls/{pull_number}/files), a page of 100 at a
// time, each page read one file at a time (its patch is not kept), at
// most max files: each file's path, and a renamed file's previous one.
// GitHub lists 3,000 files of a pull request at most: capped says the
// list reached that cap (or max), so the pull request may change more.
func (a *App) ChangedFiles(ctx context.Context, r codehost.Repo, number, max int) ([]string, bool, error) {
	c, err := a.client(ctx, r)
	if err != nil {
		return nil, false, err
	}
	list := &codehost.FileList{Max: min(max, codehost.MaxChangedFiles)}
	for page, pages := 1, 0; page > 0 && !list.Full(); pages++ {
		if pages == maxFilePages {
			return nil, false, fmt.Errorf("the files of %s#%d: more than %d pages", r.Path, number, maxFilePages)
		}
		next, err := a.filesPage(ctx, c, r, number, page, list)
		if err != nil {
			return nil, false, fmt.Errorf("the files of %s#%d: %w", r.Path, number, err)
		}
		page = next
	}
	return list.Paths, list.Full(), nil
}

// filesPage reads one page of a pull request's files into list, and says
// which page is next (0: none).
func (a *App) filesPage(ctx context.Context, c *gh.Client, r codehost.Repo, number, page int, list *codehost.FileList) (int, error) {
	u := fmt.Sprintf("repos/%s/%s/pulls/%d/files?per_page=%d&page=%d", url.PathEscape(r.Owner()), url.PathEscape(r.Name()), number,
		codehost.FilesPerPage, page)
	req, err := c.NewRequest(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.BareDo(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := list.ReadPage(resp.Body, "filename", "previous_filename"); err != nil {
		return 0, fmt.Errorf("page %d: %w", page, err)
	}
	if resp.NextPage <= page {
		return 0, nil // none, or one that would go back
	}
	return resp.NextPage, nil
}

// Status is a pull request's status as the SDK's PullRequestArtifact says
// it, from GitHub's state, draft flag and merge time.
func Status(state string, draft, merged bool) string {
	switch {
	case merged:
		return codehost.PRMerged
	case state == "closed":
		return codehost.PRClosed
	case draft:
		return codehost.PRDraft
	case state == "open":
		return codehost.PROpen
	}
	return codehost.PRUnknown
}

// maxAnnotations is how many annotations GitHub takes in one request.
const maxAnnotations = 50

// Check posts a completed check run, its annotations 50 a request.
func (a *App) Check(ctx context.Context, r codehost.Repo, ck codehost.Check) error {
	c, err := a.client(ctx, r)
	if err != nil {
		return err
	}
	first, rest := ck.Annotations, []codehost.Annotation(nil)
	if len(first) > maxAnnotations {
		first, rest = first[:maxAnnotations], first[maxAnnotations:]
	}
	completed := "completed"
	run, _, err := c.Checks.CreateCheckRun(ctx, r.Owner(), r.Name(), gh.CreateCheckRunOptions{Name: ck.Name, HeadSHA: ck.HeadSHA,
		Status: &completed, Conclusion: &ck.Conclusion, Output: output(ck, first)})
	if err != nil {
		return fmt.Errorf("check %s on %s: %w", ck.Name, r.Path, err)
	}
	for len(rest) > 0 {
		batch := rest[:min(maxAnnotations, len(rest))]
		rest = rest[len(batch):]
		if _, _, err := c.Checks.UpdateCheckRun(ctx, r.Owner(), r.Name(), run.GetID(), gh.UpdateCheckRunOptions{Name: ck.Name,
			Output: output(ck, batch)}); err != nil {
			return fmt.Errorf("annotations of check %s on %s: %w", ck.Name, r.Path, err)
		}
	}
	return nil
}

func output(ck codehost.Check, annotations []codehost.Annotation) *gh.CheckRunOutput {
	out := &gh.CheckRunOutput{Title: &ck.Title, Summary: &ck.Summary}
	for _, a := range annotations {
		line, level, msg, path := max(a.Line, 1), a.Level, a.Message, a.Path
		out.Annotations = append(out.Annotations, &gh.CheckRunAnnotation{Path: &path, StartLine: &line, EndLine: &line,
			AnnotationLevel: &level, Message: &msg})
	}
	return out
}
