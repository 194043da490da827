package reconciler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"factory"

	"factory/internal/schema"
	"factory/internal/trigger"
)

// Actions of a change (docs/spec/cli.md).
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionDelete = "delete"
	ActionNoop   = "noop"
)

// Kinds of a change.
const (
	KindWebhook    = "webhook"
	KindAutomation = "automation"
)

// Change is what applying a revision does to one webhook or automation.
type Change struct {
	Action string   `json:"action"`
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	UID    *string  `json:"uid"`  // nil until known (a create without a pinned UID)
	Keys   []string `json:"keys"` // changed keys of an update; never secret values
	File   string   `json:"-"`
	// Schedules are a created or updated automation's schedule triggers
	// and the next instant each fires for.
	Schedules []ScheduleFire `json:"schedules,omitempty"`
}

// ScheduleFire is a schedule trigger in a plan.
type ScheduleFire struct {
	Name     string    `json:"name"`
	Cron     string    `json:"cron_schedule"`
	NextFire time.Time `json:"next_fire"`
}

// Plan is the difference between a factory revision and the state, with
// every diagnostic of the revision. The server applies exactly what
// `reconcile --dry-run` shows, because both come from MakePlan.
type Plan struct {
	Factory  string
	Revision string
	// Stateless is true when there was no state to compare with: every
	// webhook is a create, and references can only be warned about.
	Stateless bool
	// NewFactory is true when the factory was never applied.
	NewFactory bool
	// SettingsChanged lists the changed keys of factory.yaml.
	SettingsChanged []string
	Changes         []Change
	Diagnostics     schema.Diagnostics
}

// Valid reports whether the revision can be applied.
func (p *Plan) Valid() bool { return !p.Diagnostics.HasErrors() }

// HasChanges reports whether applying would change the state.
func (p *Plan) HasChanges() bool {
	if p.NewFactory || len(p.SettingsChanged) > 0 {
		return true
	}
	for _, c := range p.Changes {
		if c.Action != ActionNoop {
			return true
		}
	}
	return false
}

// MakePlan compares a desired revision with the current state of the
// factory. cur is nil for a dry-run without state. It reads nothing and
// writes nothing: the same inputs always give the same plan.
//
// It runs the steps of planSteps in order, each adding changes or
// diagnostics to the plan, as a Flux reconciler runs its sub-steps.
func MakePlan(factoryName string, d *Desired, cur *factory.State) *Plan {
	p := &Plan{Factory: factoryName, Revision: d.Revision, Stateless: cur == nil}
	if cur == nil {
		cur = factory.NewState()
	}
	pl := &planner{plan: p, d: d, cur: cur, desired: map[string]*schema.Webhook{},
		liveAfter: map[string]string{}, goneAfter: map[string]string{}, selectors: map[string][]string{}}
	for _, w := range d.Webhooks {
		pl.desired[w.Key] = w
	}
	for _, step := range planSteps {
		step.run(pl)
	}
	p.Diagnostics.Sort()
	return p
}

// planSteps are MakePlan's steps, in order: later steps read what earlier
// ones found (which UIDs answer after the revision, which automations
// select them, which webhooks are new).
var planSteps = []struct {
	name string
	run  func(*planner)
}{
	{"settings", (*planner).settings},
	{"endpoints", (*planner).endpoints},
	{"webhooks", (*planner).webhooks},
	{"automations", (*planner).automations},
	{"resources", (*planner).resources},
	{"granted secrets", (*planner).grantedSecrets},
	{"selectors", (*planner).selectorsOf},
	{"renames", (*planner).renames},
}

// planner is the working state of one MakePlan.
type planner struct {
	plan    *Plan
	d       *Desired
	cur     *factory.State
	desired map[string]*schema.Webhook // by key
	// liveAfter maps the UID of each webhook that exists after the apply
	// to its key; goneAfter maps each UID that will not answer to why.
	liveAfter, goneAfter map[string]string
	selectors            map[string][]string // uid → keys of the automations selecting it
	created              []*schema.Webhook
}

// broken reports whether a definition's file has errors: it is neither
// applied nor deleted.
func (pl *planner) broken(file string) bool { return pl.d.Broken[file] }

// settings lists the changed keys of factory.yaml.
func (pl *planner) settings() {
	p, cur := pl.plan, pl.cur
	p.NewFactory = cur.Factory == nil
	if cur.Factory == nil {
		return
	}
	p.SettingsChanged = changedKeys(&cur.Factory.Settings, &pl.d.Settings)
}

// changedKeys lists the top-level JSON keys whose values differ between
// two records, in key order.
func changedKeys(old, cur any) []string {
	var a, b map[string]json.RawMessage
	x, _ := json.Marshal(old)
	y, _ := json.Marshal(cur)
	_ = json.Unmarshal(x, &a)
	_ = json.Unmarshal(y, &b)
	var keys []string
	for k, v := range b {
		if !bytes.Equal(a[k], v) {
			keys = append(keys, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// endpoints finds which UIDs will answer after this revision, and which
// stop, and why.
func (pl *planner) endpoints() {
	cur := pl.cur
	for _, w := range cur.Webhooks {
		if _, ok := pl.desired[w.Key]; ok || pl.broken(factory.WebhookFile(w.Key)) {
			pl.liveAfter[w.UID] = w.Key
		} else {
			pl.goneAfter[w.UID] = factory.WebhookFile(w.Key) + ", which this revision deletes"
		}
	}
	for key, uid := range cur.Pins {
		if _, ok := pl.desired[key]; ok && cur.Webhooks[key] == nil {
			pl.liveAfter[uid] = key
		}
	}
	for _, w := range cur.DeletedWebhooks {
		pl.goneAfter[w.UID] = factory.WebhookFile(w.Key) + ", deleted earlier"
	}
}

// webhooks plans each webhook's create, update or deletion, and checks its
// secret.
func (pl *planner) webhooks() {
	p, cur := pl.plan, pl.cur
	for _, w := range pl.d.Webhooks {
		c := Change{Kind: KindWebhook, Name: w.Key, File: w.Doc.File, Keys: []string{}}
		if old := cur.Webhooks[w.Key]; old == nil {
			c.Action = ActionCreate
			if uid, ok := cur.Pins[w.Key]; ok {
				c.UID = &uid
			}
			pl.created = append(pl.created, w)
		} else {
			uid := old.UID
			c.UID = &uid
			c.Keys = webhookDiff(&old.Spec, &w.WebhookSpec)
			if sec := cur.Secrets[secretNameOf(p.Factory, w)]; sec != nil && old.SecretName == sec.Name && sec.Version != old.SecretVersion {
				c.Keys = append(c.Keys, "secret (rotated)")
			}
			c.Action = updateOrNoop(c.Keys)
		}
		p.Changes = append(p.Changes, c)
		p.Diagnostics = append(p.Diagnostics, checkSecret(p, w, cur)...)
	}
	for _, old := range cur.SortedWebhooks() {
		if pl.desired[old.Key] == nil && !pl.broken(factory.WebhookFile(old.Key)) {
			uid := old.UID
			p.Changes = append(p.Changes, Change{Action: ActionDelete, Kind: KindWebhook, Name: old.Key, UID: &uid,
				File: factory.WebhookFile(old.Key), Keys: []string{}})
		}
	}
}

func updateOrNoop(keys []string) string {
	if len(keys) == 0 {
		return ActionNoop
	}
	return ActionUpdate
}

// automations plans each automation's create, update or deletion.
func (pl *planner) automations() {
	p, cur := pl.plan, pl.cur
	desired := map[string]bool{}
	for _, a := range pl.d.Automations {
		desired[a.Key] = true
		c := Change{Kind: KindAutomation, Name: a.Key, File: a.Doc.File, Keys: []string{}, Schedules: scheduleFires(a.AutomationSpec, time.Now())}
		if old := cur.Automations[a.Key]; old == nil {
			c.Action = ActionCreate
		} else {
			uid := old.UID
			c.UID = &uid
			c.Keys = automationDiff(&old.Spec, &a.AutomationSpec)
			if automationFile(old) != a.Doc.File {
				c.Keys = append(c.Keys, "file")
			}
			c.Action = updateOrNoop(c.Keys)
		}
		p.Changes = append(p.Changes, c)
	}
	for _, old := range cur.SortedAutomations() {
		if !desired[old.Key] && !pl.d.BrokenNames[KindAutomation+"/"+old.Key] {
			uid := old.UID
			p.Changes = append(p.Changes, Change{Action: ActionDelete, Kind: KindAutomation, Name: old.Key, UID: &uid,
				File: automationFile(old), Keys: []string{}})
		}
	}
}

// selectorsOf checks every webhook UID a trigger selects: one that no
// webhook has is an error, one that stops answering a warning. Without
// state, each UID is warned about once, where it is first selected: a
// thousand identical warnings would bury the real ones.
func (pl *planner) selectorsOf() {
	p := pl.plan
	type firstUse struct {
		doc *schema.Document
		ptr string
	}
	unchecked := map[string]firstUse{}
	var uncheckedOrder []string
	for _, a := range pl.d.Automations {
		for _, ref := range trigger.WebhookRefs(a.Triggers) {
			uid, ptr := ref.UID, ref.Pointer
			pl.selectors[uid] = append(pl.selectors[uid], a.Key)
			switch {
			case p.Stateless:
				if _, seen := unchecked[uid]; !seen {
					unchecked[uid] = firstUse{a.Doc, ptr}
					uncheckedOrder = append(uncheckedOrder, uid)
				}
			case pl.liveAfter[uid] != "":
			case pl.goneAfter[uid] != "":
				p.Diagnostics = append(p.Diagnostics, a.Doc.Diag(schema.Warning, ptr,
					fmt.Sprintf("%s is %s: this trigger will not fire for it", uid, pl.goneAfter[uid])))
			default:
				p.Diagnostics = append(p.Diagnostics, a.Doc.Diag(schema.Error, ptr,
					fmt.Sprintf("no webhook of factory %q has UID %s (factory status lists them; a new webhook gets its UID when it first applies)", p.Factory, uid)))
			}
		}
	}
	for _, uid := range uncheckedOrder {
		msg := fmt.Sprintf("%s is not checked: this dry-run has no state (use --data or --server to check webhook UIDs)", uid)
		if n := len(pl.selectors[uid]); n > 1 {
			msg += fmt.Sprintf("; %d automations select it", n)
		}
		u := unchecked[uid]
		p.Diagnostics = append(p.Diagnostics, u.doc.Diag(schema.Warning, u.ptr, msg))
	}
}

// renames warns where a deleted webhook and a created one describe the
// same sender: a rename is a delete and a create, so say so, and who still
// points at the old UID.
func (pl *planner) renames() {
	for _, old := range pl.cur.SortedWebhooks() {
		if pl.desired[old.Key] != nil || pl.broken(factory.WebhookFile(old.Key)) {
			continue
		}
		for _, w := range pl.created {
			if sameEndpoint(&old.Spec, &w.WebhookSpec) {
				msg := fmt.Sprintf("looks like a rename of %s: renaming is a delete and a create, so %s stops answering (404) and this webhook gets a new UID and secret",
					factory.WebhookFile(old.Key), old.UID)
				if sel := pl.selectors[old.UID]; len(sel) > 0 {
					sort.Strings(sel)
					msg += fmt.Sprintf("; automations still selecting %s: %s", old.UID, strings.Join(sel, ", "))
				}
				pl.plan.Diagnostics = append(pl.plan.Diagnostics, w.Doc.Diag(schema.Warning, "", msg))
				break
			}
		}
	}
}

// checkSecret verifies a webhook's secretName against the store's secrets.
func checkSecret(p *Plan, w *schema.Webhook, cur *factory.State) schema.Diagnostics {
	if w.SecretName == "" {
		return nil
	}
	if p.Stateless {
		return schema.Diagnostics{w.Doc.Diag(schema.Warning, "/secretName",
			fmt.Sprintf("secret %q is not checked: this dry-run has no state (use --data or --server)", w.SecretName))}
	}
	sec := cur.Secrets[w.SecretName]
	if sec == nil {
		return schema.Diagnostics{w.Doc.Diag(schema.Error, "/secretName",
			fmt.Sprintf("secret %q does not exist: create it first (factory secrets create %s --from-stdin)", w.SecretName, w.SecretName))}
	}
	if w.AuthMode == factory.AuthURLToken && !sec.URLSafe {
		return schema.Diagnostics{w.Doc.Diag(schema.Error, "/secretName",
			fmt.Sprintf("secret %q is not URL-safe: a url_token secret is at least 32 of A-Z a-z 0-9 - . _ ~ (rotate it, or use factory secrets create --url-safe)", w.SecretName))}
	}
	return nil
}

// secretNameOf is the managed secret a webhook uses: its secretName, or
// the one generated for it (docs/spec/definitions.md).
func secretNameOf(factoryName string, w *schema.Webhook) string {
	if w.SecretName != "" {
		return w.SecretName
	}
	return GeneratedSecretName(factoryName, w.Key)
}

// GeneratedSecretName names the secret generated for a webhook without
// secretName.
func GeneratedSecretName(factoryName, key string) string {
	return "webhook-" + factoryName + "-" + key
}

func webhookDiff(old, w *factory.WebhookSpec) []string {
	keys := []string{}
	add := func(k string, changed bool) {
		if changed {
			keys = append(keys, k)
		}
	}
	add("name", old.Name != w.Name)
	add("description", old.Description != w.Description)
	add("authMode", old.AuthMode != w.AuthMode)
	add("signatureScheme", old.SignatureScheme != w.SignatureScheme)
	add("secretName", old.SecretName != w.SecretName)
	add("deliveryIdHeader", old.DeliveryIDHeader != w.DeliveryIDHeader)
	add("enabled", old.Enabled != w.Enabled)
	return keys
}

func automationDiff(old, a *factory.AutomationSpec) []string {
	keys := []string{}
	add := func(k string, changed bool) {
		if changed {
			keys = append(keys, k)
		}
	}
	add("title", old.Title != a.Title)
	add("enabled", old.Enabled != a.Enabled)
	add("triggers", !triggersEqual(old.Triggers, a.Triggers))
	add("config", !bytes.Equal(old.Config, a.Config))
	add("prompt", old.Prompt != a.Prompt)
	add("agent", old.Agent != a.Agent)
	add("execution", !jsonEqual(old.Exec, a.Exec))
	return keys
}

// jsonEqual compares two values by their JSON, for settings whose meaning
// is their content.
func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// triggersEqual compares triggers field by field; filters are canonical
// JSON, so equal bytes mean equal filters.
func triggersEqual(a, b []schema.Trigger) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Provider != y.Provider || x.Event != y.Event || !bytes.Equal(x.Filter.Payload, y.Filter.Payload) ||
			!slices.Equal(x.Filter.WebhookIDs, y.Filter.WebhookIDs) || !jsonEqual(x.Filter.Keys, y.Filter.Keys) ||
			!jsonEqual(x.Schedule, y.Schedule) {
			return false
		}
	}
	return true
}

// sameEndpoint says whether two webhook definitions describe the same
// sender, ignoring labels: the mark of a renamed file.
func sameEndpoint(a, b *factory.WebhookSpec) bool {
	return a.AuthMode == b.AuthMode && a.SignatureScheme == b.SignatureScheme &&
		a.SecretName == b.SecretName && a.DeliveryIDHeader == b.DeliveryIDHeader
}

// automationFile is where an applied automation was defined: the file it
// was last read from, or the flat layout's path for a record that
// predates that.
func automationFile(a *factory.Automation) string {
	if a.File != "" {
		return a.File
	}
	return factory.AutomationFile(a.Key)
}

// scheduleFires lists an enabled automation's schedule triggers with the
// next instant each fires for, as the plan shows them.
func scheduleFires(a factory.AutomationSpec, now time.Time) []ScheduleFire {
	if !a.Enabled {
		return nil
	}
	var out []ScheduleFire
	for i, t := range a.Triggers {
		if t.Schedule == nil {
			continue
		}
		if s, err := trigger.CompileSchedule(t.Schedule.Cron); err == nil {
			out = append(out, ScheduleFire{Name: factory.ScheduleName(t.Schedule.Name, i), Cron: t.Schedule.Cron, NextFire: s.Next(now)})
		}
	}
	return out
}
