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

// GenerateV1Alpha1 writes a factory in the v1alpha1 format: factory.yaml,
// 20 agents (one foreman) each with a skill, 5 runners, 10 shared skills,
// n webhooks and m nested automations, alternating between webhook
// triggers with a payload filter and GitHub triggers with filter keys,
// each run by one of the agents.
func GenerateV1Alpha1(tb testing.TB, dir string, n, m int) {
	tb.Helper()
	write := func(p, content string) {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	write("factory.yaml", "schemaVersion: v1alpha1\nname: Generated\nrepositories:\n  - owner: acme\n    name: widgets\nagentDefaults:\n  model: auto\n  runner: runner-0\n")
	for i := 0; i < 5; i++ {
		write(fmt.Sprintf("runners/runner-%d.yaml", i), "setupCommands: [make deps]\ninstanceShape: {vcpus: 4, memoryGb: 8}\nplatform:\n  linux:\n    dockerImage: debian:12\n")
	}
	for i := 0; i < 20; i++ {
		kind := "IMPLEMENT"
		if i == 0 {
			kind = "FOREMAN"
		}
		write(fmt.Sprintf("agents/agent-%02d/agent.md", i), fmt.Sprintf("---\ndescription: Agent %d.\nagentType: %s\nrunner: runner-%d\n---\nYou are agent %d of the widgets factory. Do the work the request describes, with tests.\n", i, kind, i%5, i))
		write(fmt.Sprintf("agents/agent-%02d/skills/own-%02d/SKILL.md", i, i), fmt.Sprintf("---\nname: own-%02d\ndescription: Agent %d's own conventions.\n---\nWrite small commits.\n", i, i))
	}
	for i := 0; i < 10; i++ {
		write(fmt.Sprintf("skills/shared-%02d/SKILL.md", i), fmt.Sprintf("---\nname: shared-%02d\ndescription: Shared skill %d.\n---\nBranches are factory/<issue>.\n", i, i))
	}
	for i := 0; i < n; i++ {
		write(fmt.Sprintf("webhooks/hook-%03d.yaml", i), "authMode: signature\nsignatureScheme: standard_webhooks\nsecretName: hooks\ndeliveryIdHeader: X-Event-Id\n")
	}
	for i := 0; i < m; i++ {
		trigger := fmt.Sprintf("  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [wh_0000000000000000%04d]\n      payload:\n        action: [opened, reopened]\n        issue:\n          labels: {name: [bug]}\n", i%max(n, 1))
		if i%2 == 1 {
			trigger = "  - provider: github\n    event: issue_labeled\n    filter:\n      repos: [acme/widgets]\n      labels: [factory-ready]\n      authors: {not_in: [dependabot]}\n"
		}
		write(fmt.Sprintf("automations/auto-%04d/automation.md", i), fmt.Sprintf("---\nagent: agent-%02d\ntriggers:\n%s---\nHandle request %d of acme/widgets: read the event, decide, act, and report.\n", i%20, trigger, i))
	}
}
