package filter_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"factory/internal/filter"
)

// BenchmarkEvaluate evaluates one 16 KB delivery (decoded once, as the
// server does) against 1,000 automations' filters, and against 100 as the
// baseline for linearity. Target: under 1 ms for 1,000.
func BenchmarkEvaluate(b *testing.B) {
	var labels []string
	for i := 0; i < 40; i++ {
		labels = append(labels, fmt.Sprintf(`{"name":"label-%d","color":"ff0000"}`, i))
	}
	body := fmt.Sprintf(`{"action":"opened","repository":{"full_name":"acme/widgets-7","private":false},"issue":{"number":42,"state":"open","labels":[%s],"body":"%s"},"sender":{"login":"octocat"}}`,
		strings.Join(labels, ","), strings.Repeat("lorem ipsum ", 1300))
	if len(body) < 16<<10 {
		b.Fatalf("payload is %d bytes", len(body))
	}
	for _, n := range []int{100, 1000} {
		filters := make([]*filter.Filter, n)
		for i := range filters {
			f, err := filter.Compile(json.RawMessage(fmt.Sprintf(
				`{"action":["opened","reopened"],"repository":{"full_name":["acme/widgets-%d"]},"issue":{"labels":{"exists":true},"state":{"not_in":["closed"]}}}`, i%10)))
			if err != nil {
				b.Fatal(err)
			}
			filters[i] = f
		}
		b.Run(fmt.Sprintf("automations=%d", n), func(b *testing.B) {
			payload, err := filter.DecodePayload([]byte(body))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			matched := 0
			for i := 0; i < b.N; i++ {
				matched = 0
				for _, f := range filters {
					if f.Match(payload) {
						matched++
					}
				}
			}
			if matched != n/10 {
				b.Fatalf("%d matched, want %d", matched, n/10)
			}
		})
	}
	b.Run("decode-16KB", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := filter.DecodePayload([]byte(body)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
