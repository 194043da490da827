package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"factory/internal/codehost"
	"factory/internal/codehost/github"
	"factory/internal/codehost/gitlab"
	"factory/internal/runs"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/store"
	"factory/internal/writeback"
)

// codeHosts are the code hosts of the server's configuration, each made
// when first used (its credential is a managed secret, which may be
// created after the server starts); nil without any.
func codeHosts(cfg *server.FileConfig, s *store.Store, kr *secrets.Keyring, log *slog.Logger) *codehost.Hosts {
	if (cfg.CodeHosts == nil || cfg.CodeHosts.GitHub == nil && cfg.CodeHosts.GitLab == nil) && !anyFactoryGitLab(cfg) {
		return nil
	}
	if cfg.CodeHosts == nil {
		cfg.CodeHosts = &server.CodeHosts{}
	}
	h := &codehost.Hosts{}
	if app := cfg.CodeHosts.GitHub; app != nil {
		h.GitHub = &lazyHost{name: codehost.GitHub, make: func() (codehost.Host, error) {
			key, err := secrets.Current(s, kr, app.PrivateKeySecret)
			if err != nil {
				return nil, fmt.Errorf("the GitHub App's private key (secret %s): %w", app.PrivateKeySecret, err)
			}
			return github.New(app.AppID, key, app.APIURL)
		}}
		log.Info("code host", "host", codehost.GitHub, "app_id", app.AppID, "api", cmpOr(app.APIURL, github.DefaultAPIURL))
	}
	if gl := cfg.CodeHosts.GitLab; gl != nil {
		h.GitLab = gitLabHost(gl, s, kr)
		log.Info("code host", "host", codehost.GitLab, "url", cmpOr(gl.URL, gitlab.DefaultURL))
	}
	for _, f := range cfg.Factories {
		if f.CodeHosts != nil && f.CodeHosts.GitLab != nil {
			if h.GitLabOf == nil {
				h.GitLabOf = map[string]codehost.Host{}
			}
			h.GitLabOf[f.Name] = gitLabHost(f.CodeHosts.GitLab, s, kr)
		}
	}
	return h
}

// gitLabHost is a GitLab whose token is a managed secret.
func gitLabHost(gl *server.GitLabConfig, s *store.Store, kr *secrets.Keyring) codehost.Host {
	return &lazyHost{name: codehost.GitLab, make: func() (codehost.Host, error) {
		tok, err := secrets.Current(s, kr, gl.TokenSecret)
		if err != nil {
			return nil, fmt.Errorf("the GitLab token (secret %s): %w", gl.TokenSecret, err)
		}
		return gitlab.New(gl.URL, string(tok))
	}}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// codeHostHooks give the run manager the code hosts (writeback.Configure).
func codeHostHooks(h *codehost.Hosts, s *store.Store, kr *secrets.Keyring, rp *writeback.Reporter) func(*runs.Config) {
	return func(c *runs.Config) {
		writeback.Configure(c, h, s, rp, func(name string) ([]byte, error) { return secrets.Current(s, kr, name) })
	}
}

// lazyHost makes its host when first used, and again after a failure.
// It lists pull requests' files where its host does.
type lazyHost struct {
	name string
	make func() (codehost.Host, error)
	mu   sync.Mutex
	host codehost.Host
}

var _ codehost.FileLister = (*lazyHost)(nil)

func (l *lazyHost) get() (codehost.Host, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.host != nil {
		return l.host, nil
	}
	h, err := l.make()
	if err != nil {
		return nil, err
	}
	l.host = h
	return h, nil
}

func (l *lazyHost) Name() string { return l.name }

func (l *lazyHost) Token(ctx context.Context, repos []codehost.Repo) (codehost.Token, error) {
	h, err := l.get()
	if err != nil {
		return codehost.Token{}, err
	}
	return h.Token(ctx, repos)
}

func (l *lazyHost) Repository(ctx context.Context, r codehost.Repo) (codehost.RepoInfo, error) {
	h, err := l.get()
	if err != nil {
		return codehost.RepoInfo{}, err
	}
	return h.Repository(ctx, r)
}

func (l *lazyHost) Comment(ctx context.Context, t codehost.Thread, body string) (string, error) {
	h, err := l.get()
	if err != nil {
		return "", err
	}
	return h.Comment(ctx, t, body)
}

func (l *lazyHost) EditComment(ctx context.Context, t codehost.Thread, id, body string) error {
	h, err := l.get()
	if err != nil {
		return err
	}
	return h.EditComment(ctx, t, id, body)
}

func (l *lazyHost) React(ctx context.Context, t codehost.Thread) error {
	h, err := l.get()
	if err != nil {
		return err
	}
	return h.React(ctx, t)
}

func (l *lazyHost) PullRequests(ctx context.Context, r codehost.Repo, branch string) ([]codehost.PullRequest, error) {
	h, err := l.get()
	if err != nil {
		return nil, err
	}
	return h.PullRequests(ctx, r, branch)
}

func (l *lazyHost) Env(tok codehost.Token) []string {
	h, err := l.get()
	if err != nil {
		return nil
	}
	return h.Env(tok)
}

func (l *lazyHost) Check(ctx context.Context, r codehost.Repo, c codehost.Check) error {
	h, err := l.get()
	if err != nil {
		return err
	}
	return h.Check(ctx, r, c)
}

func (l *lazyHost) ChangedFiles(ctx context.Context, r codehost.Repo, number, max int) ([]string, bool, error) {
	h, err := l.get()
	if err != nil {
		return nil, false, err
	}
	fl, ok := h.(codehost.FileLister)
	if !ok {
		return nil, false, fmt.Errorf("the %s host of this server does not list a pull request's files", l.name)
	}
	return fl.ChangedFiles(ctx, r, number, max)
}

func anyFactoryGitLab(cfg *server.FileConfig) bool {
	for _, f := range cfg.Factories {
		if f.CodeHosts != nil && f.CodeHosts.GitLab != nil {
			return true
		}
	}
	return false
}

// checkNameOf is the definition check's name the configuration gives.
func checkNameOf(cfg *server.FileConfig) string {
	if cfg.CodeHosts != nil && cfg.CodeHosts.GitHub != nil {
		return cfg.CodeHosts.GitHub.CheckName
	}
	return ""
}
