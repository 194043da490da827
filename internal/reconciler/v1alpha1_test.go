package reconciler_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/schema"
	"factory/internal/secrets"
)

// The v1alpha1 corpus (testdata/v1alpha1): each archive is a factory tree
// written from docs/spec/v1alpha1.md, plus sections the test reads and the
// loader never sees (want-*: names no tree uses).
//
//   - valid/*.txtar: trees that must load without errors. want-plan lists
//     the changes of the first apply ("create agent foreman"); the tree is
//     applied to a real store, shows each resource in status with a UID,
//     and a second plan is empty. want-warnings, when present, lists the
//     warnings exactly; otherwise there must be none. want-strict-clean
//     marks a tree that uses no extension: --strict passes it.
//   - broken/*.txtar: one broken rule each; want lists every diagnostic
//     exactly ("error: file:line:col: path: message").
//
// Sections named secret-<name> create that managed secret first;
// pin-<webhook> pins the UID the webhook takes (as webhooks import does).

type corpusTree struct {
	dir      string
	sections map[string]string
	secrets  map[string]string
	pins     map[string]string // webhook key → the UID it takes
}

func loadArchive(t *testing.T, file string) corpusTree {
	t.Helper()
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tree := corpusTree{dir: t.TempDir(), sections: map[string]string{}, secrets: map[string]string{}, pins: map[string]string{}}
	for _, f := range ar.Files {
		switch {
		case strings.HasPrefix(f.Name, "want"):
			tree.sections[f.Name] = string(f.Data)
		case strings.HasPrefix(f.Name, "secret-"):
			tree.secrets[strings.TrimPrefix(f.Name, "secret-")] = strings.TrimSpace(string(f.Data))
		case strings.HasPrefix(f.Name, "pin-"):
			tree.pins[strings.TrimPrefix(f.Name, "pin-")] = strings.TrimSpace(string(f.Data))
		default:
			p := filepath.Join(tree.dir, filepath.FromSlash(f.Name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tree
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func diagLines(ds schema.Diagnostics, sev schema.Severity) []string {
	var out []string
	for _, d := range ds {
		if d.Severity == sev {
			out = append(out, d.String())
		}
	}
	return out
}

func TestV1Alpha1ValidCorpus(t *testing.T) {
	files, _ := filepath.Glob("testdata/v1alpha1/valid/*.txtar")
	if len(files) < 4 {
		t.Fatalf("the valid corpus is missing: %v", files)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			tree := loadArchive(t, file)
			a := openApplier(t, t.TempDir())
			defer a.Store.Close()
			for name, value := range tree.secrets {
				if _, err := secretsCreate(a, name, value); err != nil {
					t.Fatal(err)
				}
			}
			b := a.Store.NewBatch()
			for key, uid := range tree.pins {
				b.PinWebhookUID("corpus", key, uid)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			c, err := reconciler.Check(context.Background(), reconciler.DirSource{Root: tree.dir}, "corpus", a.Store)
			if err != nil {
				t.Fatal(err)
			}
			if errs := diagLines(c.Plan.Diagnostics, schema.Error); len(errs) > 0 {
				t.Fatalf("a valid tree has errors:\n%s", strings.Join(errs, "\n"))
			}
			if got, want := diagLines(c.Plan.Diagnostics, schema.Warning), lines(tree.sections["want-warnings"]); !slices.Equal(got, want) {
				t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			var got []string
			for _, ch := range c.Plan.Changes {
				got = append(got, ch.Action+" "+ch.Kind+" "+ch.Name)
			}
			slices.Sort(got)
			want := lines(tree.sections["want-plan"])
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if _, outcome, err := a.Sync(context.Background(), "corpus", reconciler.DirSource{Root: tree.dir}); err != nil || outcome != reconciler.Applied {
				t.Fatalf("apply: %v %v", outcome, err)
			}
			checkStatus(t, a, c.Plan)
			again, err := reconciler.Check(context.Background(), reconciler.DirSource{Root: tree.dir}, "corpus", a.Store)
			if err != nil || again.Plan.HasChanges() {
				t.Fatalf("a second plan changes something: %v %+v", err, again.Plan.Changes)
			}
			// want-strict-clean: a pure v1alpha1 tree, which --strict passes.
			if _, pure := tree.sections["want-strict-clean"]; pure {
				if n := again.Strict(); n != 0 {
					t.Fatalf("--strict finds %d extensions:\n%s", n, strings.Join(diagLines(again.Plan.Diagnostics, schema.Error), "\n"))
				}
			}
		})
	}
}

// checkStatus reads status as `status --output json` prints it and finds
// every planned definition there with a UID of its kind.
func checkStatus(t *testing.T, a *reconciler.Applier, p *reconciler.Plan) {
	t.Helper()
	f, err := a.Store.Factory("corpus")
	if err != nil {
		t.Fatal(err)
	}
	st, err := reconciler.Status(a.Store, f, factory.DefaultPublicURL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(st)
	var out map[string][]struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
		ID   string `json:"id"`
	}
	_ = json.Unmarshal(b, &out) // non-list keys do not decode into lists: skipped
	field := map[string]string{"webhook": "webhooks", "automation": "automations", factory.ResourceAgent: "agents",
		factory.ResourceRunner: "runners", factory.ResourceSkill: "skills", factory.ResourceScorer: "scorers",
		factory.ResourceSuite: "benchmark_suites"}
	prefix := map[string]string{"webhook": factory.PrefixWebhook, "automation": factory.PrefixAutomation}
	for _, ch := range p.Changes {
		want := prefix[ch.Kind]
		if want == "" {
			want = factory.ResourcePrefix(ch.Kind)
		}
		found := false
		for _, e := range out[field[ch.Kind]] {
			uid := e.UID + e.ID
			if e.Name == ch.Name && strings.HasPrefix(uid, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("status --output json has no %s %s with a %s UID:\n%s", ch.Kind, ch.Name, want, b)
		}
	}
}

func TestV1Alpha1BrokenCorpus(t *testing.T) {
	files, _ := filepath.Glob("testdata/v1alpha1/broken/*.txtar")
	if len(files) < 20 {
		t.Fatalf("the broken corpus is missing: %v", files)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			tree := loadArchive(t, file)
			c, err := reconciler.Check(context.Background(), reconciler.DirSource{Root: tree.dir}, "corpus", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, strict := tree.sections["want-strict"]; strict {
				c.Strict()
			}
			ds := c.Plan.Diagnostics
			var got []string
			for _, d := range ds {
				level := "error"
				if d.Severity == schema.Warning {
					level = "warning"
				}
				got = append(got, level+": "+d.String())
			}
			want := lines(tree.sections["want"] + tree.sections["want-strict"])
			if os.Getenv("UPDATE_CORPUS") != "" {
				rewriteWant(t, file, got)
				return
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if c.Plan.Valid() && len(diagLines(ds, schema.Error)) == 0 {
				t.Fatal("a broken tree must not be valid")
			}
		})
	}
}

func secretsCreate(a *reconciler.Applier, name, value string) (*factory.Secret, error) {
	sec, _, err := secrets.Create(a.Store, a.Keyring, name, []byte(value), false, time.Now())
	return sec, err
}

// rewriteWant replaces an archive's want section with got: UPDATE_CORPUS=1
// go test -run BrokenCorpus, then read every changed line before keeping it.
func rewriteWant(t *testing.T, file string, got []string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	name := "want"
	var kept []txtar.File
	for _, f := range ar.Files {
		if f.Name == "want-strict" {
			name = f.Name
		}
		if !strings.HasPrefix(f.Name, "want") {
			kept = append(kept, f)
		}
	}
	ar.Files = append(kept, txtar.File{Name: name, Data: []byte(strings.Join(got, "\n") + "\n")})
	if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The bundled examples stay valid: the v1alpha1 one uses no extension, and
// --strict finds the flat one's nine.
func TestBundledExamples(t *testing.T) {
	for _, ex := range []struct {
		dir        string
		extensions int
	}{{"../../examples/v1alpha1", 0}, {"../../examples/factory", 9}} {
		c, err := reconciler.Check(context.Background(), reconciler.DirSource{Root: ex.dir}, "example", nil)
		if err != nil {
			t.Fatal(err)
		}
		if errs := diagLines(c.Plan.Diagnostics, schema.Error); len(errs) > 0 {
			t.Fatalf("%s: %s", ex.dir, strings.Join(errs, "\n"))
		}
		for _, w := range diagLines(c.Plan.Diagnostics, schema.Warning) {
			if !strings.Contains(w, "is not checked: this dry-run has no state") {
				t.Errorf("%s: unexpected warning %s", ex.dir, w)
			}
		}
		if n := c.Strict(); n != ex.extensions {
			t.Errorf("%s: %d uses of extensions, want %d:\n%s", ex.dir, n, ex.extensions, strings.Join(diagLines(c.Plan.Diagnostics, schema.Error), "\n"))
		}
	}
}
