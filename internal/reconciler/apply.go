package reconciler

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"factory"
	"factory/internal/schema"
	"factory/internal/secrets"
	"factory/internal/store"
)

// Applier writes plans into a store.
type Applier struct {
	Store   *store.Store
	Keyring *secrets.Keyring
	Now     func() time.Time
	// Loader, when set, remembers parsed files between syncs.
	Loader *Loader
	// Harness, when set, says whether the server runs an agent harness:
	// an agent whose harness it does not run is a plan warning.
	Harness func(harness string) bool
	// Isolation, when set, says what is shared by the runs of the
	// environment that runs a harness, when they are not kept apart
	// (environment NAME: why): a plan warning for each agent on it.
	Isolation func(harness string) string
	// CodeHost, when set, says whether the server has a credential for a
	// factory's code host: a paths filter on a pull request event of a
	// host it has none for is a plan warning (CodeHostWarnings).
	CodeHost func(factoryName, host string) bool
	// Credentials, when set, are the server config's credentials of a
	// factory's integrations (factories[].integrations), by type: a
	// trigger of a chat or tracker whose write-back neither they nor
	// factory.yaml give credentials for is a plan warning.
	Credentials func(factoryName string) map[string]factory.Credentials
	// HarnessKey, when set, says why an agent's harness could not reach
	// its model (its provider has no key at the model gateway), "" when
	// it can: a plan warning too.
	HarnessKey func(h *factory.Harness) string
	// SlackChannels, when set, resolves the Slack channel names of the
	// factory's triggers to IDs: a name the workspace lacks is a plan error.
	SlackChannels ChannelLister

	mu   sync.Mutex
	seen map[string]seen // factory → where its last sync ended
}

func (a *Applier) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

// Apply writes a valid plan as one batch, synced to disk before it returns:
// after a crash the store holds the whole revision or none of it. UIDs are
// assigned here, on first apply, and secrets are generated for webhooks
// that name none. cur must be the state the plan was made from.
func (a *Applier) Apply(p *Plan, d *Desired, cur *factory.State, source string) error {
	if !p.Valid() {
		return errors.New("refusing to apply an invalid plan")
	}
	w := &planWriter{a: a, p: p, d: d, cur: cur, now: a.now(), b: a.Store.NewBatch(), action: map[string]string{}}
	// Only what the plan changes is written: an unchanged record keeps its
	// updated_at, and a one-file commit is a small batch.
	for _, c := range p.Changes {
		w.action[c.Kind+"/"+c.Name] = c.Action
	}
	w.factory(source)
	if err := w.webhooks(); err != nil {
		w.b.Abort()
		return err
	}
	w.automations()
	w.resources()
	if err := w.b.Commit(); err != nil {
		return fmt.Errorf("apply %s@%s: %w", p.Factory, d.Revision, err)
	}
	return nil
}

// planWriter adds the writes of one plan to its batch.
type planWriter struct {
	a      *Applier
	p      *Plan
	d      *Desired
	cur    *factory.State
	now    time.Time
	b      *store.Batch
	action map[string]string // kind/name → the plan's action
}

// factory writes the factory's record: the revision applied, ready.
func (w *planWriter) factory(source string) {
	f := w.cur.Factory
	if f == nil {
		f = newFactory(w.p.Factory, w.now)
	} else {
		cp := *f
		f = &cp
	}
	f.Source = source
	f.Revision, f.AppliedAt = w.d.Revision, w.now
	f.AttemptedRevision, f.SyncedAt = w.d.Revision, w.now
	f.Ready, f.Error = true, ""
	f.Settings = w.d.Settings
	w.b.PutFactory(f)
}

// webhooks writes created and updated webhooks, with their secrets, and
// the tombstones of deleted ones (dropping their generated secrets).
func (w *planWriter) webhooks() error {
	p, cur, now := w.p, w.cur, w.now
	for _, wh := range w.d.Webhooks {
		if w.action[KindWebhook+"/"+wh.Key] == ActionNoop {
			continue
		}
		rec := cur.Webhooks[wh.Key]
		if rec == nil {
			uid, pinned := cur.Pins[wh.Key]
			if !pinned {
				uid = factory.NewUID(factory.PrefixWebhook)
			}
			rec = &factory.Webhook{Factory: p.Factory, Key: wh.Key, UID: uid, CreatedAt: now}
		} else {
			cp := *rec
			rec = &cp
		}
		rec.Spec, rec.UpdatedAt = wh.WebhookSpec, now
		sec, err := w.a.webhookSecret(w.b, cur, p.Factory, rec, now)
		if err != nil {
			return err
		}
		if rec.SecretName != sec.Name || rec.SecretVersion != sec.Version {
			rec.SecretSyncedAt = now
		}
		rec.SecretName, rec.SecretVersion = sec.Name, sec.Version
		w.b.PutWebhook(rec)
	}
	for _, c := range p.Changes {
		if c.Kind == KindWebhook && c.Action == ActionDelete {
			old := cur.Webhooks[c.Name]
			w.b.DeleteWebhook(old, now)
			if gen := cur.Secrets[GeneratedSecretName(p.Factory, old.Key)]; gen != nil && gen.Generated {
				w.b.DeleteSecret(gen)
			}
		}
	}
	return nil
}

// automations writes created, updated and deleted automations.
func (w *planWriter) automations() {
	p, cur := w.p, w.cur
	for _, au := range w.d.Automations {
		if w.action[KindAutomation+"/"+au.Key] == ActionNoop {
			continue
		}
		rec := cur.Automations[au.Key]
		if rec == nil {
			rec = &factory.Automation{Factory: p.Factory, Key: au.Key, UID: factory.NewUID(factory.PrefixAutomation), CreatedAt: w.now}
		} else {
			cp := *rec
			rec = &cp
		}
		rec.Spec, rec.UpdatedAt, rec.File = au.AutomationSpec, w.now, au.Doc.File
		w.b.PutAutomation(rec)
	}
	for _, c := range p.Changes {
		if c.Kind == KindAutomation && c.Action == ActionDelete {
			w.b.DeleteAutomation(cur.Automations[c.Name])
		}
	}
}

// resources writes created, updated and deleted agents, runners, skills,
// scorers and benchmark suites. Each gets its UID when it first applies.
func (w *planWriter) resources() {
	p, cur := w.p, w.cur
	for _, kind := range factory.ResourceKinds {
		for _, r := range w.d.Resources[kind] {
			if w.action[kind+"/"+r.Key] == ActionNoop {
				continue
			}
			rec := w.d.Record(kind, r)
			rec.Factory, rec.UpdatedAt = p.Factory, w.now
			if old := cur.Resource(kind, r.Key); old != nil {
				rec.UID, rec.CreatedAt = old.UID, old.CreatedAt
			} else {
				rec.UID, rec.CreatedAt = factory.NewUID(factory.ResourcePrefix(kind)), w.now
			}
			w.b.PutResource(rec)
		}
	}
	for _, c := range p.Changes {
		if c.Action == ActionDelete {
			if old := cur.Resource(c.Kind, c.Name); old != nil {
				w.b.DeleteResource(old)
			}
		}
	}
}

// webhookSecret returns the secret a webhook uses, generating (or
// regenerating, when the auth mode needs another format) the secret of a
// webhook that names none, and dropping a generated secret that a newly
// set secretName replaces.
func (a *Applier) webhookSecret(b *store.Batch, cur *factory.State, factoryName string, w *factory.Webhook, now time.Time) (*factory.Secret, error) {
	genName := GeneratedSecretName(factoryName, w.Key)
	gen := cur.Secrets[genName]
	if !w.Spec.GeneratesSecret() {
		if gen != nil && gen.Generated {
			b.DeleteSecret(gen)
		}
		sec := cur.Secrets[w.Spec.SecretName]
		if sec == nil {
			return nil, fmt.Errorf("secret %q does not exist", w.Spec.SecretName) // the plan checks this first
		}
		return sec, nil
	}
	format := generatedFormat(&w.Spec)
	if gen != nil && gen.Generated && gen.Format == format {
		return gen, nil
	}
	value := secrets.NewToken()
	if format == factory.SchemeStandardWebhooks {
		value = secrets.NewStandardWebhooksSecret()
	}
	sec := &factory.Secret{Name: genName, Version: 1, Generated: true, Format: format,
		URLSafe: secrets.URLSafe(value), CreatedAt: now, RotatedAt: now}
	if gen != nil {
		sec.Version = gen.Version + 1
		sec.CreatedAt = gen.CreatedAt
	}
	sealed, err := a.Keyring.Seal(sec.Name, value)
	if err != nil {
		return nil, err
	}
	b.PutSecret(sec, sealed)
	return sec, nil
}

func generatedFormat(w *factory.WebhookSpec) string {
	if w.AuthMode == factory.AuthSignature {
		return factory.SchemeStandardWebhooks // the only scheme that reaches here (schema), by either name
	}
	return "token"
}

func newFactory(name string, now time.Time) *factory.Factory {
	return &factory.Factory{Name: name, UID: factory.NewUID(factory.PrefixFactory),
		ForemanUID: factory.NewUID(factory.PrefixForeman), CreatedAt: now}
}

// RecordFailure marks a sync as failed without touching the applied state:
// the last good revision keeps serving, and status shows why the new one
// was refused (Flux's Ready=False).
func (a *Applier) RecordFailure(factoryName, source, revision string, cause error, ds schema.Diagnostics) error {
	cur, err := a.Store.Factory(factoryName)
	now := a.now()
	switch {
	case errors.Is(err, store.ErrNotFound):
		cur = newFactory(factoryName, now)
		cur.Source = source
	case err != nil:
		return err
	}
	msg := FailureMessage(cause, ds)
	if err == nil && !cur.Ready && cur.AttemptedRevision == revision && cur.Error == msg {
		return nil // already recorded: a server retrying must not write each time
	}
	cur.AttemptedRevision, cur.SyncedAt = revision, now
	cur.Ready = false
	cur.Error = msg
	b := a.Store.NewBatch()
	b.PutFactory(cur)
	return b.Commit()
}

// FailureMessage summarises why a revision was refused, for status.
func FailureMessage(cause error, ds schema.Diagnostics) string {
	if cause != nil {
		return cause.Error()
	}
	errs := ds.Errors()
	var lines []string
	for i, d := range errs {
		if i == 10 {
			lines = append(lines, fmt.Sprintf("... and %d more", len(errs)-10))
			break
		}
		lines = append(lines, d.String())
	}
	noun := "errors"
	if len(errs) == 1 {
		noun = "error"
	}
	return fmt.Sprintf("invalid revision (%d %s): %s", len(errs), noun, strings.Join(lines, "; "))
}
