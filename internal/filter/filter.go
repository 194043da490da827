// Package filter evaluates payload filters (docs/spec/filters.md): a JSON object that
// mirrors the payload, where each key's value is a list of allowed values
// (in), an operator object (in, not_in, exists), or a nested filter. Every
// key must match. Filters are compiled once per applied revision and then
// evaluated against each delivery without allocating.
package filter

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// Filter is a compiled payload filter. The zero Filter (and nil) matches
// every payload.
type Filter struct {
	conds []cond
}

// Operators of a condition.
const (
	OpIn     = "in"
	OpNotIn  = "not_in"
	OpExists = "exists"
)

type cond struct {
	key    string
	path   string  // JSON pointer, for explanations
	in     []value // nil: no in
	notIn  []value // nil: no not_in
	hasIn  bool
	hasNot bool
	exists *bool
	nested *Filter // a nested filter instead of operators
}

// value is an expected value, with its number prepared for comparison.
type value struct {
	v   any
	num *big.Rat // for numbers
}

// Compile compiles a filter from its JSON text (as the schema validated it).
// An empty or absent filter matches everything.
func Compile(raw json.RawMessage) (*Filter, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return &Filter{}, nil
	}
	v, err := decode(raw)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a payload filter is an object")
	}
	return compile(m, "")
}

func decode(b []byte) (any, error) {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func compile(m map[string]any, prefix string) (*Filter, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	f := &Filter{}
	for _, k := range keys {
		c := cond{key: k, path: prefix + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")}
		switch t := m[k].(type) {
		case []any:
			c.hasIn, c.in = true, values(t)
		case map[string]any:
			if isOperators(t) {
				if in, ok := t[OpIn].([]any); ok {
					c.hasIn, c.in = true, values(in)
				}
				if ni, ok := t[OpNotIn].([]any); ok {
					c.hasNot, c.notIn = true, values(ni)
				}
				if ex, ok := t[OpExists].(bool); ok {
					c.exists = &ex
				}
			} else {
				n, err := compile(t, c.path)
				if err != nil {
					return nil, err
				}
				c.nested = n
			}
		default:
			return nil, fmt.Errorf("%s: a condition is a list, an operator object or a nested filter", c.path)
		}
		f.conds = append(f.conds, c)
	}
	return f, nil
}

func isOperators(m map[string]any) bool {
	for k := range m {
		if k != OpIn && k != OpNotIn && k != OpExists {
			return false
		}
	}
	return len(m) > 0
}

func values(list []any) []value {
	out := make([]value, len(list))
	for i, v := range list {
		out[i] = value{v: v}
		if n, ok := v.(json.Number); ok {
			out[i].num, _ = new(big.Rat).SetString(string(n))
		}
	}
	return out
}

// Match reports whether a payload (decoded with json.Number) matches. A
// payload that is not an object has every key missing.
func (f *Filter) Match(payload any) bool {
	if f == nil {
		return true
	}
	m, _ := payload.(map[string]any)
	for i := range f.conds {
		c := &f.conds[i]
		v, present := m[c.key]
		if !c.match(v, present) {
			return false
		}
	}
	return true
}

func (c *cond) match(v any, present bool) bool {
	if c.nested != nil {
		return present && c.nested.matchObjects(v)
	}
	if c.exists != nil && *c.exists != present {
		return false
	}
	if c.hasIn && !(present && anyEqual(v, c.in)) {
		return false
	}
	if c.hasNot && present && anyEqual(v, c.notIn) {
		return false
	}
	return true
}

// matchObjects matches a nested filter against an object, or against an
// array of objects, where any element that matches is enough
// (docs/spec/v1alpha1.md: issue.labels: {name: [bug]}).
func (f *Filter) matchObjects(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return f.Match(x)
	case []any:
		for _, e := range x {
			if obj, ok := e.(map[string]any); ok && f.Match(obj) {
				return true
			}
		}
	}
	return false
}

// anyEqual: the field equals one of the values; a field holding an array
// matches when any of its elements does.
func anyEqual(field any, vals []value) bool {
	if arr, ok := field.([]any); ok {
		for _, e := range arr {
			if oneOf(e, vals) {
				return true
			}
		}
		return false
	}
	return oneOf(field, vals)
}

func oneOf(x any, vals []value) bool {
	for i := range vals {
		if equalValue(x, &vals[i]) {
			return true
		}
	}
	return false
}

func equalValue(x any, v *value) bool {
	if v.num != nil {
		n, ok := x.(json.Number)
		if !ok {
			return false
		}
		if string(n) == v.v.(json.Number).String() {
			return true
		}
		return numberEqual(string(n), v.num)
	}
	return Equal(x, v.v)
}

// numberEqual compares by value: 1 equals 1.0 and 1e0.
func numberEqual(s string, r *big.Rat) bool {
	if f, err := strconv.ParseFloat(s, 64); err == nil && len(s) < 16 {
		if rf, exact := r.Float64(); exact {
			return f == rf
		}
	}
	x, ok := new(big.Rat).SetString(s)
	return ok && x.Cmp(r) == 0
}

// Equal is JSON equality: numbers by value, strings exactly, objects and
// arrays deeply, null equals null.
func Equal(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		r, ok := new(big.Rat).SetString(string(y))
		return ok && numberEqual(string(x), r)
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !Equal(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// DecodePayload decodes a delivery body for Match (numbers kept exact).
func DecodePayload(body []byte) (any, error) { return decode(body) }
