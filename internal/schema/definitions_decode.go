package schema

import (
	"encoding/json"

	"factory"
)

// The functions below build typed definitions from validated JSON values.
// The schema has checked every type, so they read fields directly instead
// of marshalling the value again.

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func boolOr(m map[string]any, k string, def bool) bool {
	if b, ok := m[k].(bool); ok {
		return b
	}
	return def
}

// canonical renders a JSON value with sorted keys, so that the same meaning
// always has the same bytes (plans compare them).
func canonical(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

func webhookFrom(m map[string]any) Webhook {
	return Webhook{WebhookSpec: factory.WebhookSpec{
		Name:             str(m, "name"),
		Description:      str(m, "description"),
		AuthMode:         str(m, "authMode"),
		SignatureScheme:  str(m, "signatureScheme"),
		SecretName:       str(m, "secretName"),
		DeliveryIDHeader: str(m, "deliveryIdHeader"),
		Enabled:          boolOr(m, "enabled", true),
	}}
}

func automationFrom(m map[string]any) Automation {
	a := Automation{AutomationSpec: factory.AutomationSpec{Title: str(m, "title"), Enabled: boolOr(m, "enabled", true), Config: canonical(m["config"])}}
	triggers, _ := m["triggers"].([]any)
	for _, t := range triggers {
		tm, _ := t.(map[string]any)
		f, _ := tm["filter"].(map[string]any)
		tr := Trigger{Provider: str(tm, "provider"), Event: str(tm, "event"), Filter: TriggerFilter{WebhookIDs: []string{}}}
		ids, _ := f["webhook_ids"].([]any)
		for _, id := range ids {
			s, _ := id.(string)
			tr.Filter.WebhookIDs = append(tr.Filter.WebhookIDs, s)
		}
		if p, ok := f["payload"]; ok {
			tr.Filter.Payload = canonical(p)
		}
		a.Triggers = append(a.Triggers, tr)
	}
	return a
}
