package filter

import (
	"encoding/json"

	"factory"
)

// Explain evaluates every condition and reports each, leaf by leaf, in key
// order. The payload matches when every result passed.
func (f *Filter) Explain(payload any) []factory.KeyResult {
	out := []factory.KeyResult{}
	if f == nil {
		return out
	}
	m, _ := payload.(map[string]any)
	for i := range f.conds {
		c := &f.conds[i]
		v, present := m[c.key]
		if c.nested != nil {
			obj := explained(c.nested, v)
			if !present || obj == nil {
				r := factory.KeyResult{Path: c.path, Operator: "object", Expected: "an object (or an array with an object) matching the nested filter", ActualPresent: present}
				if present {
					r.Actual = v
				}
				out = append(out, r)
				continue
			}
			out = append(out, c.nested.Explain(obj)...)
			continue
		}
		base := factory.KeyResult{Path: c.path, ActualPresent: present}
		if present {
			base.Actual = v
		}
		if c.exists != nil {
			r := base
			r.Operator, r.Expected, r.Passed = OpExists, *c.exists, *c.exists == present
			out = append(out, r)
		}
		if c.hasIn {
			r := base
			r.Operator, r.Expected, r.Passed = OpIn, raw(c.in), present && anyEqual(v, c.in)
			out = append(out, r)
		}
		if c.hasNot {
			r := base
			r.Operator, r.Expected, r.Passed = OpNotIn, raw(c.notIn), !(present && anyEqual(v, c.notIn))
			out = append(out, r)
		}
	}
	return out
}

// explained picks the object a nested filter is explained against: the
// object itself, or of an array the first element that matches, else its
// first object (whose failing keys then say why none matched); nil when
// there is none.
func explained(f *Filter, v any) map[string]any {
	switch x := v.(type) {
	case map[string]any:
		return x
	case []any:
		var first map[string]any
		for _, e := range x {
			if obj, ok := e.(map[string]any); ok {
				if f.Match(obj) {
					return obj
				}
				if first == nil {
					first = obj
				}
			}
		}
		return first
	}
	return nil
}

func raw(vals []value) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		if n, ok := v.v.(json.Number); ok {
			out[i] = json.RawMessage(n)
			continue
		}
		out[i] = v.v
	}
	return out
}
