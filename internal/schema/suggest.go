package schema

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"
)

// The schemas as JSON values, to find what a failed keyword allowed (the
// properties next to an additionalProperties, an enum's values) and
// suggest the closest.
var (
	rawOnce    sync.Once
	rawSchemas map[string]any // file name → decoded schema
)

// schemaAt resolves an absolute keyword location (…/webhook.json#/a/b) in
// the embedded schemas; nil when it leads nowhere.
func schemaAt(loc string) any {
	rawOnce.Do(func() {
		rawSchemas = map[string]any{}
		entries, _ := fs.ReadDir(files, "schemas")
		for _, e := range entries {
			b, _ := fs.ReadFile(files, "schemas/"+e.Name())
			var v any
			if json.Unmarshal(b, &v) == nil {
				rawSchemas[e.Name()] = v
			}
		}
	})
	file, pointer, _ := strings.Cut(strings.TrimPrefix(loc, baseURL), "#")
	v := rawSchemas[file]
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := v.(type) {
		case map[string]any:
			v = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			v = n[i]
		default:
			return nil
		}
	}
	return v
}

// allowedKeys lists the properties of the schema whose additionalProperties
// failed.
func allowedKeys(absLoc string) []string {
	parent, ok := strings.CutSuffix(absLoc, "/additionalProperties")
	if !ok {
		return nil
	}
	m, _ := schemaAt(parent).(map[string]any)
	props, _ := m["properties"].(map[string]any)
	out := make([]string, 0, len(props))
	for k := range props {
		out = append(out, k)
	}
	return out
}

// enumValues lists the string values of a failed enum.
func enumValues(absLoc string) []string {
	vals, _ := schemaAt(absLoc).([]any)
	var out []string
	for _, v := range vals {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// didYouMean is "; did you mean "x"?" for the candidate closest to what was
// written: the same ignoring case first, else at most two edits away (one
// for short words); "" when none is close.
func didYouMean(got string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if strings.EqualFold(c, got) {
			return fmt.Sprintf("; did you mean %q?", c)
		}
		limit := 2
		if len(got) <= 4 {
			limit = 1
		}
		if d := editDistance(strings.ToLower(got), strings.ToLower(c)); d <= limit && (d < bestDist || d == bestDist && c < best) {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// yamlHints explain the YAML parser's terse messages for the mistakes
// people make most.
var yamlHints = map[string]string{
	"mapping values are not allowed in this context": "a line is indented deeper than the key above it, or a value holding \": \" needs quotes",
	"did not find expected key":                      "check the indentation of this line and the ones above it: keys of one mapping line up",
	"did not find expected '-' indicator":            "the items of a list line up, each starting with \"- \"",
	"found character that cannot start any token":    "a tab? YAML indents with spaces only; or quote a value that starts with @ or `",
	"could not find expected ':'":                    "a key needs \": \" after it (a space after the colon); or a quoted value is not closed",
	"found undefined alias":                          "a *name needs an &name anchor before it",
}

func yamlHint(msg string) string {
	for k, h := range yamlHints {
		if strings.Contains(msg, k) {
			return " (" + h + ")"
		}
	}
	return ""
}

// DidYouMean is didYouMean for checks made outside this package (a name
// that names nothing, an unknown folder): "; did you mean "x"?" or "".
func DidYouMean(got string, candidates []string) string { return didYouMean(got, candidates) }
