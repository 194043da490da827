package store

import (
	"errors"
	"time"

	"factory"
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
	resourcePrefix       = "resource/"        // resource/<factory>/<kind>/<key>
	agentSchedulePrefix  = "agentschedule/"   // agentschedule/<id>: schedules of the Agents API
	scheduleStatePrefix  = "schedstate/"      // schedstate/<schedule id>
	secretPrefix         = "secret/"          // secret/<name>
	secretValuePrefix    = "secret-value/"    // secret-value/<name>/<version>
	apiKeyPrefix         = "apikey/"          // apikey/<sha256 of the key>
	metaPrefix           = "meta/"
)

// FactoryState reads the state of one factory. A factory that was never
// applied has a State with a nil Factory and no webhooks.
func (s *Store) FactoryState(name string) (*factory.State, error) {
	st := factory.NewState()
	f := &factory.Factory{}
	switch err := s.getJSON(factoryPrefix+name, f); {
	case err == nil:
		st.Factory = f
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	whs, err := scanJSON[factory.Webhook](s, webhookPrefix+name+"/")
	if err != nil {
		return nil, err
	}
	for _, w := range whs {
		st.Webhooks[w.Key] = w
	}
	if st.DeletedWebhooks, err = scanJSON[factory.Webhook](s, deletedWebhookPrefix+name+"/"); err != nil {
		return nil, err
	}
	aus, err := scanJSON[factory.Automation](s, automationPrefix+name+"/")
	if err != nil {
		return nil, err
	}
	for _, a := range aus {
		st.Automations[a.Key] = a
	}
	res, err := s.Resources(name, "")
	if err != nil {
		return nil, err
	}
	for _, r := range res {
		st.AddResource(r)
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
func (s *Store) Factories() ([]*factory.Factory, error) {
	return scanJSON[factory.Factory](s, factoryPrefix)
}

// Factory reads one factory.
func (s *Store) Factory(name string) (*factory.Factory, error) {
	f := &factory.Factory{}
	return f, s.getJSON(factoryPrefix+name, f)
}

// WebhookByUID finds a webhook, live or deleted, by its UID.
func (s *Store) WebhookByUID(uid string) (*factory.Webhook, error) {
	var ref factory.WebhookRef
	if err := s.getJSON(webhookUIDPrefix+uid, &ref); err != nil {
		return nil, err
	}
	w := &factory.Webhook{}
	if ref.Deleted {
		return w, s.getJSON(deletedWebhookPrefix+ref.Factory+"/"+uid, w)
	}
	return w, s.getJSON(webhookPrefix+ref.Factory+"/"+ref.Key, w)
}

// Webhooks lists the live webhooks of a factory, by key.
func (s *Store) Webhooks(fac string) ([]*factory.Webhook, error) {
	return scanJSON[factory.Webhook](s, webhookPrefix+fac+"/")
}

// Automations lists the automations of a factory, by key.
func (s *Store) Automations(fac string) ([]*factory.Automation, error) {
	return scanJSON[factory.Automation](s, automationPrefix+fac+"/")
}

// AllWebhooks lists the live webhooks of every factory.
func (s *Store) AllWebhooks() ([]*factory.Webhook, error) {
	return scanJSON[factory.Webhook](s, webhookPrefix)
}

// Secrets lists the managed secrets' metadata, by name.
func (s *Store) Secrets() ([]*factory.Secret, error) {
	return scanJSON[factory.Secret](s, secretPrefix)
}

// Secret reads one secret's metadata.
func (s *Store) Secret(name string) (*factory.Secret, error) {
	sec := &factory.Secret{}
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
func (b *Batch) PutFactory(f *factory.Factory) { b.putJSON(factoryPrefix+f.Name, f) }

// PutWebhook writes a live webhook and its UID index.
func (b *Batch) PutWebhook(w *factory.Webhook) {
	b.putJSON(webhookPrefix+w.Factory+"/"+w.Key, w)
	b.putJSON(webhookUIDPrefix+w.UID, factory.WebhookRef{Factory: w.Factory, Key: w.Key})
	b.delete(webhookPinPrefix + w.Factory + "/" + w.Key)
}

// DeleteWebhook replaces a live webhook with its tombstone.
func (b *Batch) DeleteWebhook(w *factory.Webhook, at time.Time) {
	b.delete(webhookPrefix + w.Factory + "/" + w.Key)
	t := *w
	t.DeletedAt = &at
	b.putJSON(deletedWebhookPrefix+w.Factory+"/"+w.UID, &t)
	b.putJSON(webhookUIDPrefix+w.UID, factory.WebhookRef{Factory: w.Factory, Key: w.Key, Deleted: true})
}

// PinWebhookUID records the UID a webhook file takes when it first applies.
func (b *Batch) PinWebhookUID(fac, key, uid string) {
	if b.err == nil {
		b.err = b.b.Set([]byte(webhookPinPrefix+fac+"/"+key), []byte(uid), nil)
	}
	b.putJSON(webhookUIDPrefix+uid, factory.WebhookRef{Factory: fac, Key: key})
}

// PutAutomation writes an automation.
func (b *Batch) PutAutomation(a *factory.Automation) {
	b.putJSON(automationPrefix+a.Factory+"/"+a.Key, a)
}

// DeleteAutomation removes an automation.
func (b *Batch) DeleteAutomation(a *factory.Automation) {
	b.delete(automationPrefix + a.Factory + "/" + a.Key)
}

// Resources lists a factory's resources of one kind ("" for every kind),
// by kind and key.
func (s *Store) Resources(fac, kind string) ([]*factory.Resource, error) {
	prefix := resourcePrefix + fac + "/"
	if kind != "" {
		prefix += kind + "/"
	}
	return scanJSON[factory.Resource](s, prefix)
}

// Resource reads one resource.
func (s *Store) Resource(fac, kind, key string) (*factory.Resource, error) {
	r := &factory.Resource{}
	return r, s.getJSON(resourceKey(fac, kind, key), r)
}

func resourceKey(fac, kind, key string) string { return resourcePrefix + fac + "/" + kind + "/" + key }

// PutResource writes a resource.
func (b *Batch) PutResource(r *factory.Resource) { b.putJSON(resourceKey(r.Factory, r.Kind, r.Key), r) }

// DeleteResource removes a resource.
func (b *Batch) DeleteResource(r *factory.Resource) { b.delete(resourceKey(r.Factory, r.Kind, r.Key)) }

// AgentSchedules lists the Agents API's schedules, by ID.
func (s *Store) AgentSchedules() ([]*factory.ScheduledAgent, error) {
	return scanJSON[factory.ScheduledAgent](s, agentSchedulePrefix)
}

// AgentSchedule reads one schedule of the Agents API.
func (s *Store) AgentSchedule(id string) (*factory.ScheduledAgent, error) {
	v := &factory.ScheduledAgent{}
	return v, s.getJSON(agentSchedulePrefix+id, v)
}

// PutAgentSchedule writes a schedule of the Agents API.
func (b *Batch) PutAgentSchedule(v *factory.ScheduledAgent) { b.putJSON(agentSchedulePrefix+v.ID, v) }

// DeleteAgentSchedule removes a schedule of the Agents API and its state.
func (b *Batch) DeleteAgentSchedule(id string) {
	b.delete(agentSchedulePrefix + id)
	b.delete(scheduleStatePrefix + id)
}

// ScheduleStates reads what the scheduler remembers of every schedule, by
// schedule ID.
func (s *Store) ScheduleStates() (map[string]*factory.ScheduleState, error) {
	list, err := scanJSON[factory.ScheduleState](s, scheduleStatePrefix)
	out := make(map[string]*factory.ScheduleState, len(list))
	for _, st := range list {
		out[st.ID] = st
	}
	return out, err
}

// PutScheduleState writes what the scheduler remembers of a schedule.
func (b *Batch) PutScheduleState(st *factory.ScheduleState) { b.putJSON(scheduleStatePrefix+st.ID, st) }

// PutSecret writes a secret's metadata and, when sealed is not nil, the
// sealed value of its current version.
func (b *Batch) PutSecret(sec *factory.Secret, sealed []byte) {
	b.putJSON(secretPrefix+sec.Name, sec)
	if sealed != nil {
		b.putJSON(secretValueKey(sec.Name, sec.Version), sealed)
	}
}

// DeleteSecret removes a secret and every stored version of it.
func (b *Batch) DeleteSecret(sec *factory.Secret) {
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

// WebhookRefByUID finds which factory and key own a UID, whether the
// webhook is live, deleted, or only pinned by an import.
func (s *Store) WebhookRefByUID(uid string) (*factory.WebhookRef, error) {
	ref := &factory.WebhookRef{}
	return ref, s.getJSON(webhookUIDPrefix+uid, ref)
}

// SetSuspended turns a webhook's suspension (the dashboard's enabled
// toggle, on top of its file) on or off, and returns the webhook.
func (s *Store) SetSuspended(uid string, suspended bool) (*factory.Webhook, error) {
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
func (s *Store) AutomationByUID(uid string) (*factory.Automation, error) {
	all, err := scanJSON[factory.Automation](s, automationPrefix)
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
func (s *Store) AllWebhooksOf(fac string) ([]*factory.Webhook, error) {
	live, err := s.Webhooks(fac)
	if err != nil {
		return nil, err
	}
	deleted, err := scanJSON[factory.Webhook](s, deletedWebhookPrefix+fac+"/")
	return append(live, deleted...), err
}
