package reconciler

import (
	"fmt"
	"path"
	"strings"

	"factory"
	"factory/internal/schema"
)

// DiagnosticJSON is one problem of a plan, as `reconcile --output json`
// and POST /v1/factory-files/validate show it.
type DiagnosticJSON struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// PlanReport is a plan as `reconcile --output json` prints it.
type PlanReport struct {
	Factory  string           `json:"factory"`
	Revision string           `json:"revision"`
	DryRun   bool             `json:"dry_run"`
	Valid    bool             `json:"valid"`
	Errors   []DiagnosticJSON `json:"errors"`
	Warnings []DiagnosticJSON `json:"warnings"`
	Changes  []Change         `json:"changes"`
	// Impact is set by a dry-run with state: what changed triggers would
	// have done to each selected webhook's recent deliveries.
	Impact []Impact `json:"impact,omitempty"`
}

// PlanJSON is the report of a plan.
func PlanJSON(p *Plan, dryRun bool) PlanReport {
	out := PlanReport{Factory: p.Factory, Revision: p.Revision, DryRun: dryRun, Valid: p.Valid(),
		Errors: []DiagnosticJSON{}, Warnings: []DiagnosticJSON{}, Changes: p.Changes}
	if out.Changes == nil {
		out.Changes = []Change{}
	}
	for _, d := range p.Diagnostics {
		j := DiagnosticJSON{File: d.File, Line: d.Line, Column: d.Column, Path: d.Path, Message: d.Message}
		if d.Severity == schema.Warning {
			out.Warnings = append(out.Warnings, j)
		} else {
			out.Errors = append(out.Errors, j)
		}
	}
	return out
}

// SnapshotOf makes a revision of files given by path and content (POST
// /v1/factory-files/validate), with the limits and the refusals of a
// directory source: a path must be relative, clean and slash-separated;
// files outside the known folders, but factory.yaml, are ignored.
func SnapshotOf(files map[string][]byte) (*Snapshot, error) {
	snap := &Snapshot{Files: map[string][]byte{}}
	budget := &Budget{}
	others := map[string]bool{}
	for p, data := range files {
		if p == "" || path.IsAbs(p) || path.Clean(p) != p || strings.HasPrefix(p, "../") || p == ".." || strings.Contains(p, "\\") {
			return nil, fmt.Errorf("path %q: give a relative, slash-separated path inside the repository, such as agents/foreman/agent.md", p)
		}
		top, _, nested := strings.Cut(p, "/")
		switch {
		case strings.HasPrefix(top, "."):
			continue
		case p == factory.SettingsFile, nested && factory.IsKnownDir(top):
		case nested:
			others[top] = true
			continue
		default:
			continue // README.md, LICENSE
		}
		if len(data) > factory.MaxDefinitionFileBytes {
			snap.Diagnostics = append(snap.Diagnostics, schema.Diagnostic{File: p, Severity: schema.Error,
				Message: fmt.Sprintf("file is %d bytes; the limit is 1 MiB", len(data))})
			continue
		}
		if report, ok := budget.Take(int64(len(data))); !ok {
			if report != nil {
				snap.Diagnostics = append(snap.Diagnostics, schema.Diagnostic{File: p, Severity: schema.Error, Message: report.Error()})
			}
			continue
		}
		snap.Files[p] = data
	}
	for d := range others {
		snap.OtherDirs = append(snap.OtherDirs, d)
	}
	snap.Revision = "sha256:" + contentDigest(snap.Files)[:12]
	return snap, nil
}
