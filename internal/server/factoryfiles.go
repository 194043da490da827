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
	writeJSON(w, http.StatusOK, map[string]any{"current_version": schemaVersion, "current": schemaVersion,
		"versions": []map[string]string{{"schema_version": schemaVersion, "schema_url": "/v1/factory-files/schemas/" + schemaVersion}}})
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
		docs[string(k)+".json"] = b
	}
	writeJSON(w, http.StatusOK, map[string]any{"schema_version": schemaVersion, "version": schemaVersion, "documents": docs})
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
	s.applier.ServerWarnings(name, c)
	if req.Strict {
		c.Strict()
	}
	writeJSON(w, http.StatusOK, validation(c, st != nil))
	return nil
}

// validationAnswer is the plan's report (as `reconcile --dry-run --output
// json` prints it) with the SDKs' FileValidateResponse beside it:
// diagnostics (the errors, located by file), what the validation did, and
// what it did not.
type validationAnswer struct {
	reconciler.PlanReport
	SchemaVersion              string              `json:"schema_version"`
	Diagnostics                []fileDiagnostic    `json:"diagnostics"`
	DeferredResolutions        []map[string]string `json:"deferred_resolutions"`
	StateDependentChecksNotRun []string            `json:"state_dependent_checks_not_run"`
	ValidationScope            map[string]string   `json:"validation_scope"`
}

// fileDiagnostic is an error as the SDKs' Diagnostic: a stable code, the
// file and its 1-based line and column.
type fileDiagnostic struct {
	Code    string `json:"code"`
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

// stateChecks are the checks that need a factory's state: a request
// without factory does not run them.
var stateChecks = []string{"managed_secrets_exist", "webhook_uids_exist"}

func validation(c *reconciler.Checked, withState bool) validationAnswer {
	rep := reconciler.PlanJSON(c.Plan, true)
	a := validationAnswer{PlanReport: rep, SchemaVersion: schemaVersion, Diagnostics: []fileDiagnostic{},
		DeferredResolutions: []map[string]string{}, StateDependentChecksNotRun: stateChecks,
		ValidationScope: map[string]string{"parser": "checked", "state_independent": "checked", "state_dependent": "not_checked"}}
	if withState {
		a.StateDependentChecksNotRun, a.ValidationScope["state_dependent"] = []string{}, "checked"
	}
	for _, e := range rep.Errors {
		a.Diagnostics = append(a.Diagnostics, fileDiagnostic{Code: diagnosticCode(e.Message), Path: e.File, Line: max(e.Line, 1),
			Column: max(e.Column, 1), Message: e.Message})
	}
	return a
}

// diagnosticCode is a stable code for an error, from what its message
// says.
func diagnosticCode(msg string) string {
	switch {
	case strings.Contains(msg, "unknown key"), strings.Contains(msg, "unknown filter key"):
		return "FF_UNKNOWN_FIELD"
	case strings.Contains(msg, "required"), strings.Contains(msg, "missing"):
		return "FF_MISSING_FIELD"
	case strings.Contains(msg, "names no "), strings.Contains(msg, "there is no "):
		return "FF_UNRESOLVED_REFERENCE"
	case strings.Contains(msg, "extension:"):
		return "FF_EXTENSION"
	}
	return "FF_INVALID_VALUE"
}

// memorySource is a revision already in memory.
type memorySource struct{ snap *reconciler.Snapshot }

func (m memorySource) Fetch(context.Context) (*reconciler.Snapshot, error) { return m.snap, nil }
func (m memorySource) String() string                                      { return "request" }
