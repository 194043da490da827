package writeback

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"factory"
	"factory/internal/codehost"
	"factory/internal/runs"
	"factory/internal/store"
)

// Configure gives a run manager the code hosts: its runs' repositories
// (what to clone, tokens minted per turn), the pull requests of their
// branches after each turn; and every change of a run to rp, which
// reports it where the run came from (the caller runs rp), when rp reaches
// code hosts or chats.
func Configure(c *runs.Config, h *codehost.Hosts, s *store.Store, rp *Reporter, secret func(name string) ([]byte, error)) {
	if rp != nil && (h != nil || rp.Chats != nil) {
		c.Changed = rp.Changed
	}
	if h == nil {
		return
	}
	name := func(uid string) string { return factoryOf(s, uid).Name }
	c.Repositories = func(ctx context.Context, r *factory.Run) (runs.RepoAccess, error) {
		f := factoryOf(s, r.FactoryUID)
		co, env, notes, err := h.AccessAs(ctx, f.Name, f.Settings.CredentialStrategy, r, secret)
		if errors.Is(err, codehost.ErrExternalAuth) {
			err = fmt.Errorf("%w: %s", runs.ErrExternalAuthentication, strings.TrimPrefix(err.Error(), codehost.ErrExternalAuth.Error()+": "))
		}
		return runs.RepoAccess{Checkout: co, Env: env, Notes: notes}, err
	}
	c.PullRequests = func(ctx context.Context, r *factory.Run) []factory.Artifact {
		return h.PullRequests(ctx, name(r.FactoryUID), r)
	}
}

// factoryOf is the factory of a UID (empty when there is none).
func factoryOf(s *store.Store, uid string) *factory.Factory {
	if fs, err := s.Factories(); err == nil {
		for _, f := range fs {
			if f.UID == uid {
				return f
			}
		}
	}
	return &factory.Factory{}
}
