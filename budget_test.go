package factory_test

import (
	"testing"

	"factory"
)

// TestResolveBudgets: every layer that sets a budget bounds the run
// (agentDefaults ← agent ← automation): each limit is the smallest set,
// a limit one layer leaves unset is another's, and a layer without a
// budget changes nothing.
func TestResolveBudgets(t *testing.T) {
	defaults := factory.ExecSettings{Model: "auto", Budget: &factory.Budget{MaxCostUSD: 5, MaxDuration: "1h"}}
	agent := factory.ExecSettings{Harness: &factory.Harness{Type: "codex"}, Budget: &factory.Budget{MaxTokens: 200000, MaxCostUSD: 8}}
	automation := factory.ExecSettings{Budget: &factory.Budget{MaxDuration: "10m", MaxTokens: 500000}}
	got := defaults.Resolve(agent).Resolve(automation).Resolve(factory.ExecSettings{Runner: "r"})
	want := factory.Budget{MaxTokens: 200000, MaxCostUSD: 5, MaxDuration: "10m"}
	if got.Budget == nil || *got.Budget != want {
		t.Fatalf("budget %+v, want %+v", got.Budget, want)
	}
	if got.Harness == nil || got.Harness.Type != "codex" || got.Runner != "r" {
		t.Errorf("the other settings: %+v", got)
	}
	if none := (factory.ExecSettings{Model: "auto"}).Resolve(factory.ExecSettings{Runner: "r"}); none.Budget != nil {
		t.Errorf("a budget from nowhere: %+v", none.Budget)
	}
}
