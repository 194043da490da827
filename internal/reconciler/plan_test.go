package reconciler_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"factory"

	"factory/internal/reconciler"
	"factory/internal/schema"
)

// repo writes a factory repository into a temp dir.
func repo(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func load(t testing.TB, files map[string]string) *reconciler.Desired {
	t.Helper()
	snap, err := reconciler.DirSource{Root: repo(t, files)}.Fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d, ds := reconciler.Load(snap)
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	return d
}

func state() *factory.State {
	return &factory.State{Factory: &factory.Factory{Name: "acme"}, Webhooks: map[string]*factory.Webhook{},
		Automations: map[string]*factory.Automation{}, Pins: map[string]string{}, Secrets: map[string]*factory.Secret{}}
}

func hook(key, uid string, spec factory.WebhookSpec) *factory.Webhook {
	return &factory.Webhook{Factory: "acme", Key: key, UID: uid, Spec: spec, SecretName: "webhook-acme-" + key, SecretVersion: 1}
}

const auto = "---\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [%s]\n---\nGo.\n"

func automation(uid string) string { return strings.Replace(auto, "%s", uid, 1) }

func summary(p *reconciler.Plan) string {
	var parts []string
	for _, c := range p.Changes {
		s := c.Action + " " + c.Kind + " " + c.Name
		if len(c.Keys) > 0 {
			s += " (" + strings.Join(c.Keys, ",") + ")"
		}
		parts = append(parts, s)
	}
	for _, d := range p.Diagnostics {
		sev := "E"
		if d.Severity == schema.Warning {
			sev = "W"
		}
		parts = append(parts, sev+" "+d.String())
	}
	return strings.Join(parts, "\n")
}

const planUID = "wh_0000000000000000gh01"

// planCases are trees and states, and the plan each gives: its changes,
// then its diagnostics (E error, W warning).
var planCases = []struct {
	name  string
	files map[string]string
	cur   func() *factory.State // nil: stateless
	want  string
}{
	{
		name:  "stateless: creates, and references are warnings",
		files: map[string]string{"webhooks/gh.yaml": "secretName: s\n", "automations/a.md": automation(planUID)},
		want: "create webhook gh\ncreate automation a\n" +
			"W automations/a.md:6:21: /triggers/0/filter/webhook_ids/0: " + planUID + " is not checked: this dry-run has no state (use --data or --server to check webhook UIDs)\n" +
			`W webhooks/gh.yaml:1:13: /secretName: secret "s" is not checked: this dry-run has no state (use --data or --server)`,
	},
	{
		name:  "with state: unknown UID and missing secret are errors",
		files: map[string]string{"webhooks/gh.yaml": "secretName: s\n", "automations/a.md": automation(planUID)},
		cur:   state,
		want: "create webhook gh\ncreate automation a\n" +
			`E automations/a.md:6:21: /triggers/0/filter/webhook_ids/0: no webhook of factory "acme" has UID ` + planUID + " (factory status lists them; a new webhook gets its UID when it first applies)\n" +
			`E webhooks/gh.yaml:1:13: /secretName: secret "s" does not exist: create it first (factory secrets create s --from-stdin)`,
	},
	{
		name:  "a pinned UID is known before apply",
		files: map[string]string{"webhooks/gh.yaml": "", "automations/a.md": automation(planUID)},
		cur: func() *factory.State {
			st := state()
			st.Pins["gh"] = planUID
			return st
		},
		want: "create webhook gh\ncreate automation a",
	},
	{
		name:  "unchanged is a noop; an edit lists its keys",
		files: map[string]string{"webhooks/gh.yaml": "", "webhooks/ci.yaml": "description: new\nenabled: false\n"},
		cur: func() *factory.State {
			st := state()
			st.Webhooks["gh"] = hook("gh", planUID, factory.WebhookSpec{Name: "gh", AuthMode: "token", Enabled: true})
			st.Webhooks["ci"] = hook("ci", "wh_0000000000000000ci01", factory.WebhookSpec{Name: "ci", AuthMode: "token", Enabled: true})
			return st
		},
		want: "update webhook ci (description,enabled)\nnoop webhook gh",
	},
	{
		name:  "rotation is picked up as an update",
		files: map[string]string{"webhooks/gh.yaml": ""},
		cur: func() *factory.State {
			st := state()
			st.Webhooks["gh"] = hook("gh", planUID, factory.WebhookSpec{Name: "gh", AuthMode: "token", Enabled: true})
			st.Secrets["webhook-acme-gh"] = &factory.Secret{Name: "webhook-acme-gh", Version: 2, Generated: true}
			return st
		},
		want: "update webhook gh (secret (rotated))",
	},
	{
		name:  "rename: delete and create, with a warning naming the selectors",
		files: map[string]string{"webhooks/github.yaml": "", "automations/a.md": automation(planUID)},
		cur: func() *factory.State {
			st := state()
			st.Webhooks["gh"] = hook("gh", planUID, factory.WebhookSpec{Name: "gh", AuthMode: "token", Enabled: true})
			return st
		},
		want: "create webhook github\ndelete webhook gh\ncreate automation a\n" +
			"W automations/a.md:6:21: /triggers/0/filter/webhook_ids/0: " + planUID + " is webhooks/gh.yaml, which this revision deletes: this trigger will not fire for it\n" +
			"W webhooks/github.yaml:1:1: looks like a rename of webhooks/gh.yaml: renaming is a delete and a create, so " + planUID + " stops answering (404) and this webhook gets a new UID and secret; automations still selecting " + planUID + ": a",
	},
	{
		name:  "a broken file is neither applied nor deleted",
		files: map[string]string{"webhooks/gh.yaml": "authMode: nope\n", "automations/a.md": automation(planUID)},
		cur: func() *factory.State {
			st := state()
			st.Webhooks["gh"] = hook("gh", planUID, factory.WebhookSpec{Name: "gh", AuthMode: "token", Enabled: true})
			return st
		},
		want: "create automation a\nE webhooks/gh.yaml:1:11: /authMode: must be one of token, url_token, signature",
	},
}

func TestMakePlan(t *testing.T) {
	for _, tt := range planCases {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := reconciler.DirSource{Root: repo(t, tt.files)}.Fetch(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			d, ds := reconciler.Load(snap)
			var cur *factory.State
			if tt.cur != nil {
				cur = tt.cur()
			}
			p := reconciler.MakePlan("acme", d, cur)
			p.Diagnostics = append(p.Diagnostics, ds...)
			p.Diagnostics.Sort()
			if got := summary(p); got != tt.want {
				t.Fatalf("got\n%s\n\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestPlanIsPure(t *testing.T) {
	d := load(t, map[string]string{"webhooks/gh.yaml": "", "automations/a.md": automation("wh_0000000000000000gh01")})
	st := state()
	st.Pins["gh"] = "wh_0000000000000000gh01"
	a, b := reconciler.MakePlan("acme", d, st), reconciler.MakePlan("acme", d, st)
	if summary(a) != summary(b) || len(st.Webhooks) != 0 {
		t.Fatal("MakePlan is not a pure function of its inputs")
	}
}
