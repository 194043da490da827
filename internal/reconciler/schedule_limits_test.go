package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/reconciler"
)

// scheduleTree is a v1alpha1 factory with n automations of per schedule
// triggers each, firing at cron.
func scheduleTree(t *testing.T, n, per int, cron string) string {
	t.Helper()
	files := map[string]string{
		"factory.yaml":         "schemaVersion: v1alpha1\nname: S\nrepositories: []\nagentDefaults:\n  model: auto\n",
		"agents/lead/agent.md": "---\nagentType: FOREMAN\n---\nYou lead.\n",
	}
	for i := range n {
		var b strings.Builder
		b.WriteString("---\ntriggers:\n")
		for j := range per {
			fmt.Fprintf(&b, "  - provider: schedule\n    event: cron_fired\n    schedule:\n      name: s%d\n      cron: %q\n", j, cron)
		}
		b.WriteString("---\nTick.\n")
		files[fmt.Sprintf("automations/a%03d/automation.md", i)] = b.String()
	}
	return repo(t, files)
}

func errorsOf(t *testing.T, dir string) []string {
	t.Helper()
	c, err := reconciler.Check(context.Background(), reconciler.DirSource{Root: dir}, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range c.Plan.Diagnostics.Errors() {
		out = append(out, d.String())
	}
	return out
}

// TestSchedulesBounded: a committer could make a factory fire without
// bound: any number of schedule triggers, each @every 1s. The attack:
// a schedule more often than once a minute is refused where it is
// written, and so is the schedule that takes a factory over its limit
// (100 by default).
func TestSchedulesBounded(t *testing.T) {
	errs := errorsOf(t, scheduleTree(t, 1, 1, "@every 10s"))
	if len(errs) != 1 || !strings.Contains(errs[0], "automations/a000/automation.md:7:13: /triggers/0/schedule/cron: @every 10s fires more often than once a minute") {
		t.Errorf("@every 10s: %q", errs)
	}
	if errs := errorsOf(t, scheduleTree(t, 1, 1, "@every 1m")); len(errs) != 0 {
		t.Errorf("@every 1m: %q", errs)
	}
	if errs := errorsOf(t, scheduleTree(t, 6, 16, "@hourly")); len(errs) != 0 {
		t.Errorf("96 schedules: %q", errs)
	}
	errs = errorsOf(t, scheduleTree(t, 7, 16, "@hourly"))
	if len(errs) != 1 || !strings.Contains(errs[0], "automations/a006/automation.md:26:7: /triggers/4/schedule: too many schedules: a factory has at most 100 (this is schedule 101)") {
		t.Errorf("112 schedules: %q", errs)
	}
}

// TestScheduleLimitsOfAServer: a server's configuration sets other limits
// (schedules.minInterval, schedules.maxPerFactory), and its checks use
// them.
func TestScheduleLimitsOfAServer(t *testing.T) {
	lim := factory.ScheduleLimits{MinInterval: time.Second, PerFactory: 5}
	c, err := reconciler.CheckWithin(context.Background(), lim, reconciler.DirSource{Root: scheduleTree(t, 1, 6, "@every 2s")}, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for _, d := range c.Plan.Diagnostics.Errors() {
		errs = append(errs, d.String())
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "/triggers/5/schedule: too many schedules: a factory has at most 5 (this is schedule 6)") {
		t.Fatalf("six schedules @every 2s, at most five of at least a second: %q", errs)
	}
}
