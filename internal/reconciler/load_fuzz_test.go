package reconciler_test

import (
	"bytes"
	"strings"
	"testing"

	"factory/internal/reconciler"
)

// FuzzLoadTree loads arbitrary trees through the whole pipeline of a
// validation request: the checks across files must never panic, and every
// diagnostic names a file. The input is paths and contents alternating,
// each ended by a NUL (txtar's parser itself panics on some inputs).
func FuzzLoadTree(f *testing.F) {
	tree := func(archive string) []byte {
		var b []byte
		for _, part := range strings.Split(archive, "-- ")[1:] {
			name, content, _ := strings.Cut(part, " --\n")
			b = append(append(append(append(b, name...), 0), content...), 0)
		}
		return b
	}
	f.Add(tree("-- factory.yaml --\nschemaVersion: v1alpha1\nname: x\nrepositories: []\nagentDefaults: {model: a, runner: r}\n" +
		"-- agents/a/agent.md --\n---\nagentType: FOREMAN\n---\nx\n-- runners/r.yaml --\nplatform: {linux: {dockerImage: d}}\n" +
		"-- benchmarks/s/suite.yaml --\nagent: a\nconfigurations: [{name: c, baseline: true}]\ntasks: [t]\n-- benchmarks/s/tasks/t.yaml --\ntitle: t\nprompt: p\nsuccessCriteria: s\n"))
	f.Add(tree("-- automations/a.md --\n---\ntriggers: [{provider: github, event: push, filter: {paths: [x]}}]\n---\nx\n-- automations/a/automation.md --\nx\n"))
	f.Add(tree("-- skills/s/x --\n-- agents/g/skills/s/SKILL.md --\n---\nname: t\n---\n-- scorers/s/scorer.md --\n---\nlabels: [{value: a, score: 1}]\npassingScore: 2\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		files := map[string][]byte{}
		parts := bytes.Split(data, []byte{0})
		for i := 0; i+1 < len(parts); i += 2 {
			files[string(parts[i])] = parts[i+1]
		}
		snap, err := reconciler.SnapshotOf(files)
		if err != nil {
			return
		}
		_, ds := reconciler.Load(snap)
		for _, d := range ds {
			if d.File == "" || d.Message == "" {
				t.Fatalf("a diagnostic without a file or a message: %+v", d)
			}
		}
	})
}
