package factory

import (
	"strings"
	"testing"
)

// FuzzParsePath: every path is a definition, an error, or nothing; a
// definition always has a kind and a name from the path.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"factory.yaml", "agents/a/agent.md", "agents/a/skills/s/SKILL.md", "agents/a/skills/s/x/y.txt",
		"automations/a.md", "automations/a/automation.md", "benchmarks/s/tasks/t.yaml", "skills/s", "webhooks/", "/", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		d, ok, err := ParsePath(p)
		switch {
		case !ok && err != nil:
			t.Fatalf("%q: an error for a path that is no definition", p)
		case ok && err == nil && d.Kind == "":
			t.Fatalf("%q: a definition without a kind", p)
		case ok && err == nil && d.Kind != FileSettings && (d.Name == "" && !strings.HasSuffix(p, "/") || !strings.Contains(p, d.Name)):
			t.Fatalf("%q: name %q is not from the path", p, d.Name)
		}
	})
}
