package factory

import (
	"encoding/json"
	"time"
)

// ArtifactType is the kind of thing a run produced
// (docs/spec/platform-api.md, Artifacts).
type ArtifactType string

// Artifact types, as the platform API spells them.
const (
	ArtifactFile              ArtifactType = "FILE"
	ArtifactPullRequest       ArtifactType = "PULL_REQUEST"
	ArtifactPlan              ArtifactType = "PLAN"
	ArtifactScreenshot        ArtifactType = "SCREENSHOT"
	ArtifactExternalReference ArtifactType = "EXTERNAL_REFERENCE"
)

// ArtifactTypes lists every type, for filters and messages.
var ArtifactTypes = []ArtifactType{ArtifactFile, ArtifactPullRequest, ArtifactPlan, ArtifactScreenshot, ArtifactExternalReference}

// ParseArtifactType reads a type as the API spells it.
func ParseArtifactType(s string) (ArtifactType, bool) {
	for _, t := range ArtifactTypes {
		if string(t) == s {
			return t, true
		}
	}
	return "", false
}

// Artifact is something a run produced: a file, a pull request, a plan, a
// screenshot or a link. Data holds the fields of every type; the JSON
// form has the fields of its own type only, required ones always present,
// as the SDKs' ArtifactItem union reads them.
type Artifact struct {
	Type      ArtifactType `json:"artifact_type"`
	CreatedAt time.Time    `json:"created_at"`
	Data      ArtifactData `json:"data"`
}

// ArtifactData is the union of the types' fields.
type ArtifactData struct {
	// UID names stored bytes (FILE, SCREENSHOT, PLAN): GET
	// /v1/agent/artifacts/{uid}.
	UID         string `json:"artifact_uid,omitempty"`
	Filename    string `json:"filename,omitempty"`
	Filepath    string `json:"filepath,omitempty"`
	MimeType    string `json:"mime_type,omitempty"`
	Description string `json:"description,omitempty"`
	SizeBytes   int64  `json:"size_bytes,omitempty"`
	Title       string `json:"title,omitempty"`
	URL         string `json:"url,omitempty"`
	Branch      string `json:"branch,omitempty"`
	// Status is a pull request's: open, draft, merged, closed, as its
	// code host last said, or unknown (the default: nothing heard of it).
	Status        string         `json:"status,omitempty"`
	DocumentUID   string         `json:"document_uid,omitempty"`
	ReferenceType string         `json:"reference_type,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

// PullRequestUnknown is the status of a pull request this server has no
// word of from its code host.
const PullRequestUnknown = "unknown"

// HasBytes reports whether the artifact names stored bytes.
func (a *Artifact) HasBytes() bool { return a.Data.UID != "" }

// MarshalJSON writes the fields of the artifact's type: the required ones
// always (an empty branch is still a branch key), the optional ones when
// set.
func (a Artifact) MarshalJSON() ([]byte, error) {
	d := a.Data
	data := map[string]any{}
	opt := func(k, v string) {
		if v != "" {
			data[k] = v
		}
	}
	switch a.Type {
	case ArtifactFile:
		data["artifact_uid"], data["filename"], data["filepath"], data["mime_type"] = d.UID, d.Filename, d.Filepath, d.MimeType
		data["size_bytes"] = d.SizeBytes
		opt("description", d.Description)
		opt("title", d.Title)
	case ArtifactPullRequest:
		data["url"], data["branch"], data["status"] = d.URL, d.Branch, d.Status
		if d.Status == "" {
			data["status"] = PullRequestUnknown
		}
		opt("title", d.Title)
	case ArtifactPlan:
		data["document_uid"] = d.DocumentUID
		opt("artifact_uid", d.UID)
		opt("title", d.Title)
	case ArtifactScreenshot:
		data["artifact_uid"], data["mime_type"] = d.UID, d.MimeType
		opt("description", d.Description)
	case ArtifactExternalReference:
		data["reference_type"], data["url"] = d.ReferenceType, d.URL
		opt("title", d.Title)
		if len(d.Metadata) > 0 {
			data["metadata"] = d.Metadata
		}
	default:
		type plain ArtifactData
		return json.Marshal(struct {
			Type      ArtifactType `json:"artifact_type"`
			CreatedAt time.Time    `json:"created_at"`
			Data      plain        `json:"data"`
		}{a.Type, a.CreatedAt, plain(d)})
	}
	return json.Marshal(struct {
		Type      ArtifactType   `json:"artifact_type"`
		CreatedAt time.Time      `json:"created_at"`
		Data      map[string]any `json:"data"`
	}{a.Type, a.CreatedAt, data})
}
