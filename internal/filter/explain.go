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
			obj, isObj := v.(map[string]any)
			if !present || !isObj {
				r := factory.KeyResult{Path: c.path, Operator: "object", Expected: "an object matching the nested filter", ActualPresent: present}
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
