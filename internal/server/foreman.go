package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"factory"
	"factory/internal/foreman"
	"factory/internal/mcpserver"
	"factory/internal/reconciler"
	"factory/internal/schema"
	"factory/internal/store"
)

// startForeman makes the foreman (tasks, orchestration, the inbox) and
// the Factory MCP server of a server that runs runs.
func (s *Server) startForeman() error {
	key, err := metaKey(s.store, "run_token_key")
	if err != nil {
		return err
	}
	s.foreman = foreman.New(foreman.Config{Store: s.store, Runs: s.cfg.Runs, Log: s.log, URL: s.agentURL, Key: key,
		Fire: s.fireFactoryEvent})
	s.mcp = mcpserver.Handler(mcpserver.Config{Store: s.store, Foreman: s.foreman, PublicURL: s.agentURL,
		Validate: s.validateForTools, Schema: schemaForTools, Version: s.cfg.Version})
	return nil
}

// metaKey is a random 32-byte key kept in the store's meta records,
// made on first use.
func metaKey(st *store.Store, name string) ([]byte, error) {
	v, err := st.Meta(name)
	if err == nil && v == "" {
		k := make([]byte, 32)
		rand.Read(k)
		v = base64.StdEncoding.EncodeToString(k)
		b := st.NewBatch()
		b.PutMeta(name, v)
		err = b.Commit()
	}
	if err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(v)
}

// agentURL is the server's base URL as agents reach it: the public URL,
// else the address it listens on.
func (s *Server) agentURL() string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	if u, ok := s.listenURL.Load().(string); ok {
		return u
	}
	return ""
}

// fireFactoryEvent fires a factory's automations on one of its own events
// (a task's stage changed), once per event.
func (s *Server) fireFactoryEvent(f *factory.Factory, ev *factory.ProviderEvent, payload []byte) {
	if s.eval == nil {
		return
	}
	id := factory.DerivedID("fev_", f.UID, ev.Event, string(payload))
	if _, err := s.eval.FireFactoryEvent(f, ev, id, payload); err != nil {
		s.log.Error("firing a factory event's automations", "factory", f.Name, "event", ev.Event, "err", err)
	}
}

// validateForTools checks files for validate_factory_files: as POST
// /v1/factory-files/validate does without a factory.
func (s *Server) validateForTools(ctx context.Context, files map[string][]byte) (any, error) {
	snap, err := reconciler.SnapshotOf(files)
	if err != nil {
		return nil, factory.Errorf(factory.EINVALID, "files: %v", err)
	}
	c, err := reconciler.CheckWithin(ctx, s.cfg.Schedules, memorySource{snap}, "validate", nil)
	if err != nil {
		return nil, err
	}
	return validation(c, false), nil
}

// schemaForTools is get_factory_file_schema's answer: a document, or the
// list of them.
func schemaForTools(document string) (any, error) {
	var names []string
	for _, k := range schema.V1Alpha1 {
		names = append(names, string(k))
		if string(k) == document {
			b, err := schema.Source(k)
			if err != nil {
				return nil, err
			}
			return json.RawMessage(b), nil
		}
	}
	if document == "" {
		return map[string]any{"schema_version": schemaVersion, "documents": names}, nil
	}
	return nil, factory.Errorf(factory.ENOTFOUND, "no document %q in %s (have %s)", document, schemaVersion, strings.Join(names, ", "))
}

// mcpRoutes serves the Factory MCP server (it authenticates each request
// itself: an API key or a run's token).
func (s *Server) mcpRoutes(mux *routes) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.mcp == nil {
			s.writeError(w, r, errorf(CodeInvalidRequest, "this server does not execute runs: it has no Factory MCP server"))
			return
		}
		s.mcp.ServeHTTP(w, r)
	})
	for _, m := range []string{"GET", "POST", "DELETE"} {
		mux.Handle(fmt.Sprintf("%s %s", m, foreman.MCPPath), h)
	}
}
