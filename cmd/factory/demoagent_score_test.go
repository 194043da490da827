package main

import (
	"strings"
	"testing"
)

func TestDemoScore(t *testing.T) {
	for _, tc := range []struct{ name, prompt, want string }{
		{"no script", "Judge this run.", ""},
		{"unconditional", "## What to check\ndemo-score: good\n## The run\n...", `"classification":"good"`},
		{"first condition met", "demo-score: pass if model strong-1\ndemo-score: fail\n## The run\n[demo agent] running as model strong-1\n", `"classification":"pass"`},
		{"condition not met", "demo-score: pass if model strong-1\ndemo-score: fail\n## The run\n[demo agent] running as model weak-1\n", `"classification":"fail"`},
		// The script's own text is not the run's.
		{"not its own line", "- demo-score: pass if \"model strong-1\"\n", ""},
		{"quoted, in a list", "- demo-score: pass if \"strong-1\"\n- demo-score: fail\nstrong-1 here", `"classification":"pass"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := demoScore(tc.prompt)
			if tc.want == "" {
				if ok {
					t.Fatalf("an answer: %s", got)
				}
				return
			}
			if !ok || !strings.Contains(got, tc.want) {
				t.Fatalf("%q %v, want %s", got, ok, tc.want)
			}
		})
	}
}

func TestRegressionsSection(t *testing.T) {
	p := "# Self-improvement\n\nText.\n\n## Regressions addressed\n\n- run a: FAILED\n- run b: bad\n\n## After\n\nmore"
	if got := regressionsSection(p); got != "## Regressions addressed\n\n- run a: FAILED\n- run b: bad" {
		t.Fatalf("%q", got)
	}
	if regressionsSection("nothing") != "" {
		t.Fatal("a section from nothing")
	}
}
