package schema_test

import (
	"bytes"
	"encoding/json"
	"testing"

	yamlv2 "go.yaml.in/yaml/v2"
	yaml "go.yaml.in/yaml/v3"
	k8syaml "sigs.k8s.io/yaml"

	"factory/internal/schema"
)

func BenchmarkParts(b *testing.B) {
	front, _, _, _, _ := schema.SplitFrontMatter([]byte(benchAutomation))
	js, _ := k8syaml.YAMLToJSONStrict(front)
	b.Run("yaml.v3-node", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var n yaml.Node
			yaml.Unmarshal(front, &n)
		}
	})
	b.Run("sigs-yaml-to-json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			k8syaml.YAMLToJSONStrict(front)
		}
	})
	b.Run("json-decode-any", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			d := json.NewDecoder(bytes.NewReader(js))
			d.UseNumber()
			var v any
			d.Decode(&v)
		}
	})
}

func BenchmarkPartsV2(b *testing.B) {
	front, _, _, _, _ := schema.SplitFrontMatter([]byte(benchAutomation))
	b.Run("yaml.v2-unmarshal-any", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var v any
			yamlv2.Unmarshal(front, &v)
		}
	})
}
