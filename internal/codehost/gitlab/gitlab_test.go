package gitlab_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
