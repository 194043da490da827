package ingress

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// azureDevOps is an Azure DevOps service hook's (Web Hooks consumer):
// HTTP Basic authentication, whose password is the webhook's secret (the
// user name is not checked), compared in constant time. It is decided
// before the body is read. The delivery's identity is the event's id in
// the payload: a hook's retries send the same.
type azureDevOps struct{}

func (azureDevOps) NeedsBody() bool               { return false }
func (azureDevOps) SignsReplayWindow() bool       { return false }
func (azureDevOps) DeliveryID(http.Header) string { return "" }

func (azureDevOps) Verify(h http.Header, _, secret []byte, _ time.Time) error {
	auth := h.Get("Authorization")
	if auth == "" {
		return ErrUnsigned
	}
	enc, ok := strings.CutPrefix(auth, "Basic ")
	if !ok {
		return ErrMalformed
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return ErrMalformed
	}
	_, password, ok := strings.Cut(string(raw), ":")
	if !ok {
		return ErrMalformed
	}
	if !sameSecret([]byte(password), secret) {
		return ErrMismatch
	}
	return nil
}

// BodyDeliveryID is the service hook event's id.
func (azureDevOps) BodyDeliveryID(body []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	return v.ID
}
