package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sdkTypes are the platform API's answers as the newest SDKs type them
// (testdata/sdk/types.json, transcribed from the SDKs' sources), and a
// check of a JSON answer against them: what the SDKs require is there,
// every value has the type and, for an enum, a value the SDKs know.
type sdkTypes struct {
	Enums map[string]struct {
		Values     []string `json:"values"`
		Extensions []string `json:"extensions"`
	} `json:"enums"`
	Types map[string]sdkType `json:"types"`
}

type sdkType struct {
	Required      map[string]string `json:"required"`
	Optional      map[string]string `json:"optional"`
	Discriminator string            `json:"discriminator"`
	Variants      map[string]string `json:"variants"`
}

func loadSDKTypes(t testing.TB) *sdkTypes {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "sdk", "types.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st sdkTypes
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("testdata/sdk/types.json: %v", err)
	}
	for name, typ := range st.Types {
		for _, expr := range append(mapValues(typ.Required), append(mapValues(typ.Optional), mapValues(typ.Variants)...)...) {
			if err := st.known(expr); err != nil {
				t.Fatalf("types.json: %s: %v", name, err)
			}
		}
	}
	return &st
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// known reports a type expression that names nothing.
func (st *sdkTypes) known(expr string) error {
	expr = strings.TrimSuffix(expr, "|null")
	switch {
	case strings.HasPrefix(expr, "[") || strings.HasPrefix(expr, "{"):
		return st.known(expr[1 : len(expr)-1])
	case strings.HasPrefix(expr, "enum:"):
		if _, ok := st.Enums[expr[5:]]; !ok {
			return fmt.Errorf("no enum %s", expr[5:])
		}
	case strings.HasPrefix(expr, "union:"):
		if st.Types[expr[6:]].Discriminator == "" {
			return fmt.Errorf("no union %s", expr[6:])
		}
	case strings.HasPrefix(expr, "const:"), slices.Contains([]string{"string", "number", "integer", "boolean", "object", "any"}, expr):
	default:
		if _, ok := st.Types[expr]; !ok {
			return fmt.Errorf("no type %s", expr)
		}
	}
	return nil
}

// check lists where v departs from the type expression, at its JSON path.
func (st *sdkTypes) check(expr string, v any, at string) []string {
	if base, ok := strings.CutSuffix(expr, "|null"); ok {
		if v == nil {
			return nil
		}
		expr = base
	}
	if v == nil && expr != "any" {
		return []string{fmt.Sprintf("%s: null, the SDKs want %s", at, expr)}
	}
	bad := func(want string) []string { return []string{fmt.Sprintf("%s: %v is not %s", at, short(v), want)} }
	switch {
	case strings.HasPrefix(expr, "["):
		list, ok := v.([]any)
		if !ok {
			return bad("a list")
		}
		var out []string
		for i, e := range list {
			out = append(out, st.check(expr[1:len(expr)-1], e, fmt.Sprintf("%s[%d]", at, i))...)
		}
		return out
	case strings.HasPrefix(expr, "{"):
		m, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		var out []string
		for k, e := range m {
			out = append(out, st.check(expr[1:len(expr)-1], e, at+"."+k)...)
		}
		return out
	case strings.HasPrefix(expr, "enum:"):
		e := st.Enums[expr[5:]]
		if s, ok := v.(string); !ok || !slices.Contains(e.Values, s) && !slices.Contains(e.Extensions, s) {
			return bad("one of " + expr[5:] + " " + strings.Join(e.Values, " "))
		}
		return nil
	case strings.HasPrefix(expr, "const:"):
		if v != expr[6:] {
			return bad(expr[6:])
		}
		return nil
	case strings.HasPrefix(expr, "union:"):
		u := st.Types[expr[6:]]
		m, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		if _, present := m[u.Discriminator]; !present {
			return []string{fmt.Sprintf("%s: lacks %s, which tells the SDKs' %s apart", at, u.Discriminator, expr[6:])}
		}
		d, _ := m[u.Discriminator].(string)
		variant, ok := u.Variants[d]
		if !ok {
			return []string{fmt.Sprintf("%s.%s: %v is not one of %s's", at, u.Discriminator, short(m[u.Discriminator]), expr[6:])}
		}
		return st.check(variant, v, at)
	}
	return st.checkScalar(expr, v, at, bad)
}

func (st *sdkTypes) checkScalar(expr string, v any, at string, bad func(string) []string) []string {
	switch expr {
	case "any":
		return nil
	case "string":
		if _, ok := v.(string); !ok {
			return bad("a string")
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return bad("a boolean")
		}
	case "number", "integer":
		n, ok := v.(float64)
		if !ok || expr == "integer" && n != float64(int64(n)) {
			return bad("a " + expr)
		}
	case "object":
		if _, ok := v.(map[string]any); !ok {
			return bad("an object")
		}
	default:
		return st.checkObject(expr, v, at, bad)
	}
	return nil
}

// checkObject checks an object of a named type: every required key, and
// the keys the type knows.
func (st *sdkTypes) checkObject(name string, v any, at string, bad func(string) []string) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return bad("an object (" + name + ")")
	}
	typ := st.Types[name]
	var out []string
	for _, k := range sortedKeys(typ.Required) {
		e, present := m[k]
		if !present {
			out = append(out, fmt.Sprintf("%s: lacks %s, which the SDKs' %s requires", at, k, name))
			continue
		}
		out = append(out, st.check(typ.Required[k], e, at+"."+k)...)
	}
	for _, k := range sortedKeys(typ.Optional) {
		if e, present := m[k]; present {
			out = append(out, st.check(typ.Optional[k], e, at+"."+k)...)
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := mapsKeysOf(m)
	slices.Sort(keys)
	return keys
}

func mapsKeysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// requiredFields walks v along the type and calls drop with each required
// key that is present (in the first element of each list), and a function
// that removes it from v and puts it back.
func (st *sdkTypes) requiredFields(expr string, v any, at string, drop func(at string, remove func() (restore func()))) {
	expr = strings.TrimSuffix(expr, "|null")
	switch {
	case v == nil:
	case strings.HasPrefix(expr, "["):
		if list, ok := v.([]any); ok && len(list) > 0 {
			st.requiredFields(expr[1:len(expr)-1], list[0], at+"[0]", drop)
		}
	case strings.HasPrefix(expr, "{"):
		if m, ok := v.(map[string]any); ok {
			for _, k := range sortedAnyKeys(m) {
				st.requiredFields(expr[1:len(expr)-1], m[k], at+"."+k, drop)
				break
			}
		}
	case strings.HasPrefix(expr, "union:"):
		u := st.Types[expr[6:]]
		if m, ok := v.(map[string]any); ok {
			d, _ := m[u.Discriminator].(string)
			if variant, ok := u.Variants[d]; ok {
				st.requiredFields(variant, v, at, drop)
			}
		}
	default:
		typ, named := st.Types[expr]
		m, ok := v.(map[string]any)
		if !named || !ok {
			return
		}
		for _, k := range sortedKeys(typ.Required) {
			if e, present := m[k]; present {
				drop(at+"."+k, func() func() {
					delete(m, k)
					return func() { m[k] = e }
				})
				st.requiredFields(typ.Required[k], e, at+"."+k, drop)
			}
		}
		for _, k := range sortedKeys(typ.Optional) {
			if e, present := m[k]; present {
				st.requiredFields(typ.Optional[k], e, at+"."+k, drop)
			}
		}
	}
}

func sortedAnyKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// conforms fails the test where an answer departs from its SDK type, and
// then shows that the check would catch each required field the server
// dropped: every one is removed in turn and must be reported.
func (st *sdkTypes) conforms(t *testing.T, typ string, body any) {
	t.Helper()
	for _, p := range st.check(typ, body, typ) {
		t.Error(p)
	}
	dropped := 0
	st.requiredFields(typ, body, typ, func(at string, remove func() func()) {
		restore := remove()
		defer restore()
		dropped++
		probs := st.check(typ, body, typ)
		field := at[strings.LastIndex(at, ".")+1:]
		if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, "lacks "+field) }) {
			t.Errorf("dropping %s went unnoticed: %v", at, probs)
		}
	})
	if dropped == 0 && len(st.Types[strings.TrimSuffix(typ, "|null")].Required) > 0 {
		t.Errorf("%s: no required field to drop", typ)
	}
}

// TestSDKTypeCheck: the check itself, on made-up answers.
func TestSDKTypeCheck(t *testing.T) {
	st := loadSDKTypes(t)
	item := map[string]any{"created_at": "t", "finished_at": nil, "prompt": "p", "root_run_id": "r", "run_id": "r", "state": "QUEUED",
		"task_id": "r", "title": "t", "updated_at": "t", "artifacts": []any{map[string]any{"artifact_type": "PULL_REQUEST", "created_at": "t",
			"data": map[string]any{"url": "u", "branch": "b", "status": "open"}}}, "status_message": map[string]any{"message": "m", "error_code": "worker_lost"}}
	probs := st.check("RunItem", item, "RunItem")
	if len(probs) != 1 || !strings.Contains(probs[0], "status_message.error_code") {
		t.Fatalf("a code the SDKs do not know: %v", probs)
	}
	item["status_message"] = map[string]any{"message": "m", "error_code": "resource_unavailable"}
	if probs := st.check("RunItem", item, "RunItem"); len(probs) != 0 {
		t.Fatalf("a valid item: %v", probs)
	}
	delete(item["artifacts"].([]any)[0].(map[string]any)["data"].(map[string]any), "status")
	if probs := st.check("RunItem", item, "RunItem"); len(probs) != 1 || !strings.Contains(probs[0], "lacks status") {
		t.Fatalf("a pull request without its status: %v", probs)
	}
	if probs := st.check("RunItem", map[string]any{"finished_at": "x"}, "RunItem"); len(probs) != 8 {
		t.Fatalf("eight required keys missing: %v", probs)
	}
}
