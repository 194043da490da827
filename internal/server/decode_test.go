package server

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzDecodeBody: any body either decodes or is refused as an invalid
// request, never a panic or another kind of error.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"name":"a","value":"b","url_safe":true}`, `{"value":null}`, `[`, `{"name":7}`, strings.Repeat("[", 10000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var q SecretRequest
		err := decodeBody(httptest.NewRequest("POST", "/v1/secrets", strings.NewReader(body)), &q)
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Code != CodeInvalidRequest) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}
