package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"factory"

	"factory/internal/secrets"
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

// SecretRequest is the body of POST /v1/secrets and of a rotation. A
// missing value asks the server to generate one.
type SecretRequest struct {
	Name    string  `json:"name,omitempty"`
	Value   *string `json:"value,omitempty"`
	URLSafe bool    `json:"url_safe,omitempty"`
}

func (q SecretRequest) value() []byte {
	if q.Value == nil {
		return nil
	}
	return []byte(*q.Value)
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) error {
	secs, err := s.svc.Secrets(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"secrets": secs})
	return nil
}

func (s *Server) createSecret(w http.ResponseWriter, r *http.Request) error {
	var q SecretRequest
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	sec, gen, err := s.svc.CreateSecret(r.Context(), q.Name, q.value(), q.URLSafe)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, factory.SecretResponse{Secret: sec, Value: string(gen)})
	return nil
}

func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request) error {
	var q SecretRequest
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	sec, gen, err := s.svc.RotateSecret(r.Context(), r.PathValue("name"), q.value())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, factory.SecretResponse{Secret: sec, Value: string(gen)})
	return nil
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.DeleteSecret(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{})
	return nil
}

func (s *Server) listAPIKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := s.svc.APIKeys(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"api_keys": keys})
	return nil
}

// createAPIKey is POST /v1/admin/api-keys {"name", "scope"}: the key, once,
// and its record.
func (s *Server) createAPIKey(w http.ResponseWriter, r *http.Request) error {
	var q factory.APIKeyRequest
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	k, err := s.svc.CreateAPIKey(r.Context(), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}

// revokeAPIKey is POST /v1/admin/api-keys/revoke {"key"}: the key travels in
// the body, never in a URL that logs and proxies keep.
func (s *Server) revokeAPIKey(w http.ResponseWriter, r *http.Request) error {
	var q struct {
		Key string `json:"key"`
	}
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	k, err := s.svc.RevokeAPIKey(r.Context(), q.Key)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"api_key": k})
	return nil
}
