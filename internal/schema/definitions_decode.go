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
		EventSource:      str(m, "eventSource"),
	}}
}

func automationFrom(m map[string]any) Automation {
	a := Automation{AutomationSpec: factory.AutomationSpec{Title: str(m, "title"), Enabled: boolOr(m, "enabled", true),
		Config: canonical(m["config"]), Agent: str(m, "agent"), NoWriteBack: !boolOr(m, "writeBack", true),
		Fresh: !boolOr(m, "continueWorkItem", true)}}
	if ex := ExecFrom(m); ex != nil {
		a.Exec = ex
	}
	triggers, _ := m["triggers"].([]any)
	for _, t := range triggers {
		a.Triggers = append(a.Triggers, triggerFrom(t.(map[string]any)))
	}
	return a
}

func triggerFrom(tm map[string]any) Trigger {
	f, _ := tm["filter"].(map[string]any)
	tr := Trigger{Provider: str(tm, "provider"), Event: str(tm, "event"), Filter: TriggerFilter{WebhookIDs: []string{}}}
	for k, v := range f {
		switch k {
		case "webhook_ids":
			tr.Filter.WebhookIDs = append(tr.Filter.WebhookIDs, valueSet(v).In...)
		case "payload":
			tr.Filter.Payload = canonical(v)
		default:
			if tr.Filter.Keys == nil {
				tr.Filter.Keys = map[string]factory.ValueSet{}
			}
			tr.Filter.Keys[k] = valueSet(v)
		}
	}
	if sm, ok := tm["schedule"].(map[string]any); ok {
		tr.Schedule = &factory.TriggerSchedule{Name: str(sm, "name"), Cron: str(sm, "cron")}
	}
	return tr
}

// valueSet reads a filter key's value: a list, {in: [...]} or {not_in: [...]}.
func valueSet(v any) factory.ValueSet {
	var vs factory.ValueSet
	strs := func(x any) []string {
		l, _ := x.([]any)
		out := make([]string, 0, len(l))
		for _, e := range l {
			s, _ := e.(string)
			out = append(out, s)
		}
		return out
	}
	switch x := v.(type) {
	case []any:
		vs.In = strs(x)
	case map[string]any:
		vs.In, vs.NotIn = strs(x["in"]), strs(x["not_in"])
		if len(vs.In) == 0 {
			vs.In = nil
		}
		if len(vs.NotIn) == 0 {
			vs.NotIn = nil
		}
	}
	return vs
}

// ExecFrom reads the execution keys of a validated mapping (agentDefaults,
// an agent's or an automation's front matter, a suite configuration); nil
// when it sets none.
func ExecFrom(m map[string]any) *factory.ExecSettings {
	keys := map[string]any{}
	for _, k := range ExecKeys {
		if v, ok := m[k]; ok {
			keys[k] = v
		}
	}
	if len(keys) == 0 {
		return nil
	}
	var ex factory.ExecSettings
	if err := json.Unmarshal(canonical(keys), &ex); err != nil {
		return nil // the schema has checked every type
	}
	return &ex
}

// ExecKeys are the execution settings' keys.
var ExecKeys = []string{"model", "harness", "runner", "environmentId", "secrets", "mcpServers", "workerHost", "budget"}
