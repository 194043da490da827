package server

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"factory"
	"factory/internal/codehost"
	"factory/internal/reconciler"
	"factory/internal/reconciler/gitsource"
	"factory/internal/schema"
)

// DefaultCheckName is the check a pull request that changes a factory's
// definition gets, as the product names it.
const DefaultCheckName = "warp/factory-config"

// definitionPRs are the pull request events that get a definition check.
var definitionPRs = map[string]bool{"pull_request_opened": true, "pull_request_synchronized": true, "pull_request_reopened": true}

// checkDefinition answers a pull request on a repository that is a
// factory's git source (docs/spec/codehosts.md, Definition checks): the
// revision at its head is checked as a sync would check it, and a check
// run on its head commit says what it would change, or why it cannot be
// applied, with an annotation at each error's and warning's file:line.
// It runs on its own goroutine; a failure is logged.
func (s *Server) checkDefinition(ev *factory.ProviderEvent) {
	if s.cfg.CodeHosts == nil || s.cfg.CodeHosts.GitHub == nil || ev.Provider != factory.ProviderGitHub || !definitionPRs[ev.Event] ||
		ev.Subject == nil || ev.Subject.Ref == "" {
		return
	}
	for _, r := range s.runners {
		gs, ok := r.Source.(*gitsource.Source)
		if !ok || !strings.EqualFold(repoPathOf(gs.URL), ev.Repository) {
			continue
		}
		go func(name, cloneURL string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := s.postDefinitionCheck(ctx, name, cloneURL, ev); err != nil {
				s.log.Warn("checking a pull request's factory definition", "factory", name, "repository", ev.Repository, "pull_request", ev.Subject.Number, "err", err)
			}
		}(r.Name, gs.URL)
	}
}

// postDefinitionCheck checks the factory's definition at the pull
// request's head and posts the check run.
func (s *Server) postDefinitionCheck(ctx context.Context, name, cloneURL string, ev *factory.ProviderEvent) error {
	host := s.cfg.CodeHosts.GitHub
	repo := codehost.Repo{Host: codehost.GitHub, Path: ev.Repository}
	tok, err := host.Token(ctx, []codehost.Repo{repo})
	if err != nil {
		return err
	}
	src := &gitsource.Source{URL: cloneURL, Ref: ev.Subject.Ref, Credential: func() ([]byte, error) { return []byte("x-access-token:" + tok.Value), nil }}
	c, err := reconciler.CheckWithin(ctx, s.cfg.Schedules, src, name, s.store)
	if err != nil {
		return err
	}
	s.applier.ServerWarnings(name, c)
	var impacts []reconciler.Impact
	if c.Plan.Valid() {
		if impacts, err = reconciler.MeasureImpact(c, s.store); err != nil {
			return err
		}
	}
	var summary bytes.Buffer
	reconciler.Markdown(&summary, c.Plan, impacts)
	ck := codehost.Check{Name: s.checkName(), HeadSHA: ev.Subject.Ref, Conclusion: "success", Summary: summary.String(),
		Title: "Valid: " + reconciler.Summary(c.Plan)}
	if !c.Plan.Valid() {
		ck.Conclusion = "failure"
		ck.Title = fmt.Sprintf("Invalid: %d error(s)", len(c.Plan.Diagnostics.Errors()))
	}
	for _, d := range c.Plan.Diagnostics {
		level := "failure"
		if d.Severity == schema.Warning {
			level = "warning"
		}
		msg := d.Message
		if d.Path != "" {
			msg = d.Path + ": " + msg
		}
		ck.Annotations = append(ck.Annotations, codehost.Annotation{Path: d.File, Line: d.Line, Level: level, Message: msg})
	}
	s.log.Info("definition check", "factory", name, "repository", ev.Repository, "pull_request", ev.Subject.Number, "conclusion", ck.Conclusion)
	return host.Check(ctx, repo, ck)
}

func (s *Server) checkName() string {
	if s.cfg.CheckName != "" {
		return s.cfg.CheckName
	}
	return DefaultCheckName
}

// repoPathOf is a git URL's repository path (owner/name), without .git:
// https://github.com/acme/factory.git is acme/factory.
func repoPathOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) < 2 {
		return ""
	}
	return parts[len(parts)-2] + "/" + strings.TrimSuffix(parts[len(parts)-1], ".git")
}
