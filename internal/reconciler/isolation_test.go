package reconciler_test

import (
	"context"
	"strings"
	"testing"

	"factory/internal/reconciler"
)

// TestPlanWarnsOfSharedUsers: a plan warns about each agent whose runs
// would not be kept apart (the server's isolation says why), and of no
// other.
func TestPlanWarnsOfSharedUsers(t *testing.T) {
	dir := repo(t, map[string]string{
		"factory.yaml":         "schemaVersion: v1alpha1\nname: S\nrepositories: []\nagentDefaults:\n  model: auto\n",
		"agents/lead/agent.md": "---\nagentType: FOREMAN\n---\nYou lead.\n",
	})
	c, err := reconciler.Check(context.Background(), reconciler.DirSource{Root: dir}, "s", nil)
	if err != nil || c.Desired == nil {
		t.Fatal(err)
	}
	runs := func(string) bool { return true }
	shared := func(h string) string {
		return "environment default: its agents run as user 65534, unconfined, shared with runs of it"
	}
	ds := reconciler.HarnessWarnings(c.Desired, runs, shared, nil)
	if len(ds) != 1 || !strings.Contains(ds[0].String(), "agent lead runs on the oz harness, in environment default: its agents run as user 65534") {
		t.Errorf("warnings %v", ds)
	}
	if ds := reconciler.HarnessWarnings(c.Desired, runs, func(string) string { return "" }, nil); len(ds) != 0 {
		t.Errorf("apart, warnings %v", ds)
	}
}
