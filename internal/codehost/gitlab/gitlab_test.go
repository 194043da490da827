package gitlab_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"factory/internal/codehost"
	"factory/internal/codehost/gitlab"
	"factory/internal/codehost/gitlab/gitlabtest"
)

// TestInstance drives the GitLab instance against the fake, whose every
// request is checked against GitLab's documented endpoints: the project's
// clone URL (a project in a subgroup), which the token clones; a note made
// then edited on an issue and on a merge request; award emoji on notes;
// merge requests of a branch, with their status; a commit status.
func TestInstance(t *testing.T) {
	f := gitlabtest.New(t)
	f.AddProject("acme/platform/widgets", map[string]string{"README.md": "# Widgets\n"})
	g, err := gitlab.New(f.URL, f.Token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	repo := codehost.Repo{Host: codehost.GitLab, Path: "acme/platform/widgets"}
	info, err := g.Repository(ctx, repo)
	if err != nil || info.CloneURL != f.URL+"/git/acme/platform/widgets.git" || info.DefaultBranch != "main" {
		t.Fatalf("repository %+v %v", info, err)
	}
	cmd := exec.Command("git", "-c", "credential.helper=", "-c", "credential.helper=!f() { echo username=oauth2; echo password=$TOKEN; }; f",
		"clone", "-q", info.CloneURL, filepath.Join(t.TempDir(), "c"))
	cmd.Env = append(os.Environ(), "TOKEN="+f.Token, "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	for _, merge := range []bool{false, true} {
		th := codehost.Thread{Repo: repo, Number: 3, Merge: merge, CommentID: 77}
		id, err := g.Comment(ctx, th, "Working on it")
		if err != nil {
			t.Fatal(err)
		}
		if err := g.EditComment(ctx, th, id, "Done"); err != nil {
			t.Fatal(err)
		}
		if err := g.React(ctx, th); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Check(ctx, repo, codehost.Check{Name: "warp/factory-config", HeadSHA: f.Head("acme/platform/widgets", "main"), Conclusion: "failure", Title: "1 error"}); err != nil {
		t.Fatal(err)
	}
	if prs, err := g.PullRequests(ctx, repo, "factory/run_1"); err != nil || len(prs) != 0 {
		t.Fatalf("merge requests: %+v %v", prs, err)
	}
	f.Snapshot(func() {
		if len(f.Notes) != 2 || f.Notes[0].Noteable != "Issue" || f.Notes[1].Noteable != "MergeRequest" || f.Notes[0].Body != "Done" || f.Notes[1].Edits != 1 {
			t.Errorf("notes %+v %+v", f.Notes[0], f.Notes[1])
		}
		if len(f.Awards) != 2 || f.Awards[0].Note != 77 || f.Awards[0].Name != "eyes" || f.Awards[1].Noteable != "MergeRequest" {
			t.Errorf("awards %+v", f.Awards)
		}
		if len(f.Statuses) != 1 || f.Statuses[0].State != "failed" || f.Statuses[0].Name != "warp/factory-config" {
			t.Errorf("statuses %+v", f.Statuses)
		}
	})
}

// TestStatus: a merge request's status from GitLab's fields.
func TestStatus(t *testing.T) {
	for _, c := range []struct {
		state string
		draft bool
		want  string
	}{{"opened", false, codehost.PROpen}, {"opened", true, codehost.PRDraft}, {"merged", false, codehost.PRMerged},
		{"closed", false, codehost.PRClosed}, {"locked", false, codehost.PRClosed}, {"", false, codehost.PRUnknown}} {
		if got := gitlab.Status(c.state, c.draft); got != c.want {
			t.Errorf("%+v: %s", c, got)
		}
	}
}

// TestChangedFiles reads a merge request's files from the fake, whose
// every request is checked against GitLab's documented endpoint: pages of
// 100, a renamed file by both paths; a merge request GitLab does not have,
// a failing GitLab and one that is down give errors that say so.
func TestChangedFiles(t *testing.T) {
	f := gitlabtest.New(t)
	f.AddProject("acme/platform/widgets", nil)
	g, err := gitlab.New(f.URL, f.Token)
	if err != nil {
		t.Fatal(err)
	}
	repo := codehost.Repo{Host: codehost.GitLab, Path: "acme/platform/widgets"}
	files := make([]gitlabtest.MRFile, 230)
	for i := range files {
		files[i] = gitlabtest.MRFile{Path: fmt.Sprintf("svc/%d/main.go", i)}
	}
	files[7] = gitlabtest.MRFile{Path: "docs/new.md", OldPath: "docs/old.md"}
	f.SetMRFiles("acme/platform/widgets", 4, files)
	const op = "GET /projects/:id/merge_requests/:merge_request_iid/diffs"
	ctx := context.Background()
	paths, capped, err := g.ChangedFiles(ctx, repo, 4, codehost.MaxChangedFiles)
	if err != nil || len(paths) != 231 || capped || f.Called(op) != 3 {
		t.Fatalf("%d paths, capped %v, %d requests, %v", len(paths), capped, f.Called(op), err)
	}
	for _, p := range []string{"svc/0/main.go", "svc/229/main.go", "docs/new.md", "docs/old.md"} {
		if !slices.Contains(paths, p) {
			t.Errorf("%s is not among the paths", p)
		}
	}
	if paths, capped, err := g.ChangedFiles(ctx, repo, 4, 150); err != nil || len(paths) != 151 || !capped { // 150 files, one renamed
		t.Errorf("at most 150: %d paths, capped %v, %v", len(paths), capped, err)
	}
	if _, _, err := g.ChangedFiles(ctx, repo, 9, codehost.MaxChangedFiles); err == nil || !strings.Contains(err.Error(), "the diffs of acme/platform/widgets!9") ||
		!strings.Contains(err.Error(), "404") {
		t.Errorf("a merge request GitLab does not have: %v", err)
	}
	f.SetFailing(true)
	if _, _, err := g.ChangedFiles(ctx, repo, 4, codehost.MaxChangedFiles); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("GitLab failing: %v", err)
	}
	down, err := gitlab.New(closedURL(t), f.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := down.ChangedFiles(ctx, repo, 4, codehost.MaxChangedFiles); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("GitLab down: %v", err)
	}
}

// closedURL is an address on loopback that nothing listens on.
func closedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}
