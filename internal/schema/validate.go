package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

//go:embed schemas/*.json
var files embed.FS

// Kind names an embedded schema.
type Kind string

// The embedded schemas. Each is the reference documentation of its file
// format too: `factory schema KIND` prints it.
const (
	KindWebhook    Kind = "webhook"
	KindAutomation Kind = "automation"
	KindConfig     Kind = "config"
	KindFilter     Kind = "filter"
	KindFactory    Kind = "factory"
	KindServer     Kind = "server"
	KindAgent      Kind = "agent"
	KindRunner     Kind = "runner"
	KindScorer     Kind = "scorer"
	KindSuite      Kind = "benchmark_suite"
	KindTask       Kind = "benchmark_suite_task"
	KindCommon     Kind = "common"
)

// Kinds lists the embedded schemas in the order `factory schema` prints them.
var Kinds = []Kind{KindFactory, KindAgent, KindAutomation, KindRunner, KindScorer, KindWebhook, KindSuite, KindTask, KindCommon,
	KindConfig, KindFilter, KindServer}

// V1Alpha1 lists the nine documents of the v1alpha1 format
// (docs/spec/v1alpha1.md), as the schemas endpoint serves them.
var V1Alpha1 = []Kind{KindFactory, KindAgent, KindAutomation, KindRunner, KindScorer, KindWebhook, KindSuite, KindTask, KindCommon}

const baseURL = "https://factory.invalid/schemas/"

// Source returns the JSON text of an embedded schema.
func Source(k Kind) ([]byte, error) {
	b, err := fs.ReadFile(files, "schemas/"+string(k)+".json")
	if err != nil {
		return nil, fmt.Errorf("no schema %q (have %s)", k, kindList())
	}
	return b, nil
}

func kindList() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

var (
	compileOnce sync.Once
	compiled    map[Kind]*jsonschema.Schema
	compileErr  error
)

// compiledSchema compiles all embedded schemas once, on first use, so that
// commands that validate nothing (version, status) pay nothing for them.
func compiledSchema(k Kind) *jsonschema.Schema {
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		entries, _ := fs.ReadDir(files, "schemas")
		for _, e := range entries {
			b, _ := fs.ReadFile(files, "schemas/"+e.Name())
			if err := c.AddResource(baseURL+e.Name(), bytes.NewReader(b)); err != nil {
				compileErr = err
				return
			}
		}
		compiled = map[Kind]*jsonschema.Schema{}
		for _, k := range Kinds {
			s, err := c.Compile(baseURL + string(k) + ".json")
			if err != nil {
				compileErr = fmt.Errorf("compile schema %s: %w", k, err)
				return
			}
			compiled[k] = s
		}
	})
	if compileErr != nil {
		// The schemas are part of the binary; a broken one is a build defect
		// that the package tests catch.
		panic(compileErr)
	}
	return compiled[k]
}

// validate checks a decoded JSON value (numbers as json.Number) against a
// schema and turns every failure into a positioned diagnostic with a message
// written for the person who wrote the file.
func validate(doc *Document, k Kind, v any) Diagnostics {
	err := compiledSchema(k).Validate(v)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return Diagnostics{doc.Diag(Error, "", err.Error())}
	}
	var ds Diagnostics
	collect(doc, v, ve, &ds)
	return dedupe(ds)
}

// collect walks the error tree down to the leaves, which name the keyword
// that failed. A failed oneOf inside a payload filter is explained by the
// filter grammar checker instead, because its leaves (one per alternative)
// would only confuse.
func collect(doc *Document, root any, ve *jsonschema.ValidationError, ds *Diagnostics) {
	// A payload filter condition that is not one of the grammar's three
	// forms is explained as a whole, with what to write instead. Nested
	// filters are descended into: their own conditions explain themselves.
	if strings.HasPrefix(ve.AbsoluteKeywordLocation, baseURL+"filter.json#/$defs/condition") {
		if v := lookup(root, ve.InstanceLocation); !isNestedFilter(v) {
			*ds = append(*ds, doc.Diag(Error, ve.InstanceLocation, filterHint(v)))
			return
		}
	}
	if h, ok := hint(ve); ok {
		if strings.HasSuffix(ve.AbsoluteKeywordLocation, "/enum") {
			if got, isStr := lookup(root, ve.InstanceLocation).(string); isStr {
				h += didYouMean(got, enumValues(ve.AbsoluteKeywordLocation))
			}
		}
		*ds = append(*ds, doc.Diag(Error, ve.InstanceLocation, h))
		return
	}
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collect(doc, root, c, ds)
		}
		return
	}
	*ds = append(*ds, leaf(doc, root, ve)...)
}

var quoted = regexp.MustCompile(`'((?:[^'\\]|\\.)*)'`)

func names(msg string) []string {
	var out []string
	for _, m := range quoted.FindAllStringSubmatch(msg, -1) {
		out = append(out, m[1])
	}
	return out
}

// hints replaces the library's message for specific keywords of our schemas
// with one that says what to write. Keyed by the end of the keyword location.
var hints = map[string]string{
	"/properties/signatureScheme/enum":                       "must be one of github, pagerduty, sentry, standard_webhooks, stripe, vercel (extensions: slack, shopify, linear, gitlab, azure_devops, standard-webhooks)",
	"/else/properties/signatureScheme":                       "signatureScheme is allowed only with authMode: signature",
	"/properties/secretName/pattern":                         "must be a secret name: a letter or digit, then letters, digits, '.', '_' or '-' (at most 128)",
	"/properties/deliveryIdHeader/pattern":                   "must be an HTTP header name, such as X-Event-Id",
	"/webhookIdList/items/pattern":                           "must be a webhook UID such as wh_5f3k9x2m7q1z8c4v6b0n (factory status shows them), not a file name",
	"/properties/webhookBaseUrl/pattern":                     "must be an http(s) URL with no query or fragment, such as https://hooks.example.com",
	"/properties/skill_spec/pattern":                         "must be <owner>/<repo>:<skill-name> or <owner>/<repo>:<path>/SKILL.md",
	"/properties/environment_id/pattern":                     "must be an environment name: letters, digits, '.', '_' or '-'",
	"/properties/provider/enum":                              "must be one of webhook, schedule, github, gitlab, linear, slack, jira, teams, azure_devops, factory",
	"/$defs/trigger/allOf/0/then/required":                   "a webhook trigger needs filter: {webhook_ids: [...]}, the UIDs of the webhooks it listens to",
	"/$defs/trigger/allOf/0/then/properties/filter/required": "a webhook trigger's filter needs webhook_ids: the UIDs of the webhooks it listens to",
	"/$defs/trigger/allOf/1/then/required":                   "a schedule trigger needs schedule: {cron: ...}",
	"/else/properties/schedule":                              "schedule is allowed only with provider: schedule",
	"/properties/alias/pattern":                              "must be at most 60 letters, digits, spaces, '.', '_' or '-'",
	"/properties/projectNumber/pattern":                      "must be the project number as a quoted string of digits, such as \"123456789012\"",
	"/startingRepoRefs/items/pattern":                        "must be github.com:OWNER/REPO@<40-hex commit> or gitlab.com:GROUP/PROJECT@<40-hex commit>",
	"/$defs/name/pattern":                                    "must be a name: letters, digits, '.', '_' or '-', at most 63, starting with a letter or digit",
	"/$defs/mcpServer/oneOf":                                 "an MCP server has exactly one of command (with args, env) or url (with headers)",
	"/factories/items/properties/name/pattern":               "must be a factory name: lowercase letters, digits and '-', at most 63",
	"/properties/interval/pattern":                           "must be a duration such as 30s, 1m or 1h30m",
	"/$defs/repository/properties/owner/pattern":             "must be an owner: a GitHub user or organization, a GitLab group path (group/subgroup) or an Azure DevOps <organization>/<project>",
}

func hint(ve *jsonschema.ValidationError) (string, bool) {
	for suffix, h := range hints {
		if strings.HasSuffix(ve.KeywordLocation, suffix) || strings.HasSuffix(ve.AbsoluteKeywordLocation, suffix) {
			return h, true
		}
	}
	return "", false
}

func leaf(doc *Document, root any, ve *jsonschema.ValidationError) Diagnostics {
	loc := ve.InstanceLocation
	keyword := path.Base(ve.KeywordLocation)
	msg := ve.Message
	switch keyword {
	case "additionalProperties":
		var ds Diagnostics
		for _, n := range names(msg) {
			p := loc + "/" + escape(n)
			line, col := doc.KeyPos(p)
			ds = append(ds, Diagnostic{File: doc.File, Line: line, Column: col, Path: p,
				Message: fmt.Sprintf("unknown key %q", n) + didYouMean(n, allowedKeys(ve.AbsoluteKeywordLocation)), Severity: Error})
		}
		return ds
	case "required":
		n := names(msg)
		if len(n) == 1 {
			if strings.Contains(ve.KeywordLocation, "/then/") && n[0] == "secretName" {
				return Diagnostics{doc.Diag(Error, loc+"/signatureScheme", "secretName is required for this signatureScheme: name the managed secret that holds the provider's signing secret")}
			}
			if strings.Contains(ve.KeywordLocation, "/then/") && n[0] == "signatureScheme" {
				return Diagnostics{doc.Diag(Error, loc+"/authMode", "signatureScheme is required with authMode: signature")}
			}
			msg = fmt.Sprintf("missing required key %s", n[0])
		} else {
			msg = "missing required keys " + strings.Join(n, ", ")
		}
	case "enum":
		msg = strings.ReplaceAll(strings.TrimPrefix(msg, "value "), `"`, "")
		if got, ok := lookup(root, loc).(string); ok {
			msg += didYouMean(got, enumValues(ve.AbsoluteKeywordLocation))
		}
	case "type":
		msg = strings.Replace(strings.Replace(msg, "expected ", "must be ", 1), ", but got", ", not", 1)
	case "maxProperties", "maxItems":
		msg = "too many entries: " + msg
	}
	return Diagnostics{doc.Diag(Error, loc, msg)}
}

func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// lookup returns the value at a JSON pointer of a decoded JSON value.
func lookup(v any, pointer string) any {
	if pointer == "" {
		return v
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch t := v.(type) {
		case map[string]any:
			v = t[tok]
		case []any:
			var i int
			if _, err := fmt.Sscan(tok, &i); err != nil || i < 0 || i >= len(t) {
				return nil
			}
			v = t[i]
		default:
			return nil
		}
	}
	return v
}

func isNestedFilter(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return false
	}
	for k := range m {
		if k == "in" || k == "not_in" || k == "exists" {
			return false
		}
	}
	return true
}

// filterHint explains why a payload filter condition is not one of the three
// forms of the grammar (a list, an operator object, a nested filter).
func filterHint(v any) string {
	switch t := v.(type) {
	case []any:
		if len(t) == 0 {
			return "an empty list matches nothing: list at least one allowed value, or remove the key"
		}
		return "too many values: a list holds at most 128"
	case map[string]any:
		if len(t) == 0 {
			return "an empty object is not a condition: write a list of allowed values, an operator object (in, not_in, exists) or a nested filter"
		}
		var ops, fields []string
		for k := range t {
			if k == "in" || k == "not_in" || k == "exists" {
				ops = append(ops, k)
			} else {
				fields = append(fields, k)
			}
		}
		sort.Strings(ops)
		sort.Strings(fields)
		if len(ops) > 0 && len(fields) > 0 {
			return fmt.Sprintf("mixes operators (%s) with field names (%s): put nested fields in their own object", strings.Join(ops, ", "), strings.Join(fields, ", "))
		}
		if len(ops) > 0 {
			if in, ok := t["in"]; ok {
				if l, ok := in.([]any); !ok || len(l) == 0 {
					return "in: must be a non-empty list of allowed values"
				}
			}
			if ni, ok := t["not_in"]; ok {
				if _, ok := ni.([]any); !ok {
					return "not_in: must be a list of values"
				}
			}
			if ex, ok := t["exists"]; ok {
				if _, ok := ex.(bool); !ok {
					return "exists: must be true or false"
				}
			}
			return "invalid operator object: in and not_in take lists, exists takes true or false"
		}
		return "invalid nested filter"
	default:
		b, _ := json.Marshal(v)
		return fmt.Sprintf("a condition is a list of allowed values, not a single value: write [%s]", b)
	}
}

func dedupe(ds Diagnostics) Diagnostics {
	seen := map[string]bool{}
	out := ds[:0]
	for _, d := range ds {
		k := d.String()
		if !seen[k] {
			seen[k] = true
			out = append(out, d)
		}
	}
	return out
}
