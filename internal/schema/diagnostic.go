package schema

import (
	"fmt"
	"sort"
)

// Severity says whether a diagnostic blocks an apply.
type Severity int

const (
	// Error makes a factory revision invalid: nothing of it is applied.
	Error Severity = iota
	// Warning is shown but does not block an apply.
	Warning
)

// Diagnostic is one problem found in a factory repository, positioned at the
// key or value it is about, in the shape of compilers and linters:
// "webhooks/gh.yaml:3:11: /authMode: must be one of token, url_token, signature".
type Diagnostic struct {
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Column   int      `json:"column"`
	Path     string   `json:"path"`
	Message  string   `json:"message"`
	Severity Severity `json:"-"`
}

func (d Diagnostic) String() string {
	s := d.File
	if d.Line > 0 {
		s += fmt.Sprintf(":%d:%d", d.Line, d.Column)
	}
	if d.Path != "" {
		s += ": " + d.Path
	}
	return s + ": " + d.Message
}

// Diagnostics is every problem of one load, errors and warnings together.
type Diagnostics []Diagnostic

// Sort orders diagnostics by file, line and column, as a reader scans them.
func (ds Diagnostics) Sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Path < b.Path
	})
}

// Errors returns the diagnostics that block an apply.
func (ds Diagnostics) Errors() Diagnostics { return ds.of(Error) }

// Warnings returns the diagnostics that do not block an apply.
func (ds Diagnostics) Warnings() Diagnostics { return ds.of(Warning) }

// HasErrors reports whether any diagnostic blocks an apply.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

func (ds Diagnostics) of(s Severity) Diagnostics {
	out := Diagnostics{}
	for _, d := range ds {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	return out
}
