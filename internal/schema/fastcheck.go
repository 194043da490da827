package schema

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/big"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"factory/internal/filter"
)

// The fast checker answers one question, "is this document valid against
// the schema?", without building error values. It is compiled from the very
// same embedded schema documents as the full validator, so the schemas stay
// the single source of truth; only documents it rejects go through the full
// validator, which explains what is wrong and where. Definition files are
// valid far more often than not, and the full validator allocates for every
// keyword it visits, so this keeps a large factory's dry-run fast.
//
// It supports the keywords our schemas use. A schema with any other keyword
// does not compile here, and its documents always take the full path. The
// differential fuzz target FuzzFastCheckAgrees holds the two to the same
// answers.

type fastNode struct {
	never bool // the false schema
	types []string

	enum     []any
	hasConst bool
	constVal any

	props         map[string]*fastNode
	additional    *fastNode
	noAdditional  bool
	required      []string
	propertyNames *fastNode
	minProps      int
	maxProps      int

	items       *fastNode
	minItems    int
	maxItems    int
	uniqueItems bool

	minLength int
	maxLength int
	pattern   *regexp.Regexp

	minimum, maximum *big.Rat

	ifNode, thenNode, elseNode *fastNode
	allOf, anyOf, oneOf        []*fastNode
	not                        *fastNode
	ref                        string
	refNode                    *fastNode
}

// annotations carry no assertion; every other keyword must be understood.
var annotations = map[string]bool{"$schema": true, "$id": true, "$defs": true, "title": true,
	"description": true, "default": true, "examples": true, "$comment": true}

type fastCompiler struct {
	docs  map[string]any       // file name → schema document
	nodes map[string]*fastNode // "file#pointer" → compiled node
}

var (
	fastOnce  sync.Once
	fastRoots map[Kind]*fastNode
)

// fastSchema returns the compiled fast checker of a kind, or nil when the
// schema uses a keyword the fast checker does not know.
func fastSchema(k Kind) *fastNode {
	fastOnce.Do(func() {
		c := &fastCompiler{docs: map[string]any{}, nodes: map[string]*fastNode{}}
		entries, _ := fs.ReadDir(files, "schemas")
		for _, e := range entries {
			b, _ := fs.ReadFile(files, "schemas/"+e.Name())
			// Numbers as json.Number, like the documents checked against it,
			// so that one JSON equality serves both.
			if v, err := decodeJSON(b); err == nil {
				c.docs[e.Name()] = v
			}
		}
		fastRoots = map[Kind]*fastNode{}
		for _, kind := range Kinds {
			if n, err := c.resolve(string(kind)+".json", ""); err == nil && c.link() == nil {
				fastRoots[kind] = n
			}
		}
	})
	return fastRoots[k]
}

func (c *fastCompiler) resolve(file, pointer string) (*fastNode, error) {
	key := file + "#" + pointer
	if n, ok := c.nodes[key]; ok {
		return n, nil
	}
	v, ok := c.docs[file]
	if !ok {
		return nil, fmt.Errorf("no schema %s", file)
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if tok == "" {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("bad pointer %s", key)
		}
		v = m[tok]
	}
	n := &fastNode{}
	c.nodes[key] = n // before compiling, so recursive references terminate
	return n, c.compile(n, file, pointer, v)
}

// link resolves $ref targets after every node exists.
func (c *fastCompiler) link() error {
	for key, n := range c.nodes {
		if n.ref == "" || n.refNode != nil {
			continue
		}
		file := key[:strings.Index(key, "#")]
		target, ptr, _ := strings.Cut(n.ref, "#")
		if target != "" {
			file = target
		}
		r, err := c.resolve(file, ptr)
		if err != nil {
			return err
		}
		n.refNode = r
		return c.link() // resolve may have added nodes
	}
	return nil
}

func (c *fastCompiler) compile(n *fastNode, file, ptr string, v any) error {
	switch t := v.(type) {
	case bool:
		n.never = !t
		return nil
	case map[string]any:
		n.minProps, n.maxProps, n.minItems, n.maxItems, n.minLength, n.maxLength = -1, -1, -1, -1, -1, -1
		sub := func(name string, val any) (*fastNode, error) {
			return c.resolveInline(file, ptr+"/"+name, val)
		}
		var err error
		for key, val := range t {
			if annotations[key] {
				continue
			}
			switch key {
			case "type":
				switch tv := val.(type) {
				case string:
					n.types = []string{tv}
				case []any:
					for _, x := range tv {
						n.types = append(n.types, fmt.Sprint(x))
					}
				}
			case "enum":
				n.enum, _ = val.([]any)
			case "const":
				n.hasConst, n.constVal = true, val
			case "properties":
				n.props = map[string]*fastNode{}
				for p, pv := range val.(map[string]any) {
					if n.props[p], err = c.resolveInline(file, ptr+"/properties/"+escape(p), pv); err != nil {
						return err
					}
				}
			case "additionalProperties":
				if b, ok := val.(bool); ok {
					n.noAdditional = !b
				} else if n.additional, err = sub(key, val); err != nil {
					return err
				}
			case "required":
				for _, r := range val.([]any) {
					n.required = append(n.required, r.(string))
				}
			case "propertyNames":
				n.propertyNames, err = sub(key, val)
			case "minProperties":
				n.minProps = intOf(val)
			case "maxProperties":
				n.maxProps = intOf(val)
			case "items":
				n.items, err = sub(key, val)
			case "minItems":
				n.minItems = intOf(val)
			case "maxItems":
				n.maxItems = intOf(val)
			case "uniqueItems":
				n.uniqueItems, _ = val.(bool)
			case "minLength":
				n.minLength = intOf(val)
			case "maxLength":
				n.maxLength = intOf(val)
			case "pattern":
				n.pattern, err = regexp.Compile(val.(string))
			case "minimum":
				n.minimum, _ = new(big.Rat).SetString(fmt.Sprint(val))
			case "maximum":
				n.maximum, _ = new(big.Rat).SetString(fmt.Sprint(val))
			case "if":
				n.ifNode, err = sub(key, val)
			case "then":
				n.thenNode, err = sub(key, val)
			case "else":
				n.elseNode, err = sub(key, val)
			case "not":
				n.not, err = sub(key, val)
			case "allOf", "anyOf", "oneOf":
				var list []*fastNode
				for i, x := range val.([]any) {
					xn, err := c.resolveInline(file, fmt.Sprintf("%s/%s/%d", ptr, key, i), x)
					if err != nil {
						return err
					}
					list = append(list, xn)
				}
				switch key {
				case "allOf":
					n.allOf = list
				case "anyOf":
					n.anyOf = list
				default:
					n.oneOf = list
				}
			case "$ref":
				n.ref = val.(string)
			default:
				return fmt.Errorf("keyword %s is not supported by the fast checker", key)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("schema at %s#%s is not an object", file, ptr)
}

// resolveInline compiles a subschema that sits at a location of the file.
func (c *fastCompiler) resolveInline(file, ptr string, v any) (*fastNode, error) {
	key := file + "#" + ptr
	if n, ok := c.nodes[key]; ok {
		return n, nil
	}
	n := &fastNode{}
	c.nodes[key] = n
	return n, c.compile(n, file, ptr, v)
}

func intOf(v any) int {
	n, _ := v.(json.Number)
	i, _ := n.Int64()
	return int(i)
}

// valid reports whether v (decoded with json.Number) satisfies the node.
func (n *fastNode) valid(v any) bool {
	if n.never {
		return false
	}
	if n.refNode != nil && !n.refNode.valid(v) {
		return false
	}
	if len(n.types) > 0 && !typeMatches(n.types, v) {
		return false
	}
	if n.enum != nil {
		found := false
		for _, e := range n.enum {
			if jsonEqualValues(e, v) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if n.hasConst && !jsonEqualValues(n.constVal, v) {
		return false
	}
	switch t := v.(type) {
	case map[string]any:
		if n.minProps >= 0 && len(t) < n.minProps || n.maxProps >= 0 && len(t) > n.maxProps {
			return false
		}
		for _, r := range n.required {
			if _, ok := t[r]; !ok {
				return false
			}
		}
		for k, val := range t {
			if n.propertyNames != nil && !n.propertyNames.valid(k) {
				return false
			}
			if p, ok := n.props[k]; ok {
				if !p.valid(val) {
					return false
				}
				continue
			}
			if n.noAdditional || n.additional != nil && !n.additional.valid(val) {
				return false
			}
		}
	case []any:
		if n.minItems >= 0 && len(t) < n.minItems || n.maxItems >= 0 && len(t) > n.maxItems {
			return false
		}
		if n.items != nil {
			for _, x := range t {
				if !n.items.valid(x) {
					return false
				}
			}
		}
		if n.uniqueItems {
			for i := range t {
				for j := 0; j < i; j++ {
					if jsonEqualValues(t[i], t[j]) {
						return false
					}
				}
			}
		}
	case string:
		if n.minLength >= 0 || n.maxLength >= 0 {
			l := utf8.RuneCountInString(t)
			if n.minLength >= 0 && l < n.minLength || n.maxLength >= 0 && l > n.maxLength {
				return false
			}
		}
		if n.pattern != nil && !n.pattern.MatchString(t) {
			return false
		}
	case json.Number:
		if n.minimum != nil || n.maximum != nil {
			r, ok := new(big.Rat).SetString(string(t))
			if !ok || n.minimum != nil && r.Cmp(n.minimum) < 0 || n.maximum != nil && r.Cmp(n.maximum) > 0 {
				return false
			}
		}
	}
	if n.ifNode != nil {
		if n.ifNode.valid(v) {
			if n.thenNode != nil && !n.thenNode.valid(v) {
				return false
			}
		} else if n.elseNode != nil && !n.elseNode.valid(v) {
			return false
		}
	}
	for _, s := range n.allOf {
		if !s.valid(v) {
			return false
		}
	}
	if n.anyOf != nil {
		ok := false
		for _, s := range n.anyOf {
			if s.valid(v) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if n.oneOf != nil {
		count := 0
		for _, s := range n.oneOf {
			if s.valid(v) {
				count++
			}
		}
		if count != 1 {
			return false
		}
	}
	if n.not != nil && n.not.valid(v) {
		return false
	}
	return true
}

func typeMatches(types []string, v any) bool {
	for _, t := range types {
		switch x := v.(type) {
		case map[string]any:
			if t == "object" {
				return true
			}
		case []any:
			if t == "array" {
				return true
			}
		case string:
			if t == "string" {
				return true
			}
		case bool:
			if t == "boolean" {
				return true
			}
		case nil:
			if t == "null" {
				return true
			}
		case json.Number:
			if t == "number" {
				return true
			}
			if t == "integer" {
				if r, ok := new(big.Rat).SetString(string(x)); ok && r.IsInt() {
					return true
				}
			}
		}
	}
	return false
}

// jsonEqualValues is JSON equality (numbers by value), as filters use it.
func jsonEqualValues(a, b any) bool { return filter.Equal(a, b) }
