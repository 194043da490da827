package writeback

import (
	"context"

	"factory"
	"factory/internal/codehost"
	"factory/internal/runs"
	"factory/internal/store"
)

// Configure gives a run manager the code hosts: its runs' repositories
// (what to clone, tokens minted per turn), the pull requests of their
// branches after each turn, and every change of a run to rp, which
// reports it where the run came from (the caller runs rp). Nothing without
// hosts.
func Configure(c *runs.Config, h *codehost.Hosts, s *store.Store, rp *Reporter) {
	if h == nil {
		return
	}
	name := func(uid string) string {
		if fs, err := s.Factories(); err == nil {
			for _, f := range fs {
				if f.UID == uid {
					return f.Name
				}
			}
		}
		return ""
	}
	c.Repositories = func(ctx context.Context, r *factory.Run) (runs.RepoAccess, error) {
		co, env, notes, err := h.Access(ctx, name(r.FactoryUID), r)
		return runs.RepoAccess{Checkout: co, Env: env, Notes: notes}, err
	}
	c.PullRequests = func(ctx context.Context, r *factory.Run) []factory.Artifact {
		return h.PullRequests(ctx, name(r.FactoryUID), r)
	}
	if rp != nil {
		c.Changed = rp.Changed
	}
}
