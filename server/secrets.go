package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"factory"

	"factory/secrets"
)

// maxAdminBody bounds the JSON body of an admin call.
const maxAdminBody = 2 * secrets.MaxValueBytes

// decodeBody reads a JSON body within a size limit. An empty body decodes
// as the zero value; unknown fields are ignored.
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBody+1))
	if err != nil {
		return errorf(CodeInvalidRequest, "cannot read the request body")
	}
	if len(b) > maxAdminBody {
		return errorf(CodeInvalidRequest, fmt.Sprintf("the request body is over %d bytes", maxAdminBody))
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errorf(CodeInvalidRequest, "the request body is not the expected JSON: "+err.Error())
	}
	return nil
}

// secretError maps the secrets package's errors to API errors.
func secretError(err error) error {
	switch {
	case errors.Is(err, secrets.ErrInvalid):
		return errorf(CodeInvalidRequest, err.Error())
	case errors.Is(err, secrets.ErrNotFound):
		return errorf(CodeNotFound, err.Error())
	case errors.Is(err, secrets.ErrExists), errors.Is(err, secrets.ErrInUse):
		return errorf(CodeConflict, err.Error())
	}
	return err
}

// SecretRequest is the body of POST /v1/secrets and of a rotation. A
// missing value asks the server to generate one.
type SecretRequest struct {
	Name    string  `json:"name,omitempty"`
	Value   *string `json:"value,omitempty"`
	URLSafe bool    `json:"url_safe,omitempty"`
}

// SecretResponse carries a secret's metadata and, once, a generated value.
type SecretResponse struct {
	Secret *factory.Secret `json:"secret"`
	Value  string          `json:"value,omitempty"`
}

func (q SecretRequest) value() []byte {
	if q.Value == nil {
		return nil
	}
	return []byte(*q.Value)
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) error {
	secs, err := s.store.Secrets()
	if err != nil {
		return err
	}
	if secs == nil {
		secs = []*factory.Secret{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"secrets": secs})
	return nil
}

func (s *Server) createSecret(w http.ResponseWriter, r *http.Request) error {
	var q SecretRequest
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	s.syncMu.Lock()
	sec, gen, err := secrets.Create(s.store, s.applier.Keyring, q.Name, q.value(), q.URLSafe, time.Now().UTC())
	s.syncMu.Unlock()
	if err != nil {
		return secretError(err)
	}
	s.syncAll(r.Context()) // a webhook may have been waiting for this secret
	writeJSON(w, http.StatusOK, SecretResponse{Secret: sec, Value: string(gen)})
	return nil
}

func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request) error {
	var q SecretRequest
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	s.syncMu.Lock()
	sec, gen, err := secrets.Rotate(s.store, s.applier.Keyring, r.PathValue("name"), q.value(), time.Now().UTC())
	s.syncMu.Unlock()
	if err != nil {
		return secretError(err)
	}
	s.syncAll(r.Context()) // the next sync is when webhooks switch to the new value
	writeJSON(w, http.StatusOK, SecretResponse{Secret: sec, Value: string(gen)})
	return nil
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	s.syncMu.Lock()
	err := secrets.Delete(s.store, r.PathValue("name"))
	s.syncMu.Unlock()
	if err != nil {
		return secretError(err)
	}
	writeJSON(w, http.StatusOK, map[string]any{})
	return nil
}
