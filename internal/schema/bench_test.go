package schema_test

import (
	"strings"
	"testing"

	"factory/internal/schema"
)

const benchAutomation = `---
title: Automation 1
triggers:
  - provider: webhook
    event: received
    filter:
      webhook_ids: [wh_00000000000000000001]
      payload:
        action: [opened, reopened, edited]
        repository:
          full_name: [acme/widgets-1]
        issue:
          labels: { exists: true }
          state: { not_in: [closed] }
config:
  name: triage-1
  model_id: claude-sonnet
  environment_id: default
  idle_timeout_minutes: 15
---
You are the triage agent for acme/widgets-1. Read the issue in the attached payload,
decide whether it is a bug report, a feature request or a question, suggest labels,
and write a short first answer for the reporter. Be concise and kind.
`

// BenchmarkParseAutomation parses and validates one automation file, with
// its payload filter and without (the baseline).
func BenchmarkParseAutomation(b *testing.B) {
	noFilter := strings.Join(append(strings.Split(benchAutomation, "\n")[:7], strings.Split(benchAutomation, "\n")[14:]...), "\n")
	for name, text := range map[string]string{"with-filter": benchAutomation, "without-filter": noFilter} {
		b.Run(name, func(b *testing.B) {
			data := []byte(text)
			for i := 0; i < b.N; i++ {
				if _, ds := schema.ParseAutomation("automations/a.md", "a", data); len(ds) > 0 {
					b.Fatal(ds)
				}
			}
		})
	}
}
