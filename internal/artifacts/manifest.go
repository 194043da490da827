// Package artifacts reads what an agent produced: the files it left in
// its output folder ($FACTORY_OUTPUT_DIR), and the declarations of its
// manifest (artifacts.jsonl there) for what is not a file, such as a pull
// request (docs/agents-api.md, "Artifacts"). Both are untrusted: an agent
// acts on webhook payloads, which are prompt injection waiting to happen.
package artifacts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	"factory"
)

// ManifestName is the manifest's file name in the output folder.
const ManifestName = "artifacts.jsonl"

// Limits of what a run can report.
const (
	MaxPerRun        = 100      // artifacts of all kinds, over all turns
	MaxFileBytes     = 10 << 20 // one file
	MaxRunBytes      = 64 << 20 // all of a run's files
	MaxManifestBytes = 1 << 20
	maxText          = 1024 // a title, description, branch or reference type
	maxURL           = 2048
)

// Declaration is one line of the manifest.
type Declaration struct {
	Type factory.ArtifactType `json:"artifact_type"`
	// File is a path in the output folder: the file a FILE line describes,
	// or the bytes of a SCREENSHOT or a PLAN.
	File          string         `json:"file,omitempty"`
	URL           string         `json:"url,omitempty"`
	Branch        string         `json:"branch,omitempty"`
	Title         string         `json:"title,omitempty"`
	Description   string         `json:"description,omitempty"`
	ReferenceType string         `json:"reference_type,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

// ParseManifest reads a manifest: one JSON object per line, blank lines
// skipped. A bad line is reported with its number and skipped; the good
// lines count.
func ParseManifest(data []byte) ([]Declaration, []error) {
	var out []Declaration
	var errs []error
	if len(data) > MaxManifestBytes {
		return nil, []error{fmt.Errorf("%s: over %d bytes; not read", ManifestName, MaxManifestBytes)}
	}
	for n, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var d Declaration
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %v", ManifestName, n+1, err))
			continue
		}
		if err := d.check(); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %v", ManifestName, n+1, err))
			continue
		}
		out = append(out, d)
	}
	return out, errs
}

// check says what is wrong with a declaration, if anything.
func (d *Declaration) check() error {
	for name, v := range map[string]string{"title": d.Title, "description": d.Description, "branch": d.Branch, "reference_type": d.ReferenceType} {
		if len(v) > maxText || !utf8.ValidString(v) {
			return fmt.Errorf("%s: must be UTF-8 of at most %d bytes", name, maxText)
		}
	}
	if d.File != "" {
		if err := checkFile(d.File); err != nil {
			return err
		}
	}
	switch d.Type {
	case factory.ArtifactFile, factory.ArtifactScreenshot, factory.ArtifactPlan:
		if d.File == "" {
			return fmt.Errorf("a %s names its file (\"file\": a path in the output folder)", d.Type)
		}
		return nil
	case factory.ArtifactPullRequest, factory.ArtifactExternalReference:
		if d.File != "" {
			return fmt.Errorf("a %s has a url, not a file", d.Type)
		}
		return checkURL(d.URL)
	case "":
		return fmt.Errorf("artifact_type: required, one of FILE, PULL_REQUEST, PLAN, SCREENSHOT, EXTERNAL_REFERENCE")
	}
	return fmt.Errorf("artifact_type: %q is not one of FILE, PULL_REQUEST, PLAN, SCREENSHOT, EXTERNAL_REFERENCE", d.Type)
}

// checkFile accepts a clean relative path: no "..", not absolute, not the
// manifest itself.
func checkFile(p string) error {
	if len(p) > 1024 || !utf8.ValidString(p) || strings.ContainsRune(p, 0) || path.IsAbs(p) ||
		path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("file: %q is not a clean path inside the output folder", p)
	}
	if p == ManifestName {
		return fmt.Errorf("file: the manifest is not an artifact")
	}
	return nil
}

// checkURL accepts an absolute http or https URL.
func checkURL(raw string) error {
	if raw == "" {
		return fmt.Errorf("url: required")
	}
	u, err := url.Parse(raw)
	if len(raw) > maxURL || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url: %q is not an http or https URL of at most %d bytes", truncate(raw, 80), maxURL)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
