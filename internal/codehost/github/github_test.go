package github_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"factory/internal/codehost"
	"factory/internal/codehost/github"
	"factory/internal/codehost/github/githubtest"
)

// TestApp drives the App against the fake GitHub, whose every request and
// answer is checked against GitHub's OpenAPI description: a token scoped
// to the repositories and to what agents need, expiring within the hour,
// that clones the repository; where to clone from; a comment made, then
// edited; reactions; a pull request found by its head branch, with its
// status; a check with more annotations than one request takes.
func TestApp(t *testing.T) {
	f := githubtest.New(t)
	f.AddRepo("acme", "widgets", map[string]string{"README.md": "# Widgets\n"})
	f.AddRepo("acme", "api", nil)
	app, err := github.New(f.AppID, f.PrivateKey, f.URL)
	if err != nil {
		t.Fatal(err)
	}
	widgets := codehost.Repo{Host: codehost.GitHub, Path: "acme/widgets"}
	checkToken(t, f, app, widgets)
	checkWriteBack(t, f, app, widgets)
}

// checkToken: a token scoped to the repository and to what agents need,
// within the hour, that clones it and no other.
func checkToken(t *testing.T, f *githubtest.Fake, app *github.App, widgets codehost.Repo) {
	ctx := context.Background()
	tok, err := app.Token(ctx, []codehost.Repo{widgets})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.Value, "ghs_") || time.Until(tok.Expires) > time.Hour || time.Until(tok.Expires) < 50*time.Minute {
		t.Fatalf("token %+v", tok)
	}
	minted := f.TokensMinted()
	if len(minted) != 1 || strings.Join(minted[0].Repositories, ",") != "widgets" || minted[0].Permissions["contents"] != "write" ||
		minted[0].Permissions["pull_requests"] != "write" || minted[0].Permissions["issues"] != "write" ||
		minted[0].Permissions["checks"] != "write" || minted[0].Permissions["metadata"] != "read" {
		t.Fatalf("minted %+v", minted)
	}
	if _, err := app.Token(ctx, []codehost.Repo{widgets, {Host: codehost.GitHub, Path: "other/thing"}}); err == nil {
		t.Fatal("a token for two owners' repositories")
	}

	info, err := app.Repository(ctx, widgets)
	if err != nil || info.CloneURL != f.CloneURL("acme", "widgets") || info.DefaultBranch != "main" {
		t.Fatalf("repository %+v %v", info, err)
	}
	// The token clones the repository; another repository's does not.
	clone := func(url, token string) error {
		cmd := exec.Command("git", "-c", "credential.helper=", "-c", "credential.helper=!f() { echo username=x-access-token; echo password=$TOKEN; }; f",
			"clone", "-q", url, filepath.Join(t.TempDir(), "c"))
		cmd.Env = append(os.Environ(), "TOKEN="+token, "GIT_TERMINAL_PROMPT=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return &cloneError{string(out)}
		}
		return nil
	}
	if err := clone(info.CloneURL, tok.Value); err != nil {
		t.Fatalf("clone with the token: %v", err)
	}
	if err := clone(f.CloneURL("acme", "api"), tok.Value); err == nil {
		t.Fatal("the token cloned a repository it was not minted for")
	}
}

// checkWriteBack: a comment made then edited, reactions, a check with
// more annotations than one request takes, pull requests by branch.
func checkWriteBack(t *testing.T, f *githubtest.Fake, app *github.App, widgets codehost.Repo) {
	ctx := context.Background()
	thread := codehost.Thread{Repo: widgets, Number: 7, CommentID: 99}
	id, err := app.Comment(ctx, thread, "Working on it")
	if err != nil {
		t.Fatal(err)
	}
	if err := app.EditComment(ctx, thread, id, "Done"); err != nil {
		t.Fatal(err)
	}
	if err := app.React(ctx, thread); err != nil {
		t.Fatal(err)
	}
	if err := app.React(ctx, codehost.Thread{Repo: widgets, Number: 7}); err != nil {
		t.Fatal(err)
	}
	f.Snapshot(func() {
		if len(f.Comments) != 1 || f.Comments[0].Body != "Done" || f.Comments[0].Edits != 1 || f.Comments[0].Number != 7 {
			t.Errorf("comments %+v", f.Comments)
		}
		if len(f.Reactions) != 2 || f.Reactions[0].On != "comment" || f.Reactions[0].ID != 99 || f.Reactions[0].Content != "eyes" ||
			f.Reactions[1].On != "issue" || f.Reactions[1].ID != 7 {
			t.Errorf("reactions %+v", f.Reactions)
		}
	})

	checks := make([]codehost.Annotation, 120)
	for i := range checks {
		checks[i] = codehost.Annotation{Path: "agents/lead/agent.md", Line: i + 1, Level: "failure", Message: "wrong"}
	}
	if err := app.Check(ctx, widgets, codehost.Check{Name: "warp/factory-config", HeadSHA: f.Head("acme", "widgets", "main"),
		Conclusion: "failure", Title: "2 errors", Summary: "## Plan", Annotations: checks}); err != nil {
		t.Fatal(err)
	}
	f.Snapshot(func() {
		if len(f.Checks) != 1 || len(f.Checks[0].Annotations) != 120 || f.Checks[0].Conclusion != "failure" {
			t.Errorf("checks %+v", f.Checks)
		}
	})
	if prs, err := app.PullRequests(ctx, widgets, "factory/run_1"); err != nil || len(prs) != 0 {
		t.Fatalf("pull requests of a branch with none: %+v %v", prs, err)
	}
	if n := f.Problems.Called("POST /repos/{owner}/{repo}/check-runs"); n != 1 {
		t.Errorf("check runs created: %d", n)
	}
}

type cloneError struct{ out string }

func (e *cloneError) Error() string { return e.out }

// TestStatus: a pull request's status from GitHub's fields.
func TestStatus(t *testing.T) {
	for _, c := range []struct {
		state         string
		draft, merged bool
		want          string
	}{{"open", false, false, codehost.PROpen}, {"open", true, false, codehost.PRDraft}, {"closed", false, true, codehost.PRMerged},
		{"closed", false, false, codehost.PRClosed}, {"", false, false, codehost.PRUnknown}} {
		if got := github.Status(c.state, c.draft, c.merged); got != c.want {
			t.Errorf("%+v: %s", c, got)
		}
	}
}

// TestChangedFiles reads a pull request's files from the fake, whose
// every request and answer is checked against GitHub's description: a
// page of 100 at a time, renamed files by both paths; GitHub's cap of
// 3,000 files said; a 503 an error that says so.
func TestChangedFiles(t *testing.T) {
	f := githubtest.New(t)
	f.AddRepo("acme", "widgets", nil)
	app, err := github.New(f.AppID, f.PrivateKey, f.URL)
	if err != nil {
		t.Fatal(err)
	}
	widgets := codehost.Repo{Host: codehost.GitHub, Path: "acme/widgets"}
	files := func(n int) []githubtest.PullFile {
		out := make([]githubtest.PullFile, n)
		for i := range out {
			out[i] = githubtest.PullFile{Name: fmt.Sprintf("src/pkg%d/file%d.go", i%7, i)}
		}
		return out
	}
	many := append(files(249), githubtest.PullFile{Name: "docs/new.md", Status: "renamed", Previous: "docs/old.md"})
	f.SetPullFiles("acme/widgets", 5, many)
	f.SetPullFiles("acme/widgets", 6, files(3100))
	const op = "GET /repos/{owner}/{repo}/pulls/{pull_number}/files"
	for _, c := range []struct {
		number, paths, requests int
		capped                  bool
		has                     []string
	}{
		{5, 251, 3, false, []string{"src/pkg0/file0.go", "src/pkg3/file248.go", "docs/new.md", "docs/old.md"}},
		{6, 3000, 30, true, []string{"src/pkg3/file2999.go"}},
		{7, 0, 1, false, nil}, // a pull request that changes no file
	} {
		before := f.Problems.Called(op)
		paths, capped, err := app.ChangedFiles(context.Background(), widgets, c.number, codehost.MaxChangedFiles)
		if err != nil || len(paths) != c.paths || capped != c.capped || f.Problems.Called(op)-before != c.requests {
			t.Fatalf("#%d: %d paths, capped %v, %d requests, %v", c.number, len(paths), capped, f.Problems.Called(op)-before, err)
		}
		for _, p := range c.has {
			if !slices.Contains(paths, p) {
				t.Errorf("#%d: %s is not among the paths", c.number, p)
			}
		}
	}
	// A smaller bound stops early: capped.
	if paths, capped, err := app.ChangedFiles(context.Background(), widgets, 5, 120); err != nil || len(paths) != 120 || !capped {
		t.Errorf("at most 120: %d paths, capped %v, %v", len(paths), capped, err)
	}
	f.SetUnavailable(true)
	if _, _, err := app.ChangedFiles(context.Background(), widgets, 5, codehost.MaxChangedFiles); err == nil ||
		!strings.Contains(err.Error(), "the files of acme/widgets#5") || !strings.Contains(err.Error(), "503") {
		t.Errorf("GitHub unavailable: %v", err)
	}
}
