package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/schema"
)

// The factory-files API (docs/spec/v1alpha1.md): the JSON Schemas of the
// v1alpha1 format, served without authentication so that editors and CI can
// fetch them, and validation of a tree sent as files.

const schemaVersion = "v1alpha1"

// maxValidateBody bounds a validation request: a whole revision at its
// limit, with room for JSON's escaping.
const maxValidateBody = 2*factory.MaxRevisionBytes + 1<<20

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
	var req validateRequest
	if _, err := readJSON(r, maxValidateBody, &req); err != nil {
		return err
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
	c, err := reconciler.Check(r.Context(), memorySource{snap}, name, st)
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
