package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
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
	if fast := fastSchema(k); fast != nil && utf8.Valid(data) && !documentMarker.Match(data) {
		if js, err := k8syaml.YAMLToJSONStrict(data); err == nil {
			if v, err := decodeJSON(js); err == nil {
				if v == nil {
					v = map[string]any{}
				}
				if fast.valid(v) {
					return v, &Document{File: file, lineOffset: lineOffset, lazy: data}, nil
				}
			}
		}
	}
	v, doc, ds := decodeYAML(file, data, lineOffset)
	if ds != nil {
		return nil, doc, ds
	}
	if v == nil {
		v = map[string]any{}
	}
	return v, doc, validate(doc, k, v)
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
	doc := &Document{File: file, lineOffset: lineOffset}
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
	js, err := k8syaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, doc, Diagnostics{syntaxDiag(doc, err)}
	}
	v, err := decodeJSON(js)
	if err != nil {
		return nil, doc, Diagnostics{doc.Diag(Error, "", fmt.Sprintf("cannot convert YAML to JSON: %v", err))}
	}
	return v, doc, nil
}

func syntaxDiag(doc *Document, err error) Diagnostic {
	line := 1
	if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
	}
	msg := err.Error()
	msg = regexp.MustCompile(`^(error converting YAML to JSON: )?yaml: (line \d+: )?`).ReplaceAllString(msg, "")
	return Diagnostic{File: doc.File, Line: line + doc.lineOffset, Column: 1,
		Message: "invalid YAML: " + msg, Severity: Error}
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
// documents whose aliases expand beyond factory.MaxYAMLNodes. Sizes are
// memoised per node, so a bomb is measured without being expanded.
func checkNodes(doc *Document, root *yaml.Node) Diagnostics {
	var ds Diagnostics
	sizes := map[*yaml.Node]int{}
	var size func(n *yaml.Node, depth int) int
	size = func(n *yaml.Node, depth int) int {
		if s, ok := sizes[n]; ok {
			return s
		}
		if depth > 200 {
			return factory.MaxYAMLNodes + 1
		}
		sizes[n] = factory.MaxYAMLNodes + 1 // a cycle counts as too large
		s := 1
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			s = size(n.Alias, depth+1)
		}
		if n.Kind == yaml.MappingNode {
			seen := map[string]bool{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				if k.Kind == yaml.ScalarNode {
					if seen[k.Value] {
						line, col := doc.at(k)
						ds = append(ds, Diagnostic{File: doc.File, Line: line, Column: col,
							Message: fmt.Sprintf("duplicate key %q", k.Value), Severity: Error})
					}
					seen[k.Value] = true
				}
			}
		}
		for _, c := range n.Content {
			s += size(c, depth+1)
			if s > factory.MaxYAMLNodes {
				break
			}
		}
		sizes[n] = s
		return s
	}
	if size(root, 0) > factory.MaxYAMLNodes {
		return append(ds, Diagnostic{File: doc.File, Line: doc.lineOffset + 1, Column: 1,
			Message: fmt.Sprintf("document too large: its aliases expand to more than %d values", factory.MaxYAMLNodes), Severity: Error})
	}
	return ds
}
