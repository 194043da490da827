package schema

import (
	"encoding/json"
	"fmt"
	"strings"

	"factory"
)

// Webhook is the definition of webhooks/<key>.yaml with defaults applied,
// and where it was read from.
type Webhook struct {
	factory.WebhookSpec
	Key string    `json:"-"` // the file's <name>: the webhook's identity
	Doc *Document `json:"-"`
}

// Automation is the definition of automations/<key>.md with defaults
// applied, and where it was read from.
type Automation struct {
	factory.AutomationSpec
	Key string    `json:"-"`
	Doc *Document `json:"-"`
}

// Trigger, TriggerFilter and FactoryFile are the domain's: the definition
// files say them as the store keeps them.
type (
	Trigger       = factory.Trigger
	TriggerFilter = factory.TriggerFilter
	FactoryFile   = factory.Settings
)

// ParseWebhook decodes and validates webhooks/<key>.yaml.
func ParseWebhook(file, key string, data []byte) (*Webhook, Diagnostics) {
	v, doc, ds := parse(file, data, 0, KindWebhook)
	if ds.HasErrors() {
		return nil, ds
	}
	w := webhookFrom(v.(map[string]any))
	w.Key, w.Doc = key, doc
	if h := w.DeliveryIDHeader; h != "" && factory.CredentialHeader(h) {
		return nil, append(ds, doc.Diag(Error, "/deliveryIdHeader", fmt.Sprintf(
			"%s carries a credential: a delivery's identity is kept and shown, so it must not be a credential header (Authorization, Proxy-Authorization, Cookie, or a signature header)", h)))
	}
	if w.Name == "" {
		w.Name = key
	}
	if w.AuthMode == "" {
		w.AuthMode = factory.AuthToken
	}
	return &w, ds // warnings, if any
}

// ParseAutomation decodes and validates automations/<key>.md: YAML front
// matter between "---" lines, then the prompt.
func ParseAutomation(file, key string, data []byte) (*Automation, Diagnostics) {
	front, frontLine, body, bodyLine, err := SplitFrontMatter(data)
	if err != nil {
		return nil, Diagnostics{{File: file, Line: 1, Column: 1, Message: err.Error(), Severity: Error}}
	}
	v, doc, ds := parse(file, front, frontLine-1, KindAutomation)
	if m, ok := v.(map[string]any); ok {
		if triggers, ok := m["triggers"].([]any); ok {
			for i, t := range triggers {
				if p := lookup(t, "/filter/payload"); p != nil {
					ds = append(ds, checkFilterLimits(doc, "/triggers/"+itoa(i)+"/filter/payload", p)...)
				}
			}
		}
	}
	if strings.TrimSpace(string(body)) == "" {
		ds = append(ds, Diagnostic{File: file, Line: bodyLine, Column: 1,
			Message: "the prompt is empty: write it after the closing \"---\" line", Severity: Error})
	}
	if ds.HasErrors() {
		return nil, ds
	}
	a := automationFrom(v.(map[string]any))
	a.Key, a.Doc = key, doc
	a.Prompt = strings.TrimLeft(string(body), "\r\n")
	if a.Title == "" {
		a.Title = key
	}
	return &a, ds // warnings, if any
}

// ParseFactoryFile decodes and validates factory.yaml.
func ParseFactoryFile(file string, data []byte) (*FactoryFile, Diagnostics) {
	f, _, ds := ParseFactoryDocument(file, data)
	return f, ds
}

// ParseFactoryDocument is ParseFactoryFile that also returns the document,
// for checks across files that point into factory.yaml.
func ParseFactoryDocument(file string, data []byte) (*FactoryFile, *Document, Diagnostics) {
	f, doc, ds := parseFactory(file, data)
	return f, doc, ds
}

func parseFactory(file string, data []byte) (*FactoryFile, *Document, Diagnostics) {
	v, doc, ds := parse(file, data, 0, KindFactory)
	if ds.HasErrors() {
		return nil, doc, ds
	}
	m := v.(map[string]any)
	f := &FactoryFile{}
	if err := json.Unmarshal(canonical(m), f); err != nil {
		return nil, doc, Diagnostics{{File: file, Line: 1, Column: 1, Message: err.Error(), Severity: Error}}
	}
	f.WebhookBaseURL = strings.TrimRight(f.WebhookBaseURL, "/")
	return f, doc, ds
}

// ValidateDocument decodes YAML and validates it against an embedded schema,
// returning the JSON text. The server config file goes through here.
func ValidateDocument(file string, data []byte, k Kind) ([]byte, Diagnostics) {
	v, doc, ds := parse(file, data, 0, k)
	if ds.HasErrors() {
		return nil, ds
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, Diagnostics{doc.Diag(Error, "", err.Error())}
	}
	return b, ds
}

// checkFilterLimits enforces the rules of docs/spec/filters.md (as
// docs/spec/v1alpha1.md corrects them) that a schema cannot express:
// nesting depth, leaf fields in all, a value both in and not_in, and
// exists: false with a non-empty in.
func checkFilterLimits(doc *Document, at string, v any) Diagnostics {
	leaves := 0
	var ds Diagnostics
	var walk func(p string, v any, depth int)
	walk = func(p string, v any, depth int) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if depth > maxFilterDepth {
			ds = append(ds, doc.Diag(Error, p, fmt.Sprintf("payload filter nested too deeply: at most %d levels", maxFilterDepth)))
			return
		}
		for k, c := range m {
			cp := p + "/" + escape(k)
			if cm, ok := c.(map[string]any); ok && !isOperatorObject(cm) {
				walk(cp, c, depth+1)
				continue
			}
			leaves++
			if cm, ok := c.(map[string]any); ok {
				ds = append(ds, checkOperators(doc, cp, cm)...)
			}
		}
	}
	walk(at, v, 1)
	if leaves > maxFilterKeys {
		ds = append(ds, doc.Diag(Error, at, fmt.Sprintf("payload filter too large: at most %d fields in all (this one has %d)", maxFilterKeys, leaves)))
	}
	return ds
}

func isOperatorObject(m map[string]any) bool {
	for k := range m {
		if k != "in" && k != "not_in" && k != "exists" {
			return false
		}
	}
	return len(m) > 0
}

// checkOperators refuses the operator combinations that match nothing or
// contradict themselves.
func checkOperators(doc *Document, at string, m map[string]any) Diagnostics {
	in, _ := m["in"].([]any)
	notIn, _ := m["not_in"].([]any)
	var ds Diagnostics
	for _, x := range in {
		for _, y := range notIn {
			if jsonEqualValues(x, y) {
				ds = append(ds, doc.Diag(Error, at, fmt.Sprintf("%s is in both in and not_in: keep it in one", compact(x))))
			}
		}
	}
	if ex, ok := m["exists"].(bool); ok && !ex && len(in) > 0 {
		ds = append(ds, doc.Diag(Error, at, "exists: false with a non-empty in matches nothing: a missing field equals no value"))
	}
	return ds
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
