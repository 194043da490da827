package apicheck

import (
	"encoding/json"
	"strings"
)

// Example is a copy of the first example the description gives for an
// operation's answer (method and path template, status): a fake answers
// with the provider's own example, changing only what it must, so that
// its answers carry every field the provider's do.
func (d *Description) Example(method, template string, status int) any {
	item, _ := d.doc["paths"].(map[string]any)[template].(map[string]any)
	op, _ := item[strings.ToLower(method)].(map[string]any)
	responses, _ := op["responses"].(map[string]any)
	resp := d.resolve(responses[itoa(status)])
	content, _ := resp["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	examples, _ := media["examples"].(map[string]any)
	for _, name := range sortedKeys(examples) {
		ex := d.resolve(examples[name])
		if v, ok := ex["value"]; ok {
			return deepCopy(v)
		}
	}
	if v, ok := media["example"]; ok {
		return deepCopy(v)
	}
	return nil
}

// ExampleObject is Example, as an object (nil when the example is not one).
func (d *Description) ExampleObject(method, template string, status int) map[string]any {
	m, _ := d.Example(method, template, status).(map[string]any)
	return m
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

func deepCopy(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
