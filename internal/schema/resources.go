package schema

import (
	"encoding/json"
	"strings"
)

// Resource is a parsed definition of the v1alpha1 kinds that the domain
// keeps as documents (agents, runners, scorers, benchmark suites and their
// tasks, skills): its validated value, the text after its front matter,
// and where it was read from, so that checks across files can point at a
// line.
type Resource struct {
	Key   string
	Value map[string]any
	Body  string
	Doc   *Document
}

// Spec is the resource's value as canonical JSON (sorted keys): the same
// meaning always gives the same bytes, which the plan compares.
func (r *Resource) Spec() json.RawMessage { return canonical(r.Value) }

// Str returns a string key of the value, "" when absent.
func (r *Resource) Str(k string) string { return str(r.Value, k) }

// ParseResource decodes and validates one file against the schema of its
// kind. With frontMatter, the file is YAML front matter between "---"
// lines and then a body (a prompt), which must not be empty when
// needBody is set.
func ParseResource(k Kind, file, key string, data []byte, frontMatter, needBody bool) (*Resource, Diagnostics) {
	yamlText, lineOffset := data, 0
	var body []byte
	bodyLine := 1
	if frontMatter {
		front, frontLine, b, bl, err := SplitFrontMatter(data)
		if err != nil {
			return nil, Diagnostics{{File: file, Line: 1, Column: 1, Message: err.Error(), Severity: Error}}
		}
		yamlText, lineOffset, body, bodyLine = front, frontLine-1, b, bl
	}
	v, doc, ds := parse(file, yamlText, lineOffset, k)
	if needBody && strings.TrimSpace(string(body)) == "" {
		ds = append(ds, Diagnostic{File: file, Line: bodyLine, Column: 1,
			Message: "the prompt is empty: write it after the closing \"---\" line", Severity: Error})
	}
	if ds.HasErrors() {
		return nil, ds
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, Diagnostics{doc.Diag(Error, "", "expected a mapping of keys")}
	}
	return &Resource{Key: key, Value: m, Body: strings.TrimLeft(string(body), "\r\n"), Doc: doc}, ds
}

// ParseSkill reads a SKILL.md: optional YAML front matter (the Agent
// Skills format's name and description, and whatever else a skill's
// author adds, which the agent reads and this server does not), then the
// skill's text. A front matter name that differs from the folder's is an
// error: agents find a skill by its folder.
func ParseSkill(file, key string, data []byte) (*Resource, Diagnostics) {
	r := &Resource{Key: key, Value: map[string]any{}, Body: string(data), Doc: &Document{File: file}}
	if !strings.HasPrefix(string(data), "---") {
		return r, Diagnostics{{File: file, Line: 1, Column: 1, Severity: Warning,
			Message: "a skill usually starts with front matter naming it and saying when to use it (name, description)"}}
	}
	front, frontLine, _, _, err := SplitFrontMatter(data)
	if err != nil {
		return nil, Diagnostics{{File: file, Line: 1, Column: 1, Message: err.Error(), Severity: Error}}
	}
	v, doc, ds := decodeYAML(file, front, frontLine-1)
	if ds.HasErrors() {
		return nil, ds
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, Diagnostics{doc.Diag(Error, "", "the front matter must be a mapping of keys (name, description)")}
	}
	r.Doc = doc
	name, _ := m["name"].(string)
	leaf := key[strings.LastIndex(key, "/")+1:]
	if _, has := m["name"]; has && name != leaf {
		ds = append(ds, doc.Diag(Error, "/name", "the skill's name must be its folder's name, "+leaf))
	}
	if d, _ := m["description"].(string); strings.TrimSpace(d) == "" {
		ds = append(ds, doc.Diag(Warning, "", "a skill needs a description: agents read it to decide when to use the skill"))
	}
	if ds.HasErrors() {
		return nil, ds
	}
	r.Value = map[string]any{"name": leaf, "description": m["description"]}
	return r, ds
}

// DocFile is the file the resource was read from.
func (r *Resource) DocFile() string {
	if r.Doc == nil {
		return ""
	}
	return r.Doc.File
}
