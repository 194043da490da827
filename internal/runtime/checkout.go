package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"factory"
)

// Checkout is a repository cloned into a run's workspace on its first
// turn, before its runner's setup commands (docs/spec/codehosts.md): from
// URL (no credential in it), at Ref (a commit, or a branch), onto the run's
// own Branch, in Dir ("" the workspace itself, else a folder in it), Depth
// commits deep (0: all). Git authenticates with the token in the turn's
// environment variable TokenVar, as User, through a credential helper
// given in the environment: no token is written to .git/config, a file,
// or a command line.
type Checkout struct {
	Name     string `json:"name"`
	URL      string `json:"url"`
	Ref      string `json:"ref"`
	Branch   string `json:"branch"`
	Dir      string `json:"dir,omitempty"`
	Depth    int    `json:"depth,omitempty"`
	TokenVar string `json:"token_var"`
	User     string `json:"user"`
	// Resume: the branch may exist on the remote already (a run its
	// tree's foreman dispatched, after another pushed the tree's branch):
	// it is cloned from there when it does, from Ref when it does not.
	Resume bool `json:"resume,omitempty"`
}

// DefaultDepth is how deep a checkout is unless the runner says otherwise.
const DefaultDepth = 50

// workspaceFiles are the workspace's own files, kept out of a repository
// cloned at the workspace's root (.git/info/exclude): an agent's
// "git add -A" commits none of them.
var workspaceFiles = []string{"/PROMPT.md", "/attachments/", "/event-payload.json", "/" + factory.SkillsDirInWorkspace + "/"}

// gitEnv is the environment git needs for the turn's repositories: for
// each, a credential helper (scoped to its host) that answers with the
// token in its variable; who commits; and no prompt ever. Given to the
// agent too, so that its own git push works the same way.
func gitEnv(t Turn) []string {
	if len(t.Checkout) == 0 {
		return nil
	}
	type kv struct{ k, v string }
	cfg := []kv{{"user.name", "factory agent"}, {"user.email", "agent@factory.invalid"}}
	seen := map[string]bool{}
	for _, c := range t.Checkout {
		u, err := url.Parse(c.URL)
		if err != nil || seen[u.Scheme+"://"+u.Host] {
			continue
		}
		base := u.Scheme + "://" + u.Host
		seen[base] = true
		helper := fmt.Sprintf(`!f() { test "$1" = get || exit 0; echo username=%s; echo "password=$%s"; }; f`, c.User, c.TokenVar)
		// An empty helper first: no helper of the machine's own answers
		// for this host before the turn's.
		cfg = append(cfg, kv{"credential." + base + ".helper", ""}, kv{"credential." + base + ".helper", helper})
	}
	env := []string{"GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_COUNT=" + strconv.Itoa(len(cfg))}
	for i, e := range cfg {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, e.k), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, e.v))
	}
	return env
}

// GitEnv is gitEnv, for a container's agent.
func GitEnv(t Turn) []string { return gitEnv(t) }

// CheckOut clones the turn's repositories into its workspace (those not
// there yet), each onto the run's branch. A clone that fails ends the
// run FAILED, environment_setup_failed, with git's words (any token in
// them hidden).
func CheckOut(ctx context.Context, t Turn, events func(Event)) (Result, bool) {
	if len(t.Checkout) == 0 {
		return Result{}, true
	}
	if t.ws == nil {
		defer t.Release() // opened here, for the checkout only
	}
	ws, err := t.WorkspaceRoot()
	if err != nil {
		return Result{State: factory.StateError, Message: "the workspace: " + err.Error()}, false
	}
	for _, c := range t.Checkout {
		rel, err := checkoutDir(ws, c.Dir)
		if err == nil {
			if _, err := ws.Lstat(path.Join(rel, ".git")); err == nil {
				continue // an earlier turn's
			}
			events(Event{Time: time.Now().UTC(), Message: fmt.Sprintf("checkout: %s at %s, on branch %s", c.Name, c.Ref, c.Branch)})
			err = clone(ctx, t, c, ws, rel)
		}
		if err != nil {
			msg := fmt.Sprintf("checkout of %s at %s failed: %s", c.Name, c.Ref, redact(err.Error(), t.Env))
			if errors.Is(context.Cause(ctx), ErrShutdown) {
				return Result{State: factory.StateError, Message: msg}, false
			}
			return Result{State: factory.StateFailed, Code: CodeEnvironmentSetupFailed, Message: msg}, false
		}
	}
	return Result{}, true
}

// checkoutDir makes a checkout's folder in the workspace (through its
// root) and checks that no part of its path is a link the agent left:
// git, which runs there by path, must not be led out of the workspace.
func checkoutDir(ws *os.Root, dir string) (string, error) {
	rel := path.Clean("./" + filepath.ToSlash(dir))
	if !filepath.IsLocal(rel) && rel != "." {
		return "", fmt.Errorf("folder %q is not inside the workspace", dir)
	}
	if rel == "." {
		return rel, nil
	}
	if err := ws.MkdirAll(rel, 0o700); err != nil {
		return "", err
	}
	for p := rel; p != "."; p = path.Dir(p) {
		if fi, err := ws.Lstat(p); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("%s %w", p, ErrNotAFolder)
		}
	}
	return rel, nil
}

// clone makes rel in the workspace a clone of c: a fetch of c.Ref alone
// (a commit is fetched by its ID), checked out as the run's branch.
func clone(ctx context.Context, t Turn, c Checkout, ws *os.Root, rel string) error {
	dir := filepath.Join(t.Workspace(), filepath.FromSlash(rel))
	depth := c.Depth
	if depth == 0 {
		depth = DefaultDepth
	}
	fetch := []string{"fetch", "--no-tags", "origin", c.Ref}
	if depth > 0 {
		fetch = []string{"fetch", "--no-tags", "--depth", strconv.Itoa(depth), "origin", c.Ref}
	}
	steps := [][]string{{"init", "-q"}, {"remote", "add", "origin", c.URL}, fetch, {"checkout", "-q", "-b", c.Branch, "FETCH_HEAD"}}
	if c.Resume {
		branch := slices.Clone(fetch)
		branch[len(branch)-1] = "refs/heads/" + c.Branch
		for _, args := range steps[:2] {
			if err := git(ctx, t, dir, args...); err != nil {
				return err
			}
		}
		steps = steps[2:]
		if git(ctx, t, dir, branch...) == nil {
			steps = steps[1:] // the tree's branch, as pushed
		}
	}
	for _, args := range steps {
		if err := git(ctx, t, dir, args...); err != nil {
			return err
		}
	}
	if rel == "." {
		f, err := ws.OpenFile(".git/info/exclude", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if errors.Is(err, os.ErrNotExist) {
			if err = ws.MkdirAll(".git/info", 0o700); err == nil {
				f, err = ws.OpenFile(".git/info/exclude", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			}
		}
		if err != nil {
			return err
		}
		_, err = f.WriteString("# the workspace's own files\n" + strings.Join(workspaceFiles, "\n") + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if t.RunAs != nil {
		return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, int(t.RunAs.Uid), int(t.RunAs.Gid))
		})
	}
	return nil
}

// git runs git in dir with the turn's environment (its tokens, the
// credential helpers), as the server's user.
func git(ctx context.Context, t Turn, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = agentEnv(t)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &Tail{Max: SetupOutputLimit}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(out.String()))
	}
	return nil
}

// redact hides the values of the environment's tokens in a message.
func redact(msg string, env []string) string {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if len(v) >= 8 && (strings.Contains(k, "TOKEN") || strings.Contains(k, "SECRET") || strings.Contains(k, "KEY")) {
			msg = strings.ReplaceAll(msg, v, "[redacted]")
		}
	}
	return msg
}
