package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// Permission policies of an environment or an agent: how an ACP agent's
// permission requests are answered (docs/spec/harnesses.md).
const (
	// PermissionsAllow (the default) allows a tool call whose every path
	// is inside the workspace, with the narrowest allow option the agent
	// offered, and refuses any other.
	PermissionsAllow = "allow"
	// PermissionsDeny refuses every tool call the agent asks about.
	PermissionsDeny = "deny"
	// PermissionsAsk asks a person (Turn.Approve): the run is BLOCKED
	// until they answer or the approval times out.
	PermissionsAsk = "ask"
)

// CodeNotAuthorized is the error code of a run whose agent ended its turn
// because a tool call was refused (the only refusal it offered aborts
// the turn).
const CodeNotAuthorized = "not_authorized"

// ApprovalRequest is a tool call an agent asks permission for, put to a
// person (permissions ask).
type ApprovalRequest struct {
	// Key names the request within its turn: the item that asks a
	// person about it is derived from the turn's attempt and Key, so that
	// asking again (a worker's retry) finds the same one.
	Key        string           `json:"key"`
	ToolCallID string           `json:"tool_call_id"`
	Title      string           `json:"title"`
	Kind       string           `json:"tool_kind,omitempty"`
	Arguments  string           `json:"arguments,omitempty"`
	Paths      []string         `json:"paths,omitempty"`
	Options    []ApprovalOption `json:"options"`
}

// ApprovalOption is an answer the agent offered.
type ApprovalOption struct {
	ID   string `json:"option_id"`
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// Reject is the option that refuses the tool call: the agent's
// reject_once, else its reject_always; "" when it offered none.
func (r *ApprovalRequest) Reject() string {
	for _, k := range []acp.PermissionOptionKind{acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways} {
		for _, o := range r.Options {
			if o.Kind == string(k) {
				return o.ID
			}
		}
	}
	return ""
}

// Offers reports whether the agent offered the option.
func (r *ApprovalRequest) Offers(id string) bool {
	return slices.ContainsFunc(r.Options, func(o ApprovalOption) bool { return o.ID == id })
}

// ApprovalAnswer is the answer to an approval: the option chosen, by a
// person or, when none answered in time, the timeout (the agent's reject
// option).
type ApprovalAnswer struct {
	OptionID string `json:"option_id"`
	TimedOut bool   `json:"timed_out,omitempty"`
}

// Approver asks a person about a tool call and returns their answer (or
// the timeout's); an error when the turn ends first.
type Approver func(ctx context.Context, req ApprovalRequest) (ApprovalAnswer, error)

// Bounds of what a permission request makes the server hold.
const (
	maxToolPaths = 64
	maxArguments = 8 << 10
)

// pathKeys are the keys of a tool call's raw input that hold paths, in
// the three agents' tools (Claude's file_path and notebook_path, Gemini's
// file_path, dir_path and absolute_path, Codex's cwd and the files of a
// patch's changes).
var pathKeys = []string{"file_path", "filePath", "path", "paths", "absolute_path", "notebook_path", "dir_path", "directory",
	"cwd", "workdir", "old_path", "new_path", "source", "destination"}

// toolPaths are the paths a tool call names: its locations, the paths of
// its diffs, and the path fields of its raw input (those of pathKeys, the
// files of a patch's changes), each once, at most maxToolPaths.
func toolPaths(tc acp.ToolCallUpdate) []string {
	var out []string
	add := func(p string) {
		if p = strings.TrimSpace(p); p != "" && len(out) < maxToolPaths && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, l := range tc.Locations {
		add(l.Path)
	}
	for _, c := range tc.Content {
		if c.Diff != nil {
			add(c.Diff.Path)
		}
	}
	in, _ := tc.RawInput.(map[string]any)
	for _, k := range pathKeys {
		switch v := in[k].(type) {
		case string:
			add(v)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					add(s)
				}
			}
		}
	}
	if changes, ok := in["changes"].(map[string]any); ok {
		for _, p := range slices.Sorted(maps.Keys(changes)) {
			add(p)
		}
	}
	return out
}

// decision is how a permission request is answered.
type decision struct {
	option  *acp.PermissionOption // nil: cancelled (no option fits)
	refused bool                  // the answer refuses the tool call
	paths   []string              // the paths the tool call names
	outside []string              // those outside the workspace
}

// pick is the first option of the kinds, in the order given.
func pick(options []acp.PermissionOption, kinds ...acp.PermissionOptionKind) *acp.PermissionOption {
	for _, k := range kinds {
		for i := range options {
			if options[i].Kind == k {
				return &options[i]
			}
		}
	}
	return nil
}

// decide answers a permission request by a policy (allow or deny; ask is
// the approver's): allow takes the narrowest allow option (allow_once
// before allow_always) when every path the call names is inside the
// workspace, and a reject option otherwise; deny takes a reject option.
func decide(policy string, tc acp.ToolCallUpdate, options []acp.PermissionOption, inside func(string) bool) decision {
	d := decision{paths: toolPaths(tc)}
	for _, p := range d.paths {
		if !inside(p) {
			d.outside = append(d.outside, p)
		}
	}
	reject := []acp.PermissionOptionKind{acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways}
	if policy == PermissionsDeny || len(d.outside) > 0 {
		d.option, d.refused = pick(options, reject...), true
		return d
	}
	d.option = pick(options, acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways)
	return d
}

// describe is a decision as the timeline says it.
func (d decision) describe(title, policy string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[permission] %s: ", title)
	if d.option == nil {
		fmt.Fprintf(&b, "no option fits the policy (%s); cancelled", policy)
	} else {
		fmt.Fprintf(&b, "%s (%s)", d.option.Name, d.option.Kind)
	}
	switch {
	case len(d.outside) > 0:
		fmt.Fprintf(&b, ": outside the workspace: %s", strings.Join(d.outside, ", "))
	case d.refused:
		fmt.Fprintf(&b, ": the policy is %s", policy)
	}
	if len(d.paths) > 0 {
		fmt.Fprintf(&b, "; paths: %s", strings.Join(d.paths, ", "))
	}
	return b.String()
}

// insideWorkspace reports whether a path an agent names lies inside the
// workspace (as this machine sees it, or as the agent does), following
// the symbolic links of the part of it that exists: a link inside the
// workspace to a folder outside is outside.
func insideWorkspace(path string, bases []string) bool {
	if !filepath.IsAbs(path) {
		path = filepath.Join(bases[0], path)
	}
	path = filepath.Clean(path)
	for _, base := range bases {
		rel, err := filepath.Rel(base, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		// Lexically inside: the real path of what exists of it must be
		// inside the real workspace too.
		realBase, err := filepath.EvalSymlinks(base)
		if err != nil {
			return true // a workspace seen only by the agent (a container's)
		}
		real := realPrefix(filepath.Join(realBase, rel))
		r, err := filepath.Rel(realBase, real)
		return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
	}
	return false
}

// realPrefix resolves the symbolic links of the longest part of path that
// exists, and keeps the rest as it is.
func realPrefix(path string) string {
	rest := ""
	for p := path; ; p = filepath.Dir(p) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(real, rest)
		}
		if _, err := os.Lstat(p); err == nil {
			return path // a dangling link: as named
		}
		if filepath.Dir(p) == p {
			return path
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// approvalRequest is a permission request as a person is asked it.
func approvalRequest(key string, p acp.RequestPermissionRequest, paths []string) ApprovalRequest {
	tc := p.ToolCall
	req := ApprovalRequest{Key: key, ToolCallID: string(tc.ToolCallId), Title: string(tc.ToolCallId), Paths: paths}
	if tc.Title != nil {
		req.Title = *tc.Title
	}
	if tc.Kind != nil {
		req.Kind = string(*tc.Kind)
	}
	if tc.RawInput != nil {
		b, _ := json.Marshal(tc.RawInput)
		req.Arguments = string(b)
		if len(b) > maxArguments {
			req.Arguments = strings.ToValidUTF8(string(b[:maxArguments]), "") + "…"
		}
	}
	for _, o := range p.Options {
		req.Options = append(req.Options, ApprovalOption{ID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	return req
}
