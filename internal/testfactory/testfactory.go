// Package testfactory writes generated factory repositories for tests and
// benchmarks: many webhooks and automations that look like real ones.
package testfactory

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Generate writes a realistic factory of n webhooks and m
// automations (each with a payload filter, a config and a prompt).
func Generate(tb testing.TB, dir string, n, m int) {
	tb.Helper()
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "webhooks"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "automations"), 0o755))
	for i := 0; i < n; i++ {
		must(os.WriteFile(filepath.Join(dir, "webhooks", fmt.Sprintf("hook-%03d.yaml", i)),
			[]byte(fmt.Sprintf("name: Hook %d\ndescription: Deliveries from system %d.\nauthMode: signature\nsignatureScheme: standard-webhooks\ndeliveryIdHeader: X-Event-Id\n", i, i)), 0o644))
	}
	for i := 0; i < m; i++ {
		must(os.WriteFile(filepath.Join(dir, "automations", fmt.Sprintf("auto-%04d.md", i)), []byte(fmt.Sprintf(`---
title: Automation %d
triggers:
  - provider: webhook
    event: received
    filter:
      webhook_ids: [wh_0000000000000000%04d]
      payload:
        action: [opened, reopened, edited]
        repository:
          full_name: [acme/widgets-%d]
        issue:
          labels: { exists: true }
          state: { not_in: [closed] }
config:
  name: triage-%d
  model_id: claude-sonnet
  environment_id: default
  idle_timeout_minutes: 15
---
You are the triage agent for acme/widgets-%d. Read the issue in the attached payload,
decide whether it is a bug report, a feature request or a question, suggest labels,
and write a short first answer for the reporter. Be concise and kind.
`, i, i%n, i, i, i)), 0o644))
	}
}
