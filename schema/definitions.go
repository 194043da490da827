package schema

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Auth modes of a webhook (seed §5).
const (
	AuthToken     = "token"
	AuthURLToken  = "url_token"
	AuthSignature = "signature"
)

// SchemeStandardWebhooks is the one signature scheme whose secret the
// service may generate (definitions.md).
const SchemeStandardWebhooks = "standard-webhooks"

// Webhook is the definition of webhooks/<key>.yaml with defaults applied.
type Webhook struct {
	Key              string `json:"-"` // the file's <name>: the webhook's identity
	Name             string `json:"name"`
	Description      string `json:"description,omitempty"`
	AuthMode         string `json:"authMode"`
	SignatureScheme  string `json:"signatureScheme,omitempty"`
	SecretName       string `json:"secretName,omitempty"`
	DeliveryIDHeader string `json:"deliveryIdHeader,omitempty"`
	Enabled          bool   `json:"enabled"`

	Doc *Document `json:"-"`
}

// GeneratesSecret reports whether the service generates this webhook's
// secret, which it does when no secretName is given (definitions.md).
func (w *Webhook) GeneratesSecret() bool { return w.SecretName == "" }

// Automation is the definition of automations/<key>.md with defaults applied.
type Automation struct {
	Key      string          `json:"-"`
	Title    string          `json:"title"`
	Enabled  bool            `json:"enabled"`
	Triggers []Trigger       `json:"triggers"`
	Config   json.RawMessage `json:"config,omitempty"` // AmbientAgentConfig, canonical JSON
	Prompt   string          `json:"prompt"`

	Doc *Document `json:"-"`
}

// Trigger starts a run when a delivery of a selected webhook matches the
// payload filter.
type Trigger struct {
	Provider string        `json:"provider"`
	Event    string        `json:"event"`
	Filter   TriggerFilter `json:"filter"`
}

// TriggerFilter selects webhooks by UID and deliveries by payload.
type TriggerFilter struct {
	WebhookIDs []string        `json:"webhook_ids"`
	Payload    json.RawMessage `json:"payload,omitempty"` // canonical JSON
}

// FactoryFile is the optional factory.yaml.
type FactoryFile struct {
	Description    string `json:"description,omitempty"`
	WebhookBaseURL string `json:"webhookBaseUrl,omitempty"`
}

// ParseWebhook decodes and validates webhooks/<key>.yaml.
func ParseWebhook(file, key string, data []byte) (*Webhook, Diagnostics) {
	v, doc, ds := decodeYAML(file, data, 0)
	if ds != nil {
		return nil, ds
	}
	if v == nil {
		v = map[string]any{} // an empty file is a token webhook with defaults
	}
	if ds := validate(doc, KindWebhook, v); len(ds) > 0 {
		return nil, ds
	}
	var raw struct {
		Webhook
		Enabled *bool `json:"enabled"`
	}
	if err := remarshal(v, &raw); err != nil {
		return nil, Diagnostics{doc.Diag(Error, "", err.Error())}
	}
	w := raw.Webhook
	w.Key, w.Doc = key, doc
	w.Enabled = raw.Enabled == nil || *raw.Enabled
	if w.Name == "" {
		w.Name = key
	}
	if w.AuthMode == "" {
		w.AuthMode = AuthToken
	}
	return &w, nil
}

// ParseAutomation decodes and validates automations/<key>.md: YAML front
// matter between "---" lines, then the prompt.
func ParseAutomation(file, key string, data []byte) (*Automation, Diagnostics) {
	front, frontLine, body, bodyLine, err := SplitFrontMatter(data)
	if err != nil {
		return nil, Diagnostics{{File: file, Line: 1, Column: 1, Message: err.Error(), Severity: Error}}
	}
	v, doc, ds := decodeYAML(file, front, frontLine-1)
	if ds != nil {
		return nil, ds
	}
	if v == nil {
		v = map[string]any{}
	}
	ds = validate(doc, KindAutomation, v)
	if strings.TrimSpace(string(body)) == "" {
		ds = append(ds, Diagnostic{File: file, Line: bodyLine, Column: 1,
			Message: "the prompt is empty: write it after the closing \"---\" line", Severity: Error})
	}
	if m, ok := v.(map[string]any); ok {
		if triggers, ok := m["triggers"].([]any); ok {
			for i, t := range triggers {
				if p := lookup(t, "/filter/payload"); p != nil {
					ds = append(ds, checkFilterLimits(doc, "/triggers/"+itoa(i)+"/filter/payload", p)...)
				}
			}
		}
	}
	if len(ds) > 0 {
		return nil, ds
	}
	var raw struct {
		Automation
		Enabled *bool `json:"enabled"`
	}
	if err := remarshal(v, &raw); err != nil {
		return nil, Diagnostics{doc.Diag(Error, "", err.Error())}
	}
	a := raw.Automation
	a.Key, a.Doc = key, doc
	a.Enabled = raw.Enabled == nil || *raw.Enabled
	a.Prompt = strings.TrimLeft(string(body), "\r\n")
	if a.Title == "" {
		a.Title = key
	}
	return &a, nil
}

// ParseFactoryFile decodes and validates factory.yaml.
func ParseFactoryFile(file string, data []byte) (*FactoryFile, Diagnostics) {
	v, doc, ds := decodeYAML(file, data, 0)
	if ds != nil {
		return nil, ds
	}
	if v == nil {
		return &FactoryFile{}, nil
	}
	if ds := validate(doc, KindFactory, v); len(ds) > 0 {
		return nil, ds
	}
	var f FactoryFile
	if err := remarshal(v, &f); err != nil {
		return nil, Diagnostics{doc.Diag(Error, "", err.Error())}
	}
	f.WebhookBaseURL = strings.TrimRight(f.WebhookBaseURL, "/")
	return &f, nil
}

// ValidateDocument decodes YAML and validates it against an embedded schema,
// returning the JSON text. The server config file goes through here.
func ValidateDocument(file string, data []byte, k Kind) ([]byte, Diagnostics) {
	v, doc, ds := decodeYAML(file, data, 0)
	if ds != nil {
		return nil, ds
	}
	if v == nil {
		v = map[string]any{}
	}
	if ds := validate(doc, k, v); len(ds) > 0 {
		return nil, ds
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, Diagnostics{doc.Diag(Error, "", err.Error())}
	}
	return b, nil
}

// remarshal converts a validated JSON value into a typed definition. Maps are
// marshalled with sorted keys, so embedded raw JSON (config, payload filter)
// comes out canonical and compares equal when the YAML means the same.
func remarshal(v any, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(out)
}

// checkFilterLimits enforces the limits of filters.md that a schema cannot
// express: nesting depth and the number of keys in all.
func checkFilterLimits(doc *Document, at string, v any) Diagnostics {
	keys := 0
	var ds Diagnostics
	var walk func(p string, v any, depth int)
	walk = func(p string, v any, depth int) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if depth > maxFilterDepth {
			ds = append(ds, doc.Diag(Error, p, "payload filter nested too deeply: at most 8 levels"))
			return
		}
		for k, c := range m {
			if k == "in" || k == "not_in" || k == "exists" {
				continue
			}
			keys++
			walk(p+"/"+escape(k), c, depth+1)
		}
	}
	walk(at, v, 1)
	if keys > maxFilterKeys {
		ds = append(ds, doc.Diag(Error, at, "payload filter too large: at most 128 keys in all"))
	}
	return ds
}
