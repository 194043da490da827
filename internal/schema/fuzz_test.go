package schema_test

import (
	"strings"
	"testing"

	"factory/internal/schema"
)

// FuzzParseWebhook: any bytes give a webhook or diagnostics, never a panic,
// and every diagnostic has a position inside the file.
func FuzzParseWebhook(f *testing.F) {
	for _, s := range []string{"", "authMode: token\n", "authMode: signature\nsignatureScheme: github\nsecretName: s\n",
		"a: &a [1]\nb: *a\n", "authMode: [x\n", "- 1\n", "enabled: yes\n", "\xff\xfe", "a: 1\na: 2\n", "---\n---\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, ds := schema.ParseWebhook("webhooks/w.yaml", "w", data)
		if (w == nil) == (len(ds) == 0) {
			t.Fatalf("webhook %v with %d diagnostics", w, len(ds))
		}
		checkPositions(t, data, ds)
	})
}

// FuzzParseAutomation covers the front-matter split and the loader.
func FuzzParseAutomation(f *testing.F) {
	for _, s := range []string{automationHead + "---\nDo it.\n", "---\n---\n", "---\ntriggers: x\n---\np",
		automationHead + "      payload: {a: {b: [1]}, c: {exists: true}}\n---\np\n", "no front\n", "---\r\na: 1\r\n---\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, ds := schema.ParseAutomation("automations/a.md", "a", data)
		if (a == nil) == (len(ds) == 0) {
			t.Fatalf("automation %v with %d diagnostics", a, len(ds))
		}
		if a != nil && strings.TrimSpace(a.Prompt) == "" {
			t.Fatal("accepted an empty prompt")
		}
		checkPositions(t, data, ds)
	})
}

// FuzzSplitFrontMatter: the parts are always pieces of the input, in order.
func FuzzSplitFrontMatter(f *testing.F) {
	for _, s := range []string{"---\na\n---\nb", "---", "", "---\r\n---\r\n", "\xef\xbb\xbf---\n---\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		front, fl, body, bl, err := schema.SplitFrontMatter(data)
		if err != nil {
			return
		}
		if !strings.Contains(string(data), string(front)) || !strings.HasSuffix(string(data), string(body)) {
			t.Fatalf("parts are not from the input: %q %q", front, body)
		}
		if fl != 2 || bl < 3 || bl > strings.Count(string(data), "\n")+2 {
			t.Fatalf("lines %d %d for %q", fl, bl, data)
		}
	})
}

// FuzzPositions feeds arbitrary pointers to the position mapper of a
// document: it must always answer a position inside the file.
func FuzzPositions(f *testing.F) {
	f.Add("a: {b: [1, {c: 2}]}\nd: &x [1]\ne: *x\n", "/a/b/1/c")
	f.Add("- 1\n- [2]\n", "/1/0")
	f.Add("a: 1\n", "/~1/~0/x/99999999999999999999")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, yaml, pointer string) {
		doc, err := schema.ParseDocument("f.yaml", []byte(yaml))
		if err != nil {
			return
		}
		lines := yamlLines(yaml)
		for _, pos := range [][2]int{pair(doc.Pos(pointer)), pair(doc.KeyPos(pointer))} {
			if pos[0] < 1 || pos[0] > lines || pos[1] < 1 {
				t.Fatalf("position %v outside a %d-line file for %q", pos, lines, pointer)
			}
		}
	})
}

func pair(a, b int) [2]int { return [2]int{a, b} }

func checkPositions(t *testing.T, data []byte, ds schema.Diagnostics) {
	t.Helper()
	lines := yamlLines(string(data))
	for _, d := range ds {
		if d.Line < 1 || d.Line > lines+1 || d.Column < 1 {
			t.Fatalf("diagnostic outside the file (%d lines): %s", lines, d)
		}
		if d.Message == "" {
			t.Fatalf("diagnostic without a message: %+v", d)
		}
	}
}

// yamlLines counts lines as YAML does: "\r\n", "\r" and "\n" all break.
func yamlLines(s string) int {
	return strings.Count(strings.ReplaceAll(s, "\r\n", "\n"), "\n") + strings.Count(strings.ReplaceAll(s, "\r\n", ""), "\r") + 1
}

// FuzzParseResource covers the v1alpha1 documents with front matter (an
// agent) and without (a runner): a resource or errors, never a panic, and
// every diagnostic inside the file.
func FuzzParseResource(f *testing.F) {
	for _, s := range []string{"---\nagentType: FOREMAN\nmodel: auto\n---\nPrompt.\n", "---\nharness: {type: codex, auth: {source: managedSecret}}\n---\n",
		"platform:\n  linux:\n    dockerImage: debian\nsetupCommands: [make]\n", "---\nagentTyp: X\n---\n", "instanceShape: {vcpus: 1e400}\n", "---\n- 1\n---\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, k := range []struct {
			kind  schema.Kind
			front bool
		}{{schema.KindAgent, true}, {schema.KindRunner, false}, {schema.KindScorer, true}, {schema.KindSuite, false}} {
			r, ds := schema.ParseResource(k.kind, "f", "f", data, k.front, k.kind == schema.KindScorer)
			if (r == nil) != ds.HasErrors() {
				t.Fatalf("%s: resource %v with diagnostics %v", k.kind, r, ds)
			}
			checkPositions(t, data, ds)
		}
	})
}

// FuzzParseSkill: a SKILL.md gives a skill or errors, never a panic.
func FuzzParseSkill(f *testing.F) {
	for _, s := range []string{"---\nname: s\ndescription: d\n---\nbody\n", "no front matter", "---\nname: [x\n---\n", "---\n---\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, ds := schema.ParseSkill("skills/s/SKILL.md", "a/s", data)
		if (r == nil) != ds.HasErrors() {
			t.Fatalf("skill %v with diagnostics %v", r, ds)
		}
		checkPositions(t, data, ds)
	})
}
