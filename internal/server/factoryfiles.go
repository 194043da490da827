package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"factory"
	"factory/internal/problem"
	"factory/internal/reconciler"
	"factory/internal/schema"
)

// The factory-files API (docs/spec/v1alpha1.md): the JSON Schemas of the
// v1alpha1 format, served without authentication so that editors and CI can
// fetch them, and validation of a tree sent as files.

const schemaVersion = "v1alpha1"

// A validation holds several times its body while it runs (the body, the
// decoded files, the parsed documents: some seven times in all), and any
// key that reads may ask for one. So bodies are bounded, by their
// Content-Length before they are read and while they are read: a factory's
// definitions are small, and a larger tree is checked where it lives, with
// reconcile --dry-run. And so are the validations at once: past them the
// next is answered 429 at once, its body unread.
const (
	maxValidateBody    = 8 << 20
	maxValidations     = 2
	validateRetryAfter = 1 // second
)

func (s *Server) factoryFileRoutes(mux *routes) {
	mux.Handle("GET /v1/factory-files/schemas", handlerFunc(s, s.schemaVersions))
	mux.Handle("GET /v1/factory-files/schemas/{version}", handlerFunc(s, s.schemaBundle))
	mux.Handle("GET /v1/factory-files/schemas/{version}/{document}", handlerFunc(s, s.schemaDocument))
	mux.Handle("POST /v1/factory-files/validate", s.auth(s.validateFiles, factory.ScopeRuns, factory.ScopeRead))
}

func (s *Server) schemaVersions(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"versions": []string{schemaVersion}, "current": schemaVersion})
	return nil
}

func knownVersion(r *http.Request) error {
	if v := r.PathValue("version"); v != schemaVersion {
		return errorf(CodeNotFound, "no schema version "+v+" (have "+schemaVersion+")")
	}
	return nil
}

// schemaBundle is every document of the version, by name.
func (s *Server) schemaBundle(w http.ResponseWriter, r *http.Request) error {
	if err := knownVersion(r); err != nil {
		return err
	}
	docs := map[string]json.RawMessage{}
	for _, k := range schema.V1Alpha1 {
		b, err := schema.Source(k)
		if err != nil {
			return err
		}
		docs[string(k)] = b
	}
	writeJSON(w, http.StatusOK, map[string]any{"version": schemaVersion, "documents": docs})
	return nil
}

func (s *Server) schemaDocument(w http.ResponseWriter, r *http.Request) error {
	if err := knownVersion(r); err != nil {
		return err
	}
	name := strings.TrimSuffix(r.PathValue("document"), ".json")
	for _, k := range schema.V1Alpha1 {
		if string(k) == name {
			b, err := schema.Source(k)
			if err != nil {
				return err
			}
			w.Header().Set("Content-Type", "application/schema+json")
			_, err = w.Write(b)
			return err
		}
	}
	names := make([]string, len(schema.V1Alpha1))
	for i, k := range schema.V1Alpha1 {
		names[i] = string(k)
	}
	return errorf(CodeNotFound, "no document "+name+" in "+schemaVersion+" (have "+strings.Join(names, ", ")+")")
}

// validateRequest is POST /v1/factory-files/validate's body. Factory, when
// set, plans against that factory's state (as a dry-run with --server);
// Strict reports this project's extensions as errors.
type validateRequest struct {
	Files []struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	} `json:"files"`
	Factory string `json:"factory"`
	Strict  bool   `json:"strict"`
}

// validateFiles validates a tree given as files and answers as `reconcile
// --dry-run --output json` does. It writes nothing.
func (s *Server) validateFiles(w http.ResponseWriter, r *http.Request) error {
	tooLarge := errorf(problem.TooLarge, fmt.Sprintf("the request body is over %d MiB, the limit: check a larger tree with factory reconcile --dry-run", maxValidateBody>>20))
	if r.ContentLength > maxValidateBody {
		return tooLarge
	}
	select {
	case s.validations <- struct{}{}:
		defer func() { <-s.validations }()
	default:
		return &Error{Code: problem.Unavailable, RetryAfter: validateRetryAfter,
			Message: fmt.Sprintf("%d validations are running, the most at once: retry in a moment", maxValidations)}
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxValidateBody+1))
	if err != nil {
		return errorf(CodeInvalidRequest, "cannot read the request body")
	}
	if len(b) > maxValidateBody {
		return tooLarge
	}
	var req validateRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return errorf(CodeInvalidRequest, "the body is not a validation request: "+err.Error())
	}
	if len(req.Files) == 0 {
		return errorf(CodeInvalidRequest, "files: give at least one {path, content}")
	}
	files := map[string][]byte{}
	for _, f := range req.Files {
		if f.Content == nil {
			return errorf(CodeInvalidRequest, "files: "+f.Path+" has no content")
		}
		if _, dup := files[f.Path]; dup {
			return errorf(CodeInvalidRequest, "files: "+f.Path+" is given twice")
		}
		files[f.Path] = []byte(*f.Content)
	}
	snap, err := reconciler.SnapshotOf(files)
	if err != nil {
		return errorf(CodeInvalidRequest, "files: "+err.Error())
	}
	name := req.Factory
	var st reconciler.StateReader
	if name != "" {
		if !reconciler.ValidName(name) {
			return errorf(CodeInvalidRequest, "factory: not a factory name")
		}
		st = s.store
	} else {
		name = "validate"
	}
	c, err := reconciler.CheckWithin(r.Context(), s.cfg.Schedules, memorySource{snap}, name, st)
	if err != nil {
		return err
	}
	if req.Strict {
		c.Strict()
	}
	writeJSON(w, http.StatusOK, reconciler.PlanJSON(c.Plan, true))
	return nil
}

// memorySource is a revision already in memory.
type memorySource struct{ snap *reconciler.Snapshot }

func (m memorySource) Fetch(context.Context) (*reconciler.Snapshot, error) { return m.snap, nil }
func (m memorySource) String() string                                      { return "request" }
