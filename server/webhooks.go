package server

import (
	"errors"
	"fmt"
	"net/http"

	"factory"

	"factory/secrets"
	"factory/store"
)

// RevealSecret returns a webhook's generated secret, once: it is marked
// revealed durably before it is returned, so a crash may lose the one
// showing but can never show it twice. Later calls are conflicts.
func RevealSecret(s *store.Store, kr *secrets.Keyring, w *factory.Webhook) ([]byte, error) {
	sec, err := s.Secret(w.SecretName)
	if err != nil {
		return nil, fmt.Errorf("read secret %s: %w", w.SecretName, err)
	}
	if !sec.Generated {
		return nil, errorf(CodeConflict, fmt.Sprintf("webhook %s/%s uses secret %q, which was supplied, not generated: it is never revealed", w.Factory, w.Key, sec.Name))
	}
	if sec.Revealed {
		return nil, errorf(CodeConflict, fmt.Sprintf("the secret of webhook %s/%s was already revealed; rotate it to get a new one (factory secrets rotate %s, then reveal)", w.Factory, w.Key, sec.Name))
	}
	if sec.Version != w.SecretVersion {
		return nil, errorf(CodeConflict, fmt.Sprintf("secret %s was rotated and webhook %s/%s has not synced it yet: sync the factory first", sec.Name, w.Factory, w.Key))
	}
	sealed, err := s.SealedSecret(sec.Name, sec.Version)
	if err != nil {
		return nil, err
	}
	value, err := kr.Open(sec.Name, sealed)
	if err != nil {
		return nil, err
	}
	cp := *sec
	cp.Revealed = true
	b := s.NewBatch()
	b.PutSecret(&cp, nil)
	if err := b.Commit(); err != nil {
		return nil, err
	}
	return value, nil
}

// webhookView is GET /v1/webhooks/{uid}: the webhook as status shows it,
// with its factory's UID.
type webhookView struct {
	factory.WebhookStatus
	FactoryUID string `json:"factory_uid"`
}

func (s *Server) liveWebhook(uid string) (*factory.Webhook, error) {
	w, err := s.store.WebhookByUID(uid)
	if errors.Is(err, store.ErrNotFound) || (err == nil && w.DeletedAt != nil) {
		return nil, errorf(CodeNotFound, fmt.Sprintf("no webhook %s", uid))
	}
	return w, err
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.liveWebhook(r.PathValue("uid"))
	if err != nil {
		return err
	}
	return s.writeWebhook(w, wh)
}

func (s *Server) revealSecret(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.liveWebhook(r.PathValue("uid"))
	if err != nil {
		return err
	}
	s.syncMu.Lock() // a sync may be rotating the same secret
	defer s.syncMu.Unlock()
	v, err := RevealSecret(s.store, s.applier.Keyring, wh)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"secret": string(v)})
	return nil
}
