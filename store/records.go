package store

import (
	"errors"
	"sort"
	"time"

	"factory/schema"
)

// Key layout. Every record is JSON under a readable key, so that a dump of
// the store can be read by a person.
const (
	factoryPrefix        = "factory/"         // factory/<name>
	webhookPrefix        = "webhook/"         // webhook/<factory>/<key>
	deletedWebhookPrefix = "webhook-deleted/" // webhook-deleted/<factory>/<uid>
	webhookUIDPrefix     = "webhook-uid/"     // webhook-uid/<uid> → WebhookRef
	webhookPinPrefix     = "webhook-pin/"     // webhook-pin/<factory>/<key> → uid
	automationPrefix     = "automation/"      // automation/<factory>/<key>
	secretPrefix         = "secret/"          // secret/<name>
	secretValuePrefix    = "secret-value/"    // secret-value/<name>/<version>
	apiKeyPrefix         = "apikey/"          // apikey/<sha256 of the key>
	metaPrefix           = "meta/"
)

// Factory is the sync status and identity of one factory, in the manner of
// a Flux source's status: what was last applied, what was last attempted,
// and why that failed.
type Factory struct {
	Name       string `json:"name"`
	UID        string `json:"uid"`
	ForemanUID string `json:"foreman_uid"`
	Source     string `json:"source"`

	// Revision is the last applied revision; the state in the store is it.
	Revision  string    `json:"revision"`
	AppliedAt time.Time `json:"applied_at"`
	// AttemptedRevision and SyncedAt describe the last sync, good or bad.
	AttemptedRevision string    `json:"attempted_revision"`
	SyncedAt          time.Time `json:"synced_at"`
	Ready             bool      `json:"ready"`
	Error             string    `json:"error,omitempty"`

	Settings  schema.FactoryFile `json:"settings"`
	CreatedAt time.Time          `json:"created_at"`
}

// Webhook is an applied webhook.
type Webhook struct {
	Factory string         `json:"factory"`
	Key     string         `json:"key"`
	UID     string         `json:"uid"`
	Spec    schema.Webhook `json:"spec"`
	// SecretName is the managed secret in force: the spec's secretName, or
	// the generated webhook-<factory>-<key>.
	SecretName string `json:"secret_name"`
	// SecretVersion is the secret's version picked up at the last sync
	// (definitions.md: rotation takes effect on the next sync).
	SecretVersion  int       `json:"secret_version"`
	SecretSyncedAt time.Time `json:"secret_synced_at"`
	Suspended      bool      `json:"suspended"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	// DeletedAt is set on the tombstone kept after the file is deleted, so
	// the UID keeps answering 404 and its delivery log stays readable.
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

// Active reports whether senders are answered at all: enabled in the file,
// not suspended, not deleted.
func (w *Webhook) Active() bool {
	return w.DeletedAt == nil && w.Spec.Enabled && !w.Suspended
}

// Automation is an applied automation.
type Automation struct {
	Factory   string            `json:"factory"`
	Key       string            `json:"key"`
	UID       string            `json:"uid"`
	Spec      schema.Automation `json:"spec"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// Secret is a managed secret's metadata. Its value is sealed and stored
// apart, one record per version.
type Secret struct {
	Name      string    `json:"name"`
	Version   int       `json:"version"`
	URLSafe   bool      `json:"url_safe"`
	Generated bool      `json:"generated"`
	Format    string    `json:"format,omitempty"` // of a generated secret: token or standard-webhooks
	Revealed  bool      `json:"revealed"`
	CreatedAt time.Time `json:"created_at"`
	RotatedAt time.Time `json:"rotated_at"`
}

// WebhookRef locates a webhook by UID.
type WebhookRef struct {
	Factory string `json:"factory"`
	Key     string `json:"key"`
	Deleted bool   `json:"deleted,omitempty"`
}

// State is everything a plan needs to know of one factory: its record (nil
// when it was never applied), its webhooks (live and deleted), automations,
// UIDs pinned by import, and the managed secrets of the store.
type State struct {
	Factory         *Factory               `json:"factory"`
	Webhooks        map[string]*Webhook    `json:"webhooks"` // by key
	DeletedWebhooks []*Webhook             `json:"deleted_webhooks"`
	Automations     map[string]*Automation `json:"automations"` // by key
	Pins            map[string]string      `json:"pins"`        // webhook key → UID
	Secrets         map[string]*Secret     `json:"secrets"`     // by name
}

// FactoryState reads the state of one factory. A factory that was never
// applied has a State with a nil Factory and no webhooks.
func (s *Store) FactoryState(name string) (*State, error) {
	st := &State{Webhooks: map[string]*Webhook{}, Automations: map[string]*Automation{},
		Pins: map[string]string{}, Secrets: map[string]*Secret{}}
	f := &Factory{}
	switch err := s.getJSON(factoryPrefix+name, f); {
	case err == nil:
		st.Factory = f
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	whs, err := scanJSON[Webhook](s, webhookPrefix+name+"/")
	if err != nil {
		return nil, err
	}
	for _, w := range whs {
		st.Webhooks[w.Key] = w
	}
	if st.DeletedWebhooks, err = scanJSON[Webhook](s, deletedWebhookPrefix+name+"/"); err != nil {
		return nil, err
	}
	aus, err := scanJSON[Automation](s, automationPrefix+name+"/")
	if err != nil {
		return nil, err
	}
	for _, a := range aus {
		st.Automations[a.Key] = a
	}
	err = s.scan(webhookPinPrefix+name+"/", func(key string, v []byte) error {
		st.Pins[key[len(webhookPinPrefix+name+"/"):]] = string(v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	secrets, err := s.Secrets()
	if err != nil {
		return nil, err
	}
	for _, sec := range secrets {
		st.Secrets[sec.Name] = sec
	}
	return st, nil
}

// Factories lists every factory, by name.
func (s *Store) Factories() ([]*Factory, error) { return scanJSON[Factory](s, factoryPrefix) }

// Factory reads one factory.
func (s *Store) Factory(name string) (*Factory, error) {
	f := &Factory{}
	return f, s.getJSON(factoryPrefix+name, f)
}

// WebhookByUID finds a webhook, live or deleted, by its UID.
func (s *Store) WebhookByUID(uid string) (*Webhook, error) {
	var ref WebhookRef
	if err := s.getJSON(webhookUIDPrefix+uid, &ref); err != nil {
		return nil, err
	}
	w := &Webhook{}
	if ref.Deleted {
		return w, s.getJSON(deletedWebhookPrefix+ref.Factory+"/"+uid, w)
	}
	return w, s.getJSON(webhookPrefix+ref.Factory+"/"+ref.Key, w)
}

// Webhooks lists the live webhooks of a factory, by key.
func (s *Store) Webhooks(factory string) ([]*Webhook, error) {
	return scanJSON[Webhook](s, webhookPrefix+factory+"/")
}

// Automations lists the automations of a factory, by key.
func (s *Store) Automations(factory string) ([]*Automation, error) {
	return scanJSON[Automation](s, automationPrefix+factory+"/")
}

// AllWebhooks lists the live webhooks of every factory.
func (s *Store) AllWebhooks() ([]*Webhook, error) { return scanJSON[Webhook](s, webhookPrefix) }

// Secrets lists the managed secrets' metadata, by name.
func (s *Store) Secrets() ([]*Secret, error) { return scanJSON[Secret](s, secretPrefix) }

// Secret reads one secret's metadata.
func (s *Store) Secret(name string) (*Secret, error) {
	sec := &Secret{}
	return sec, s.getJSON(secretPrefix+name, sec)
}

// SealedSecret reads the sealed value of one version of a secret.
func (s *Store) SealedSecret(name string, version int) ([]byte, error) {
	var sealed []byte
	return sealed, s.getJSON(secretValueKey(name, version), &sealed)
}

// Meta reads a server-wide setting; "" when unset.
func (s *Store) Meta(name string) (string, error) {
	var v string
	if err := s.getJSON(metaPrefix+name, &v); err != nil && !errors.Is(err, ErrNotFound) {
		return "", err
	}
	return v, nil
}

// PutFactory writes a factory record.
func (b *Batch) PutFactory(f *Factory) { b.putJSON(factoryPrefix+f.Name, f) }

// PutWebhook writes a live webhook and its UID index.
func (b *Batch) PutWebhook(w *Webhook) {
	b.putJSON(webhookPrefix+w.Factory+"/"+w.Key, w)
	b.putJSON(webhookUIDPrefix+w.UID, WebhookRef{Factory: w.Factory, Key: w.Key})
	b.delete(webhookPinPrefix + w.Factory + "/" + w.Key)
}

// DeleteWebhook replaces a live webhook with its tombstone.
func (b *Batch) DeleteWebhook(w *Webhook, at time.Time) {
	b.delete(webhookPrefix + w.Factory + "/" + w.Key)
	t := *w
	t.DeletedAt = &at
	b.putJSON(deletedWebhookPrefix+w.Factory+"/"+w.UID, &t)
	b.putJSON(webhookUIDPrefix+w.UID, WebhookRef{Factory: w.Factory, Key: w.Key, Deleted: true})
}

// PinWebhookUID records the UID a webhook file takes when it first applies.
func (b *Batch) PinWebhookUID(factory, key, uid string) {
	if b.err == nil {
		b.err = b.b.Set([]byte(webhookPinPrefix+factory+"/"+key), []byte(uid), nil)
	}
	b.putJSON(webhookUIDPrefix+uid, WebhookRef{Factory: factory, Key: key})
}

// PutAutomation writes an automation.
func (b *Batch) PutAutomation(a *Automation) { b.putJSON(automationPrefix+a.Factory+"/"+a.Key, a) }

// DeleteAutomation removes an automation.
func (b *Batch) DeleteAutomation(a *Automation) { b.delete(automationPrefix + a.Factory + "/" + a.Key) }

// PutSecret writes a secret's metadata and, when sealed is not nil, the
// sealed value of its current version.
func (b *Batch) PutSecret(sec *Secret, sealed []byte) {
	b.putJSON(secretPrefix+sec.Name, sec)
	if sealed != nil {
		b.putJSON(secretValueKey(sec.Name, sec.Version), sealed)
	}
}

// DeleteSecret removes a secret and every stored version of it.
func (b *Batch) DeleteSecret(sec *Secret) {
	b.delete(secretPrefix + sec.Name)
	for v := 1; v <= sec.Version; v++ {
		b.delete(secretValueKey(sec.Name, v))
	}
}

// PutMeta writes a server-wide setting.
func (b *Batch) PutMeta(name, value string) { b.putJSON(metaPrefix+name, value) }

func secretValueKey(name string, version int) string {
	return secretValuePrefix + name + "/" + itoa(version)
}

// SortedWebhooks returns the state's live webhooks in key order.
func (st *State) SortedWebhooks() []*Webhook {
	out := make([]*Webhook, 0, len(st.Webhooks))
	for _, w := range st.Webhooks {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// SortedAutomations returns the state's automations in key order.
func (st *State) SortedAutomations() []*Automation {
	out := make([]*Automation, 0, len(st.Automations))
	for _, a := range st.Automations {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// WebhookRefByUID finds which factory and key own a UID, whether the
// webhook is live, deleted, or only pinned by an import.
func (s *Store) WebhookRefByUID(uid string) (*WebhookRef, error) {
	ref := &WebhookRef{}
	return ref, s.getJSON(webhookUIDPrefix+uid, ref)
}

// SetSuspended turns a webhook's suspension (the dashboard's enabled
// toggle, on top of its file) on or off, and returns the webhook.
func (s *Store) SetSuspended(uid string, suspended bool) (*Webhook, error) {
	w, err := s.WebhookByUID(uid)
	if err != nil {
		return nil, err
	}
	if w.DeletedAt != nil {
		return nil, ErrNotFound
	}
	if w.Suspended == suspended {
		return w, nil
	}
	w.Suspended = suspended
	w.UpdatedAt = time.Now().UTC()
	b := s.NewBatch()
	b.PutWebhook(w)
	return w, b.Commit()
}

// AutomationByUID finds an automation of any factory by its UID.
func (s *Store) AutomationByUID(uid string) (*Automation, error) {
	all, err := scanJSON[Automation](s, automationPrefix)
	if err != nil {
		return nil, err
	}
	for _, a := range all {
		if a.UID == uid {
			return a, nil
		}
	}
	return nil, ErrNotFound
}

// AllWebhooksOf lists a factory's webhooks, live and deleted.
func (s *Store) AllWebhooksOf(factory string) ([]*Webhook, error) {
	live, err := s.Webhooks(factory)
	if err != nil {
		return nil, err
	}
	deleted, err := scanJSON[Webhook](s, deletedWebhookPrefix+factory+"/")
	return append(live, deleted...), err
}
