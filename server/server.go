// Package server is the factory server: one HTTP listener for the API,
// and the loop that keeps every factory reconciled from its source.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"factory/reconciler"
	"factory/store"
)

// FactorySource is one factory the server reconciles.
type FactorySource struct {
	Name   string
	Source reconciler.Source
}

// Config is what the server runs.
type Config struct {
	PublicURL string
	Factories []FactorySource
	// PollInterval is how often sources are read again.
	PollInterval time.Duration
}

// Server serves the API and reconciles factories.
type Server struct {
	cfg     Config
	store   *store.Store
	applier *reconciler.Applier
	log     *slog.Logger

	syncMu sync.Mutex // one sync at a time: a plan must see the state it applies to
	mu     sync.Mutex
	synced map[string]string // factory → last logged outcome
}

// New returns a server over an open store.
func New(cfg Config, applier *reconciler.Applier, log *slog.Logger) *Server {
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Second
	}
	return &Server{cfg: cfg, store: applier.Store, applier: applier, log: log, synced: map[string]string{}}
}

// ServerFile is written into the data directory while a server runs, so
// that commands that need the store go through the server instead.
const ServerFile = "server.json"

// Info is the content of ServerFile.
type Info struct {
	URL string `json:"url"`
	PID int    `json:"pid"`
}

// Run syncs every factory once, then serves on ln and re-syncs every poll
// interval until ctx ends; then it shuts down gracefully.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	for _, f := range s.cfg.Factories {
		s.syncOne(ctx, f)
	}
	info, _ := json.Marshal(Info{URL: "http://" + ln.Addr().String(), PID: os.Getpid()})
	infoPath := filepath.Join(s.store.Dir(), ServerFile)
	if err := os.WriteFile(infoPath, info, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", infoPath, err)
	}
	defer os.Remove(infoPath)

	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("serving", "addr", ln.Addr().String(), "public_url", s.cfg.PublicURL)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(s.cfg.PollInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				for _, f := range s.cfg.Factories {
					s.syncOne(ctx, f)
				}
			}
		}
	}()

	select {
	case err := <-errc:
		wg.Wait()
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	wg.Wait()
	return err
}

// syncOne reconciles one factory and logs when the outcome changes, so
// that a server polling an unchanged source stays quiet.
func (s *Server) syncOne(ctx context.Context, f FactorySource) *reconciler.Checked {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	c, err := s.applier.Sync(ctx, f.Name, f.Source)
	var outcome string
	switch {
	case err != nil:
		outcome = "error: " + err.Error()
	case !c.Plan.Valid():
		outcome = "invalid " + c.Plan.Revision
	default:
		outcome = "applied " + c.Plan.Revision
	}
	s.mu.Lock()
	changed := s.synced[f.Name] != outcome
	s.synced[f.Name] = outcome
	s.mu.Unlock()
	if !changed {
		return c
	}
	switch {
	case err != nil:
		s.log.Error("sync failed", "factory", f.Name, "source", f.Source.String(), "err", err)
	case !c.Plan.Valid():
		errs := c.Plan.Diagnostics.Errors()
		s.log.Warn("revision refused; the last applied state keeps serving", "factory", f.Name, "revision", c.Plan.Revision, "errors", len(errs))
		for _, d := range errs {
			s.log.Warn("invalid definition", "factory", f.Name, "at", d.String())
		}
	default:
		n := 0
		for _, ch := range c.Plan.Changes {
			if ch.Action != reconciler.ActionNoop {
				n++
			}
		}
		s.log.Info("revision applied", "factory", f.Name, "revision", c.Plan.Revision, "changes", n)
	}
	return c
}

// Handler is the server's HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /v1/factories", s.auth(store.ScopeRuns, s.listFactories))
	mux.Handle("GET /v1/factories/{uid}", s.auth(store.ScopeRuns, s.getFactory))
	mux.Handle("POST /v1/factories/{uid}/sync", s.auth(store.ScopeAdmin, s.syncFactory))
	mux.Handle("GET /v1/admin/factories/{name}/state", s.auth(store.ScopeAdmin, s.factoryState))
	mux.Handle("GET /v1/webhooks/{uid}", s.auth(store.ScopeAdmin, s.getWebhook))
	mux.Handle("POST /v1/webhooks/{uid}/reveal-secret", s.auth(store.ScopeAdmin, s.revealSecret))
	return mux
}

type handler func(w http.ResponseWriter, r *http.Request) error

// auth checks the API key and its scope before the handler runs (deny by
// default: every /v1 route goes through here).
func (s *Server) auth(scope string, h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			s.writeError(w, r, errorf(CodeAuthenticationRequired, "send an API key as Authorization: Bearer <key>"))
			return
		}
		key, err := s.store.APIKeyByValue(token)
		if errors.Is(err, store.ErrNotFound) || (err == nil && key.RevokedAt != nil) {
			s.writeError(w, r, errorf(CodeAuthenticationRequired, "unknown or revoked API key"))
			return
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		// Keys are found by their SHA-256, so no comparison of the key
		// itself can leak how much of it matched.
		if !key.Allows(scope) {
			s.writeError(w, r, errorf(CodeNotAuthorized, fmt.Sprintf("this API key has scope %s; this call needs %s", key.Scope, scope)))
			return
		}
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var waiting []string
	for _, f := range s.cfg.Factories {
		if _, ok := s.synced[f.Name]; !ok {
			waiting = append(waiting, f.Name)
		}
	}
	if len(waiting) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "syncing", "factories": waiting})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) listFactories(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.store.Factories()
	if err != nil {
		return err
	}
	out := []reconciler.FactorySummary{}
	for _, f := range fs {
		out = append(out, reconciler.Summary(f))
	}
	writeJSON(w, http.StatusOK, map[string]any{"factories": out})
	return nil
}

func (s *Server) factoryByUID(uid string) (*store.Factory, error) {
	fs, err := s.store.Factories()
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.UID == uid || f.Name == uid {
			return f, nil
		}
	}
	return nil, errorf(CodeNotFound, fmt.Sprintf("no factory %s", uid))
}

func (s *Server) getFactory(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	st, err := reconciler.Status(s.store, f, s.cfg.PublicURL)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) syncFactory(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	for _, fs := range s.cfg.Factories {
		if fs.Name == f.Name {
			s.syncOne(r.Context(), fs)
			return s.getFactory(w, r)
		}
	}
	return errorf(CodeConflict, fmt.Sprintf("factory %s is not served by this server's sources", f.Name))
}

func (s *Server) factoryState(w http.ResponseWriter, r *http.Request) error {
	st, err := s.store.FactoryState(r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}
