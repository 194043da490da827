package schema

import (
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
	v, doc, ds := parse(file, data, 0, KindWebhook)
	if len(ds) > 0 {
		return nil, ds
	}
	w := webhookFrom(v.(map[string]any))
	w.Key, w.Doc = key, doc
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
	if len(ds) > 0 {
		return nil, ds
	}
	a := automationFrom(v.(map[string]any))
	a.Key, a.Doc = key, doc
	a.Prompt = strings.TrimLeft(string(body), "\r\n")
	if a.Title == "" {
		a.Title = key
	}
	return &a, nil
}

// ParseFactoryFile decodes and validates factory.yaml.
func ParseFactoryFile(file string, data []byte) (*FactoryFile, Diagnostics) {
	v, _, ds := parse(file, data, 0, KindFactory)
	if len(ds) > 0 {
		return nil, ds
	}
	m := v.(map[string]any)
	return &FactoryFile{Description: str(m, "description"), WebhookBaseURL: strings.TrimRight(str(m, "webhookBaseUrl"), "/")}, nil
}

// ValidateDocument decodes YAML and validates it against an embedded schema,
// returning the JSON text. The server config file goes through here.
func ValidateDocument(file string, data []byte, k Kind) ([]byte, Diagnostics) {
	v, doc, ds := parse(file, data, 0, k)
	if len(ds) > 0 {
		return nil, ds
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, Diagnostics{doc.Diag(Error, "", err.Error())}
	}
	return b, nil
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
