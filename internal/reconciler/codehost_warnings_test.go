package reconciler_test

import (
	"context"
	"strings"
	"testing"

	"factory/internal/reconciler"
)

// TestPlanWarnsOfPathsWithoutCodeHost: a paths filter on a pull request
// event is matched against the files the host's API lists, so a plan of a
// server without the host's credential warns at the filter's line; with
// it, or on a push (whose payload lists its files), there is no warning.
func TestPlanWarnsOfPathsWithoutCodeHost(t *testing.T) {
	dir := repo(t, map[string]string{
		"factory.yaml":         "schemaVersion: v1alpha1\nname: S\nrepositories: []\nagentDefaults:\n  model: auto\n",
		"agents/lead/agent.md": "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"automations/docs/automation.md": "---\ntriggers:\n  - provider: github\n    event: pull_request_opened\n    filter:\n      paths: [\"docs/**\"]\n" +
			"  - provider: github\n    event: push\n    filter:\n      paths: [\"docs/**\"]\n---\nReview the docs.\n",
	})
	c, err := reconciler.Check(context.Background(), reconciler.DirSource{Root: dir}, "s", nil)
	if err != nil || c.Desired == nil {
		t.Fatal(err)
	}
	ds := reconciler.CodeHostWarnings(c.Desired, func(string) bool { return false })
	if len(ds) != 1 || !strings.Contains(ds[0].String(), "/triggers/0/filter/paths") || !strings.Contains(ds[0].String(), "never fires") {
		t.Errorf("warnings %v", ds)
	}
	if ds := reconciler.CodeHostWarnings(c.Desired, func(h string) bool { return h == "github" }); len(ds) != 0 {
		t.Errorf("with a GitHub App, warnings %v", ds)
	}
}
