package codehost

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"factory"
	"factory/internal/runtime"
)

// Access is what a turn of a run needs to reach its repositories: for
// each whose host has a credential here, where to clone it from (at the
// run's commit, else its default branch) onto the run's branch, and a
// token minted for the turn, scoped to those repositories, in the
// variables the host's tools read. A repository whose host has no
// credential here is left out, not reached at all, and a note says why;
// so is one of a second GitHub owner (one installation token a turn).
func (h *Hosts) Access(ctx context.Context, factoryName string, r *factory.Run) (checkouts []runtime.Checkout, env, notes []string, err error) {
	byHost := map[string][]factory.RepoCheckout{}
	var order []string
	for _, rc := range r.Repositories {
		if _, seen := byHost[rc.Host]; !seen {
			order = append(order, rc.Host)
		}
		byHost[rc.Host] = append(byHost[rc.Host], rc)
	}
	several := len(r.Repositories) > 1
	for _, name := range order {
		host, herr := h.For(factoryName, name)
		if errors.Is(herr, ErrNoHost) {
			for _, rc := range byHost[name] {
				notes = append(notes, fmt.Sprintf("%s:%s is not cloned: no credential for %s is configured on this server", rc.Host, rc.Path, rc.Host))
			}
			continue
		}
		repos, skipped := oneOwner(name, byHost[name])
		notes = append(notes, skipped...)
		c, e, err := hostAccess(ctx, host, repos, r.Branch(), several)
		if err != nil {
			return nil, nil, nil, err
		}
		checkouts, env = append(checkouts, c...), append(env, e...)
	}
	return checkouts, env, notes, nil
}

// oneOwner keeps a host's repositories of its first owner where the host
// mints a token per owner (GitHub), noting the rest.
func oneOwner(host string, repos []factory.RepoCheckout) ([]factory.RepoCheckout, []string) {
	if host != GitHub || len(repos) < 2 {
		return repos, nil
	}
	owner := Repo{Host: host, Path: repos[0].Path}.Owner()
	var keep []factory.RepoCheckout
	var notes []string
	for _, rc := range repos {
		if (Repo{Host: host, Path: rc.Path}).Owner() == owner {
			keep = append(keep, rc)
			continue
		}
		notes = append(notes, fmt.Sprintf("%s:%s is not cloned: a run's GitHub token reaches one owner's repositories (%s's)", host, rc.Path, owner))
	}
	return keep, notes
}

// hostAccess mints one token for a host's repositories and says where to
// clone each from.
func hostAccess(ctx context.Context, host Host, repos []factory.RepoCheckout, branch string, several bool) ([]runtime.Checkout, []string, error) {
	rs := make([]Repo, len(repos))
	for i, rc := range repos {
		rs[i] = Repo{Host: host.Name(), Path: rc.Path}
	}
	tok, err := host.Token(ctx, rs)
	if err != nil {
		return nil, nil, err
	}
	env := host.Env(tok)
	user := "x-access-token"
	if host.Name() == GitLab {
		user = "oauth2"
	}
	var out []runtime.Checkout
	for i, rc := range repos {
		info, err := host.Repository(ctx, rs[i])
		if err != nil {
			return nil, nil, err
		}
		ref := rc.Ref
		if ref == "" {
			ref = info.DefaultBranch
		}
		dir := ""
		if several {
			dir = path.Base(strings.TrimSuffix(rc.Path, "/"))
		}
		out = append(out, runtime.Checkout{Name: rs[i].String(), URL: info.CloneURL, Ref: ref, Branch: branch, Dir: dir,
			TokenVar: TokenVar(host.Name()), User: user})
		if i == 0 {
			// The first repository, for agents that open a pull request
			// of the run's branch.
			env = append(env, "FACTORY_REPOSITORY="+rc.Path, "FACTORY_BRANCH="+branch, "FACTORY_BASE_BRANCH="+info.DefaultBranch)
		}
	}
	return out, env, nil
}

// PullRequests are the pull requests of a run's branch on the hosts of
// its repositories, as PULL_REQUEST artifacts with their status; what a
// host cannot say is left out (logged by the caller's host, if at all).
func (h *Hosts) PullRequests(ctx context.Context, factoryName string, r *factory.Run) []factory.Artifact {
	var out []factory.Artifact
	for _, rc := range r.Repositories {
		host, err := h.For(factoryName, rc.Host)
		if err != nil {
			continue
		}
		prs, err := host.PullRequests(ctx, Repo{Host: rc.Host, Path: rc.Path}, r.Branch())
		if err != nil {
			continue
		}
		for _, pr := range prs {
			out = append(out, factory.Artifact{Type: factory.ArtifactPullRequest,
				Data: factory.ArtifactData{URL: pr.URL, Branch: pr.Branch, Title: pr.Title, Status: pr.Status}})
		}
	}
	return out
}
