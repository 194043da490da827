package server

import (
	"net/http"
)

// The workers' registry (docs/spec/workers.md): admin keys only, and only
// on a server that runs its NATS server (--nats-listen) or uses a cluster of its own (--nats).

func (s *Server) workerRegistry() error {
	if s.cfg.Workers == nil {
		return errorf(CodeConflict, "this server runs no workers: start it with --nats-listen or --nats")
	}
	return nil
}

func (s *Server) createWorker(w http.ResponseWriter, r *http.Request) error {
	if err := s.workerRegistry(); err != nil {
		return err
	}
	var q struct {
		Name string `json:"name"`
		Auth string `json:"auth"` // password (the default) or nkey
	}
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	creds, err := s.cfg.Workers.Create(r.Context(), q.Name, q.Auth)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, creds)
	return nil
}

func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) error {
	if err := s.workerRegistry(); err != nil {
		return err
	}
	ws, err := s.cfg.Workers.List(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"workers": ws, "nats_url": s.cfg.Workers.URL})
	return nil
}

func (s *Server) revokeWorker(w http.ResponseWriter, r *http.Request) error {
	if err := s.workerRegistry(); err != nil {
		return err
	}
	if err := s.cfg.Workers.Revoke(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{})
	return nil
}

// isolation is GET /v1/admin/isolation: how this server's agents are kept
// from it and from each other (runs.Isolation), for status.
func (s *Server) isolation(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Runs == nil {
		return errorf(CodeNotFound, "this server runs no agents")
	}
	writeJSON(w, http.StatusOK, s.cfg.Runs.Isolation())
	return nil
}
