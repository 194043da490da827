package reconciler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"factory"
	"factory/internal/schema"
)

// resources plans the create, update or deletion of each agent, runner,
// skill, scorer and benchmark suite. Changed keys are the file's top-level
// keys, plus "prompt" (the body), "files" (a skill's other files) and
// "tasks" (a suite's task files).
func (pl *planner) resources() {
	p, cur := pl.plan, pl.cur
	for _, kind := range factory.ResourceKinds {
		desired := map[string]bool{}
		for _, r := range pl.d.Resources[kind] {
			desired[r.Key] = true
			want := pl.d.Record(kind, r)
			c := Change{Kind: kind, Name: r.Key, File: r.DocFile(), Keys: []string{}}
			if old := cur.Resource(kind, r.Key); old == nil {
				c.Action = ActionCreate
			} else {
				uid := old.UID
				c.UID = &uid
				c.Keys = resourceDiff(old, want)
				c.Action = updateOrNoop(c.Keys)
			}
			p.Changes = append(p.Changes, c)
		}
		for _, old := range cur.SortedResources(kind) {
			if !desired[old.Key] && !pl.d.BrokenNames[kind+"/"+old.Key] {
				uid := old.UID
				p.Changes = append(p.Changes, Change{Action: ActionDelete, Kind: kind, Name: old.Key, UID: &uid, File: old.File, Keys: []string{}})
			}
		}
	}
}

// Record is the applied form of a resource of the revision, without its
// identity (factory, UID, times): what the plan compares and apply writes.
func (d *Desired) Record(kind string, r *schema.Resource) *factory.Resource {
	rec := &factory.Resource{Kind: kind, Key: r.Key, File: r.DocFile(), Spec: r.Spec(), Body: r.Body}
	switch kind {
	case factory.ResourceSkill:
		if files := d.SkillFiles[r.Key]; len(files) > 0 {
			rec.Files = files
		}
	case factory.ResourceSuite:
		if tasks := d.Tasks[r.Key]; len(tasks) > 0 {
			rec.Files = map[string][]byte{}
			for _, t := range tasks {
				rec.Files[t.Key] = t.Spec()
			}
		}
	}
	return rec
}

func resourceDiff(old, cur *factory.Resource) []string {
	keys := changedKeys(rawMap(old.Spec), rawMap(cur.Spec))
	if keys == nil {
		keys = []string{}
	}
	if old.Body != cur.Body {
		keys = append(keys, "prompt")
	}
	if !maps.EqualFunc(old.Files, cur.Files, bytes.Equal) {
		if cur.Kind == factory.ResourceSuite {
			keys = append(keys, "tasks/")
		} else {
			keys = append(keys, "files")
		}
	}
	if old.File != cur.File {
		keys = append(keys, "file")
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func rawMap(b json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	return m
}

// grantedSecrets warns, with state, about each managed secret that the
// factory, its agent defaults, an agent or an automation grants to runs
// (secrets, or a harness's managedSecret auth) and that does not exist:
// runs of those agents fail (secret_unavailable) until it is created.
func (pl *planner) grantedSecrets() {
	if pl.plan.Stateless {
		return
	}
	check := func(doc *schema.Document, ptr string, ex *factory.ExecSettings, names []string) {
		for i, n := range names {
			if pl.cur.Secrets[n] == nil {
				pl.plan.Diagnostics = append(pl.plan.Diagnostics, doc.Diag(schema.Warning, fmt.Sprintf("%s/secrets/%d", ptr, i),
					fmt.Sprintf("secret %q does not exist: runs granted it fail until it is created (factory secrets create %s --from-stdin)", n, n)))
			}
		}
		if ex != nil && ex.Harness != nil && ex.Harness.Auth != nil && ex.Harness.Auth.SecretName != "" && pl.cur.Secrets[ex.Harness.Auth.SecretName] == nil {
			n := ex.Harness.Auth.SecretName
			pl.plan.Diagnostics = append(pl.plan.Diagnostics, doc.Diag(schema.Warning, ptr+"/harness/auth/secretName",
				fmt.Sprintf("secret %q does not exist: runs on this harness fail until it is created (factory secrets create %s --from-stdin)", n, n)))
		}
	}
	if doc := pl.d.SettingsDoc; doc != nil {
		check(doc, "", nil, pl.d.Settings.Secrets)
		if d := pl.d.Settings.AgentDefaults; d != nil {
			check(doc, "/agentDefaults", d, d.Secrets)
		}
	}
	for _, a := range pl.d.Resources[factory.ResourceAgent] {
		if ex := schema.ExecFrom(a.Value); ex != nil {
			check(a.Doc, "", ex, ex.Secrets)
		}
	}
	for _, a := range pl.d.Automations {
		if a.Exec != nil {
			check(a.Doc, "", a.Exec, a.Exec.Secrets)
		}
	}
}
