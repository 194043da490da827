package schema

import (
	"strconv"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
)

// Document is a parsed YAML document that knows where each key and value
// starts in its file. It is kept beside the decoded definition so that checks
// made later (plan, references) can still point at a line.
type Document struct {
	File       string
	root       *yaml.Node
	lineOffset int // lines of the file before the YAML text (front matter)
	lines      int // lines of the YAML text

	// A document that passed validation is parsed for positions only when
	// one is asked for (a warning): most never are.
	lazy []byte
	once sync.Once
}

func (d *Document) ensure() {
	d.once.Do(func() {
		if d.root == nil && d.lazy != nil {
			var root yaml.Node
			if yaml.Unmarshal(d.lazy, &root) == nil {
				d.root = &root
			}
			d.lazy = nil
		}
	})
}

// Pos returns the line and column (1-based) where the value at the JSON
// pointer starts. When the pointer leads nowhere (a missing key), it returns
// the position of the deepest value that exists on the way.
func (d *Document) Pos(pointer string) (line, col int) {
	n, _ := d.walk(pointer)
	return d.at(n)
}

// KeyPos is Pos for the key of a mapping entry rather than its value; it
// points at "foo" in "foo: bar". For a sequence item it is Pos.
func (d *Document) KeyPos(pointer string) (line, col int) {
	_, key := d.walk(pointer)
	if key != nil {
		return d.at(key)
	}
	return d.Pos(pointer)
}

// Diag builds a diagnostic positioned at the value the pointer names.
func (d *Document) Diag(sev Severity, pointer, msg string) Diagnostic {
	line, col := d.Pos(pointer)
	return Diagnostic{File: d.File, Line: line, Column: col, Path: pointer, Message: msg, Severity: sev}
}

func (d *Document) at(n *yaml.Node) (int, int) {
	if n == nil || n.Line == 0 {
		return d.lineOffset + 1, 1
	}
	if d.lines > 0 && n.Line > d.lines {
		// The parser places the implicit value of a document that ends
		// right after "---" on the line after it, which the file lacks.
		return d.lineOffset + d.lines, 1
	}
	return n.Line + d.lineOffset, n.Column
}

// countLines counts lines as the YAML parser does: \n, \r\n and a lone
// \r each end one.
func countLines(b []byte) int {
	n := 1
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\n':
			n++
		case '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				i++
			}
			n++
		}
	}
	return n
}

// walk follows a JSON pointer and returns the deepest node reached and, when
// the last step was a mapping key, that key's node.
func (d *Document) walk(pointer string) (node, key *yaml.Node) {
	d.ensure()
	n := d.root
	if n == nil {
		return nil, nil
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if pointer == "" || pointer == "/" {
		return n, nil
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		n = resolve(n)
		var next, k *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == tok {
					k, next = n.Content[i], n.Content[i+1]
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		}
		if next == nil {
			return n, nil
		}
		n, key = next, k
	}
	return n, key
}

func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 64; i++ {
		n = n.Alias
	}
	return n
}

// ParseDocument parses YAML into a Document for position lookups alone.
func ParseDocument(file string, data []byte) (*Document, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	return &Document{File: file, root: &root, lines: countLines(data)}, nil
}

// Has reports whether the mapping key a pointer ends with is in the
// document.
func (d *Document) Has(pointer string) bool {
	_, key := d.walk(pointer)
	return key != nil && key.Value == pointer[strings.LastIndex(pointer, "/")+1:]
}
