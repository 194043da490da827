package runtime_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"factory"
	"factory/internal/codehost"
	"factory/internal/codehost/github"
	"factory/internal/codehost/github/githubtest"
	"factory/internal/runtime"
)

// TestCheckout: a run's repository is cloned into its workspace, at the
// commit asked, on the run's own branch, with a token only the
// environment holds (nothing of it in .git or the workspace); the agent's
// own git push works with the same credential helper, and the workspace's
// files stay out of its commits; a clone that fails ends the turn FAILED,
// environment_setup_failed, with no token in its message.
func TestCheckout(t *testing.T) {
	f := githubtest.New(t)
	f.AddRepo("acme", "widgets", map[string]string{"README.md": "# Widgets\n", "src/main.go": "package main\n"})
	app, err := github.New(f.AppID, f.PrivateKey, f.URL)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := app.Token(context.Background(), []codehost.Repo{{Host: codehost.GitHub, Path: "acme/widgets"}})
	if err != nil {
		t.Fatal(err)
	}
	head := f.Head("acme", "widgets", "main")
	turn := runtime.Turn{RunID: factory.NewUID("run_"), Number: 1, Prompt: "Fix it.", Dir: t.TempDir(), Env: []string{"GH_TOKEN=" + tok.Value},
		Attachments: map[string][]byte{"event-payload.json": []byte(`{}`)},
		Checkout: []runtime.Checkout{{Name: "github:acme/widgets", URL: f.CloneURL("acme", "widgets"), Ref: head, Branch: "factory/run_1",
			TokenVar: "GH_TOKEN", User: "x-access-token"}}}
	// The agent: a commit of its own, pushed to the run's branch.
	agent := &runtime.ExecExecutor{Command: []string{"sh", "-c", `echo fixed > FIX.md && git add -A && git commit -qm "Fix it" && git push -q origin factory/run_1 && git rev-parse --abbrev-ref HEAD`}}
	var msgs []string
	res := runtime.Here(context.Background(), turn, agent, func(e runtime.Event) { msgs = append(msgs, e.Message) })
	if res.State != factory.StateSucceeded {
		t.Fatalf("%+v\n%s", res, strings.Join(msgs, "\n"))
	}
	if !strings.Contains(strings.Join(msgs, "\n"), "checkout: github:acme/widgets at "+head+", on branch factory/run_1") ||
		msgs[len(msgs)-1] != "factory/run_1" {
		t.Errorf("messages:\n%s", strings.Join(msgs, "\n"))
	}
	ws := turn.Workspace()
	for _, p := range []string{"README.md", "src/main.go", "PROMPT.md", "FIX.md"} {
		if _, err := os.Stat(filepath.Join(ws, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	pushed := f.Head("acme", "widgets", "factory/run_1")
	if pushed == "" || pushed == head {
		t.Fatalf("the branch was not pushed: %q", pushed)
	}
	files, err := exec.Command("git", "--git-dir", f.RepoDir("acme", "widgets"), "ls-tree", "-r", "--name-only", pushed).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(files)); strings.Join(got, ",") != "FIX.md,README.md,src/main.go" {
		t.Errorf("the agent's commit holds %v: the workspace's own files must stay out", got)
	}
	grepNoToken(t, turn.Dir, tok.Value)

	// A token that does not reach the repository: FAILED, nothing leaked.
	bad := turn
	bad.Dir, bad.Env = t.TempDir(), []string{"GH_TOKEN=ghs_notatoken_notatoken"}
	res = runtime.Here(context.Background(), bad, agent, func(runtime.Event) {})
	if res.State != factory.StateFailed || res.Code != runtime.CodeEnvironmentSetupFailed || !strings.Contains(res.Message, "checkout of github:acme/widgets") ||
		strings.Contains(res.Message, "ghs_notatoken") {
		t.Fatalf("a clone refused: %+v", res)
	}
}

// grepNoToken fails when a file under dir holds the token.
func grepNoToken(t *testing.T, dir, token string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), token) {
			t.Errorf("%s holds the token", p)
		}
		return nil
	})
}
