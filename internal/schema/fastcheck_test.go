package schema

import (
	"testing"

	k8syaml "sigs.k8s.io/yaml"
)

func TestFastCheckCompilesEverySchema(t *testing.T) {
	for _, k := range Kinds {
		if fastSchema(k) == nil {
			t.Errorf("the fast checker cannot compile the %s schema: its documents would all take the slow path", k)
		}
	}
}

// agree fails when the fast checker and the full validator disagree.
func agree(t *testing.T, k Kind, yamlText []byte) {
	js, err := k8syaml.YAMLToJSON(yamlText)
	if err != nil {
		return
	}
	v, err := decodeJSON(js)
	if err != nil {
		return
	}
	fast := fastSchema(k).valid(v)
	full := compiledSchema(k).Validate(v) == nil
	if fast != full {
		t.Fatalf("%s schema: fast checker says valid=%v, full validator says valid=%v, for %s", k, fast, full, js)
	}
}

var agreeSeeds = []string{
	"", "{}", "[]", "1", "authMode: token", "authMode: signature\nsignatureScheme: github\nsecretName: s",
	"authMode: signature\nsignatureScheme: standard-webhooks", "authMode: token\nsignatureScheme: github",
	"enabled: 1", "deliveryIdHeader: 'X Y'", "name: ''", "secretName: -x",
	"triggers: [{provider: webhook, event: received, filter: {webhook_ids: [wh_0000000000000000gh01]}}]",
	"triggers: [{provider: webhook, event: received, filter: {webhook_ids: [wh_0000000000000000gh01, wh_0000000000000000gh01]}}]",
	"triggers: [{provider: webhook, event: received, filter: {webhook_ids: [wh_0000000000000000gh01], payload: {a: [1], b: {in: [x]}, c: {d: {exists: true}}, e: {not_in: []}}}}]}",
	"triggers: [{provider: webhook, event: received, filter: {webhook_ids: [wh_0000000000000000gh01], payload: {a: 1, b: {}, c: {in: []}, d: {exists: true, x: [1]}}}}]}",
	"triggers: []\nconfig: {idle_timeout_minutes: 1.0, mcp_servers: {a: {command: x}, b: {url: 'https://x', headers: {k: v}}}}",
	"config: {idle_timeout_minutes: 61, skill_spec: 'o/r:dir/SKILL.md', mcp_servers: {a: {command: x, url: y}}}",
	"config: {idle_timeout_minutes: 1.5, environment_id: default, model_id: m, name: n, base_prompt: p}",
	"listen: x\nfactories: [{name: a, source: b, interval: 1m}]\nenvironments: {d: {executor: acp, command: [x]}}\nruntime: {maxConcurrentRuns: 0}",
	"webhookBaseUrl: https://hooks.example.com/base\ndescription: d",
	"webhookBaseUrl: 'ftp://x'",
}

// FuzzFastCheckAgrees feeds documents to both checkers of every schema.
// They must give the same verdict, or valid files could be refused or,
// worse, invalid ones applied.
func FuzzFastCheckAgrees(f *testing.F) {
	for _, s := range agreeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, k := range Kinds {
			agree(t, k, data)
		}
	})
}

func TestFastCheckAgreesOnSeeds(t *testing.T) {
	for _, s := range agreeSeeds {
		for _, k := range Kinds {
			agree(t, k, []byte(s))
		}
	}
}
