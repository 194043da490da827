package filter_test

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"factory/internal/filter"
)

func mustMatch(t *testing.T, f, payload string) bool {
	t.Helper()
	flt, err := filter.Compile(json.RawMessage(f))
	if err != nil {
		t.Fatal(err)
	}
	p, err := filter.DecodePayload([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return flt.Match(p)
}

func TestSemantics(t *testing.T) {
	tests := []struct {
		name, filter, payload string
		want                  bool
	}{
		{"empty filter matches all", `{}`, `{"a":1}`, true},
		{"no filter matches all", ``, `[1,2]`, true},
		{"list: equal", `{"action":["opened","reopened"]}`, `{"action":"reopened"}`, true},
		{"list: not equal", `{"action":["opened"]}`, `{"action":"closed"}`, false},
		{"strings are case-sensitive", `{"action":["opened"]}`, `{"action":"Opened"}`, false},
		{"list: missing fails", `{"action":["opened"]}`, `{}`, false},
		{"in operator", `{"n":{"in":[1,2]}}`, `{"n":2}`, true},
		{"numbers by value", `{"n":[1]}`, `{"n":1.0}`, true},
		{"numbers by value, exponent", `{"n":[100]}`, `{"n":1e2}`, true},
		{"big integers exactly", `{"id":[12345678901234567890]}`, `{"id":12345678901234567891}`, false},
		{"number is not a string", `{"n":[1]}`, `{"n":"1"}`, false},
		{"bool", `{"b":[true]}`, `{"b":true}`, true},
		{"null in list", `{"x":[null]}`, `{"x":null}`, true},
		{"objects deeply", `{"o":[{"a":[1,{"b":2}]}]}`, `{"o":{"a":[1,{"b":2.0}]}}`, true},
		{"array field: any element (in)", `{"labels":["bug"]}`, `{"labels":["ui","bug"]}`, true},
		{"array field: no element (in)", `{"labels":["bug"]}`, `{"labels":["ui"]}`, false},
		{"array field: not_in when no element", `{"labels":{"not_in":["wontfix"]}}`, `{"labels":["ui","bug"]}`, true},
		{"array field: not_in fails when one does", `{"labels":{"not_in":["bug"]}}`, `{"labels":["ui","bug"]}`, false},
		{"not_in: missing passes", `{"state":{"not_in":["closed"]}}`, `{}`, true},
		{"not_in: equal fails", `{"state":{"not_in":["closed"]}}`, `{"state":"closed"}`, false},
		{"not_in: empty list passes", `{"state":{"not_in":[]}}`, `{"state":"closed"}`, true},
		{"exists true: present", `{"x":{"exists":true}}`, `{"x":0}`, true},
		{"exists true: null is present", `{"x":{"exists":true}}`, `{"x":null}`, true},
		{"exists true: missing", `{"x":{"exists":true}}`, `{}`, false},
		{"exists false: missing", `{"x":{"exists":false}}`, `{"y":1}`, true},
		{"exists false: present", `{"x":{"exists":false}}`, `{"x":null}`, false},
		{"every operator must hold", `{"n":{"in":[1,2],"not_in":[2]}}`, `{"n":2}`, false},
		{"exists and in", `{"n":{"exists":true,"in":[1]}}`, `{"n":1}`, true},
		{"nested: match", `{"issue":{"state":["open"]}}`, `{"issue":{"state":"open","n":1}}`, true},
		{"nested: missing fails", `{"issue":{"state":{"not_in":["x"]}}}`, `{}`, false},
		{"nested: not an object fails", `{"issue":{"state":["open"]}}`, `{"issue":"open"}`, false},
		{"nested: null is not an object", `{"issue":{"x":{"exists":false}}}`, `{"issue":null}`, false},
		{"every key must match", `{"a":[1],"b":[2]}`, `{"a":1,"b":3}`, false},
		{"payload array: keys missing", `{"a":{"exists":false}}`, `[{"a":1}]`, true},
		{"payload scalar: in fails", `{"a":[1]}`, `1`, false},
		{"deep", `{"a":{"b":{"c":{"d":["x"]}}}}`, `{"a":{"b":{"c":{"d":"x"}}}}`, true},
		{"array of objects: one element matches", `{"issue":{"labels":{"name":["bug"]}}}`, `{"issue":{"labels":[{"name":"ui"},{"name":"bug"}]}}`, true},
		{"array of objects: none matches", `{"issue":{"labels":{"name":["bug"]}}}`, `{"issue":{"labels":[{"name":"ui"}]}}`, false},
		{"array of objects: every key in one element", `{"l":{"a":[1],"b":[2]}}`, `{"l":[{"a":1,"b":3},{"a":2,"b":2}]}`, false},
		{"array of objects: scalars skipped", `{"l":{"a":[1]}}`, `{"l":["a",1,{"a":1}]}`, true},
		{"array of objects: empty array fails", `{"l":{"a":{"exists":false}}}`, `{"l":[]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustMatch(t, tt.filter, tt.payload); got != tt.want {
				t.Fatalf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	f, _ := filter.Compile(json.RawMessage(`{"action":["opened"],"issue":{"labels":{"exists":true}}}`))
	p, _ := filter.DecodePayload([]byte(`{"action":"closed","issue":{"labels":[]}}`))
	got, _ := json.Marshal(f.Explain(p))
	want := `[{"path":"/action","operator":"in","expected":["opened"],"actual":"closed","actual_present":true,"passed":false},` +
		`{"path":"/issue/labels","operator":"exists","expected":true,"actual":[],"actual_present":true,"passed":true}]`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if f.Match(p) {
		t.Fatal("matched")
	}
}

// naive interprets a filter directly from its JSON, with none of the
// compiled evaluator's machinery: the fuzz target's reference.
func naive(flt, payload any) bool {
	fm, ok := flt.(map[string]any)
	if !ok {
		return true
	}
	pm, _ := payload.(map[string]any)
	for k, cond := range fm {
		v, present := pm[k]
		ok := true
		switch c := cond.(type) {
		case []any:
			ok = present && naiveAny(v, c)
		case map[string]any:
			ops := len(c) > 0
			for op := range c {
				ops = ops && (op == "in" || op == "not_in" || op == "exists")
			}
			if !ops {
				obj, isObj := v.(map[string]any)
				ok = present && isObj && naive(c, obj)
				break
			}
			if in, has := c["in"].([]any); has {
				ok = ok && present && naiveAny(v, in)
			}
			if ni, has := c["not_in"].([]any); has {
				ok = ok && !(present && naiveAny(v, ni))
			}
			if ex, has := c["exists"].(bool); has {
				ok = ok && ex == present
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func naiveAny(v any, list []any) bool {
	cands := []any{v}
	if arr, ok := v.([]any); ok {
		cands = arr
	}
	for _, x := range cands {
		for _, y := range list {
			if canon(x) == canon(y) {
				return true
			}
		}
	}
	return false
}

// canon renders a value with numbers as exact rationals and sorted keys.
func canon(v any) string {
	switch t := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(t))
		if !ok {
			return "n?" + string(t)
		}
		return "n" + r.RatString()
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		for i := range keys {
			for j := i + 1; j < len(keys); j++ {
				if keys[j] < keys[i] {
					keys[i], keys[j] = keys[j], keys[i]
				}
			}
		}
		var b strings.Builder
		b.WriteString("{")
		for _, k := range keys {
			fmt.Fprintf(&b, "%q:%s,", k, canon(t[k]))
		}
		return b.String() + "}"
	case []any:
		var b strings.Builder
		b.WriteString("[")
		for _, x := range t {
			b.WriteString(canon(x) + ",")
		}
		return b.String() + "]"
	default:
		j, _ := json.Marshal(t)
		return string(j)
	}
}

// validFilter reports whether a decoded value is a filter of the grammar
// (the schema refuses the rest before a filter is ever compiled).
func validFilter(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for _, c := range m {
		switch t := c.(type) {
		case []any:
			if len(t) == 0 {
				return false
			}
		case map[string]any:
			if len(t) == 0 {
				return false
			}
			ops, fields := 0, 0
			for k, x := range t {
				switch k {
				case "in":
					l, ok := x.([]any)
					if !ok || len(l) == 0 {
						return false
					}
					ops++
				case "not_in":
					if _, ok := x.([]any); !ok {
						return false
					}
					ops++
				case "exists":
					if _, ok := x.(bool); !ok {
						return false
					}
					ops++
				default:
					fields++
				}
			}
			if ops > 0 && fields > 0 || fields > 0 && !validFilter(t) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// FuzzAgainstNaive compares the compiled evaluator with the naive one on
// arbitrary filters and payloads.
func FuzzAgainstNaive(f *testing.F) {
	f.Add(`{"a":[1,"x",null]}`, `{"a":1.0}`)
	f.Add(`{"a":{"not_in":[2],"exists":true}}`, `{"a":[1,2]}`)
	f.Add(`{"a":{"b":{"in":[{"c":1}]}}}`, `{"a":{"b":{"c":1e0}}}`)
	f.Add(`{"x":{"exists":false}}`, `[1]`)
	f.Add(`{"n":[12345678901234567890]}`, `{"n":12345678901234567890.0}`)
	f.Fuzz(func(t *testing.T, flt, payload string) {
		fv, err := filter.DecodePayload([]byte(flt))
		if err != nil || !validFilter(fv) {
			return
		}
		pv, err := filter.DecodePayload([]byte(payload))
		if err != nil {
			return
		}
		c, err := filter.Compile(json.RawMessage(flt))
		if err != nil {
			t.Fatalf("a valid filter did not compile: %v", err)
		}
		if got, want := c.Match(pv), naive(fv, pv); got != want {
			t.Fatalf("compiled %v, naive %v, for filter %s and payload %s", got, want, flt, payload)
		}
		passed := true
		for _, r := range c.Explain(pv) {
			passed = passed && r.Passed
		}
		if passed != c.Match(pv) {
			t.Fatalf("Explain says %v, Match says %v", passed, c.Match(pv))
		}
	})
}

// A nested filter over an array of objects is explained against the
// element that matches, or else the first object, so that its failing keys
// say why none did.
func TestExplainArrayOfObjects(t *testing.T) {
	f, err := filter.Compile(json.RawMessage(`{"labels":{"name":["bug"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		payload string
		passed  bool
		actual  string
	}{
		{`{"labels":[{"name":"ui"},{"name":"bug"}]}`, true, `"bug"`},
		{`{"labels":[{"name":"ui"},{"name":"docs"}]}`, false, `"ui"`},
	} {
		p, _ := filter.DecodePayload([]byte(tt.payload))
		got := f.Explain(p)
		if len(got) != 1 || got[0].Passed != tt.passed || got[0].Path != "/labels/name" {
			t.Fatalf("%s: %+v", tt.payload, got)
		}
		if b, _ := json.Marshal(got[0].Actual); string(b) != tt.actual {
			t.Fatalf("%s: actual %s, want %s", tt.payload, b, tt.actual)
		}
	}
}
