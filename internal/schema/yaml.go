package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
	k8syaml "sigs.k8s.io/yaml"

	"factory"
)

var lineRE = regexp.MustCompile(`line (\d+)`)

// documentMarker finds "---" or "..." at the start of a line after the
// first: a second document, which sigs.k8s.io/yaml would silently ignore.
var documentMarker = regexp.MustCompile(`\n(---|\.\.\.)([ \t\r]|\n|$)`)

// parse decodes a YAML document and validates it against a schema.
//
// The common case, a valid file, takes the fast path: one parse with
// sigs.k8s.io/yaml and the fast checker; positions are parsed later, only
// if a warning asks for one. Anything else takes the slow path, which
// parses for positions and reports every problem with its line.
func parse(file string, data []byte, lineOffset int, k Kind) (any, *Document, Diagnostics) {
	// The fast path converts with sigs.k8s.io/yaml, which expands aliases
	// as it goes: only a document that defines no anchor (no '&' at all)
	// may take it. Others are measured node by node first (checkNodes), so
	// that an alias bomb is refused before anything expands it.
	if fast := fastSchema(k); fast != nil && utf8.Valid(data) && !documentMarker.Match(data) && !bytes.ContainsRune(data, '&') && !yaml11Word.Match(data) {
		if js, err := k8syaml.YAMLToJSONStrict(data); err == nil {
			if v, err := decodeJSON(js); err == nil {
				if v == nil {
					v = map[string]any{}
				}
				if fast.valid(v) {
					return v, &Document{File: file, lineOffset: lineOffset, lines: countLines(data), lazy: data}, nil
				}
			}
		}
	}
	v, doc, ds := decodeYAML(file, data, lineOffset)
	if ds.HasErrors() {
		return nil, doc, ds
	}
	if v == nil {
		v = map[string]any{}
	}
	return v, doc, append(ds, validate(doc, k, v)...)
}

func decodeJSON(js []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// decodeYAML parses one YAML document into a JSON value (numbers as
// json.Number) and a Document that maps JSON pointers back to positions.
// lineOffset is the number of lines of the file before the YAML starts.
//
// Parsing happens twice on purpose: go.yaml.in/yaml/v3 builds the node tree
// that knows positions (and lets us refuse duplicate keys and alias bombs
// with an exact position), and sigs.k8s.io/yaml does the YAML→JSON
// conversion with the same semantics as Kubernetes and Flux tooling.
func decodeYAML(file string, data []byte, lineOffset int) (any, *Document, Diagnostics) {
	doc := &Document{File: file, lineOffset: lineOffset, lines: countLines(data)}
	if !utf8.Valid(data) {
		return nil, doc, Diagnostics{{File: file, Line: lineOffset + invalidUTF8Line(data), Column: 1,
			Message: "file is not valid UTF-8", Severity: Error}}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, doc, Diagnostics{syntaxDiag(doc, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		line, _ := doc.at(&extra)
		return nil, doc, Diagnostics{{File: file, Line: line, Column: 1,
			Message: "a second YAML document: a definition file holds exactly one", Severity: Error}}
	}
	doc.root = &root
	if ds := checkNodes(doc, &root); len(ds) > 0 {
		return nil, doc, ds
	}
	warnings := yaml11Booleans(doc, &root)
	js, err := k8syaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, doc, Diagnostics{syntaxDiag(doc, err)}
	}
	v, err := decodeJSON(js)
	if err != nil {
		return nil, doc, Diagnostics{doc.Diag(Error, "", fmt.Sprintf("cannot convert YAML to JSON: %v", err))}
	}
	return v, doc, warnings
}

func syntaxDiag(doc *Document, err error) Diagnostic {
	line := 1
	if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
	}
	msg := err.Error()
	msg = regexp.MustCompile(`^(error converting YAML to JSON: )?yaml: (line \d+: )?`).ReplaceAllString(msg, "")
	return Diagnostic{File: doc.File, Line: line + doc.lineOffset, Column: 1,
		Message: "invalid YAML: " + msg + yamlHint(msg), Severity: Error}
}

func invalidUTF8Line(b []byte) int {
	line := 1
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			return line
		}
		if r == '\n' {
			line++
		}
		b = b[size:]
	}
	return line
}

// checkNodes refuses duplicate mapping keys (pointing at the second one) and
// documents whose aliases expand beyond factory.MaxYAMLNodes values or
// maxExpandedBytes bytes (pointing at the alias that takes it over). Sizes
// are memoised per node, so a bomb is measured without being expanded.
func checkNodes(doc *Document, root *yaml.Node) Diagnostics {
	m := &nodeMeter{doc: doc, sizes: map[*yaml.Node]nodeSize{}}
	total := m.size(root, 0)
	switch {
	case m.culprit != nil:
		line, col := doc.at(m.culprit)
		return append(m.ds, Diagnostic{File: doc.File, Line: line, Column: col,
			Message: fmt.Sprintf("document too large: with alias *%s it expands to more than %d bytes", m.culprit.Value, maxExpandedBytes), Severity: Error})
	case total.bytes > maxExpandedBytes:
		return append(m.ds, Diagnostic{File: doc.File, Line: doc.lineOffset + 1, Column: 1,
			Message: fmt.Sprintf("document too large: it expands to more than %d bytes", maxExpandedBytes), Severity: Error})
	case total.nodes > factory.MaxYAMLNodes:
		return append(m.ds, Diagnostic{File: doc.File, Line: doc.lineOffset + 1, Column: 1,
			Message: fmt.Sprintf("document too large: its aliases expand to more than %d values", factory.MaxYAMLNodes), Severity: Error})
	}
	return m.ds
}

// maxExpandedBytes bounds a document after alias expansion, in bytes: the
// node limit counts values, and 100 aliases of one 100 KB string are few
// values but 10 MB. A document without aliases is at most its file's size.
const maxExpandedBytes = 4 * factory.MaxDefinitionFileBytes

// nodeSize is a node's size once its aliases are expanded.
type nodeSize struct {
	nodes int
	bytes int64
}

func (s nodeSize) over() bool { return s.nodes > factory.MaxYAMLNodes || s.bytes > maxExpandedBytes }

// nodeMeter measures nodes, reporting duplicate keys on the way and the
// first alias that takes its container over the byte limit.
type nodeMeter struct {
	doc     *Document
	sizes   map[*yaml.Node]nodeSize
	ds      Diagnostics
	culprit *yaml.Node
}

var tooLarge = nodeSize{nodes: factory.MaxYAMLNodes + 1, bytes: maxExpandedBytes + 1}

func (m *nodeMeter) size(n *yaml.Node, depth int) nodeSize {
	if s, ok := m.sizes[n]; ok {
		return s
	}
	if depth > 200 {
		return tooLarge
	}
	m.sizes[n] = tooLarge // a cycle counts as too large
	s := nodeSize{nodes: 1, bytes: int64(len(n.Value)) + 1}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		s = m.size(n.Alias, depth+1)
	}
	if n.Kind == yaml.MappingNode {
		m.duplicateKeys(n)
	}
	for _, c := range n.Content {
		cs := m.size(c, depth+1)
		s.nodes += cs.nodes
		s.bytes += cs.bytes
		if s.bytes > maxExpandedBytes && c.Kind == yaml.AliasNode && m.culprit == nil {
			m.culprit = c // the alias that takes its container over
		}
		if s.over() {
			break
		}
	}
	m.sizes[n] = s
	return s
}

func (m *nodeMeter) duplicateKeys(n *yaml.Node) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode {
			continue
		}
		if seen[k.Value] {
			line, col := m.doc.at(k)
			m.ds = append(m.ds, Diagnostic{File: m.doc.File, Line: line, Column: col,
				Message: fmt.Sprintf("duplicate key %q", k.Value), Severity: Error})
		}
		seen[k.Value] = true
	}
}

// yaml11Word finds a word YAML 1.1 reads as a boolean, written plain where
// a list item or a value could stand: such a document leaves the fast path
// for the one that warns about it.
var yaml11Word = regexp.MustCompile(`(?im)(?:^|[\s\[,])(?:on|off|yes|no|y|n)\s*(?:$|[,\]#])`)

// yaml11Booleans warns about plain on, off, yes, no, y and n in lists:
// YAML 1.1, which Kubernetes tools and this service follow, reads them as
// booleans, so `action: [on]` is [true], not the word.
func yaml11Booleans(doc *Document, root *yaml.Node) Diagnostics {
	var ds Diagnostics
	var walk func(n *yaml.Node, inList bool)
	walk = func(n *yaml.Node, inList bool) {
		switch n.Kind {
		case yaml.ScalarNode:
			if inList && n.Style == 0 && isYAML11Bool(n.Value) {
				line, col := doc.at(n)
				ds = append(ds, Diagnostic{File: doc.File, Line: line, Column: col, Severity: Warning,
					Message: fmt.Sprintf("%s is read as the boolean %t (YAML 1.1): write \"%s\" if you mean the word", n.Value, isYAML11True(n.Value), n.Value)})
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, true)
			}
		default:
			for _, c := range n.Content {
				walk(c, false)
			}
		}
	}
	walk(root, false)
	return ds
}

func isYAML11Bool(s string) bool {
	switch strings.ToLower(s) {
	case "on", "off", "yes", "no", "y", "n":
		return true
	}
	return false
}

func isYAML11True(s string) bool {
	switch strings.ToLower(s) {
	case "on", "yes", "y":
		return true
	}
	return false
}
