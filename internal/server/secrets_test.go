package server_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestSecretsAPI(t *testing.T) {
	h := start(t)
	post := func(path, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			sb.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, sb.String()
	}
	tests := []struct {
		name, path, body string
		status           int
		contains         string
	}{
		{"generated", "/v1/secrets", `{"name": "gen"}`, 200, `"value":"`},
		{"supplied", "/v1/secrets", `{"name": "sup", "value": "s3cret"}`, 200, `"version":1`},
		{"supplied values are not echoed", "/v1/secrets", `{"name": "sup2", "value": "do-not-echo"}`, 200, `"url_safe":false`},
		{"exists", "/v1/secrets", `{"name": "gen"}`, 409, `secret \"gen\" exists`},
		{"bad name", "/v1/secrets", `{"name": "no spaces"}`, 400, "must be a letter or digit"},
		{"empty value", "/v1/secrets", `{"name": "e", "value": ""}`, 400, "the value is empty"},
		{"not URL-safe", "/v1/secrets", `{"name": "u", "value": "short", "url_safe": true}`, 400, "not URL-safe"},
		{"oversized", "/v1/secrets", `{"name": "big", "value": "` + strings.Repeat("x", 200<<10) + `"}`, 400, "over"},
		{"not JSON", "/v1/secrets", `{"name": `, 400, "not the expected JSON"},
		{"wrong type", "/v1/secrets", `{"name": 7}`, 400, "not the expected JSON"},
		{"rotate", "/v1/secrets/sup/rotate", `{"value": "new"}`, 200, `"version":2`},
		{"rotate generates", "/v1/secrets/gen/rotate", ``, 200, `"value":"`},
		{"rotate missing", "/v1/secrets/nope/rotate", `{}`, 404, `no secret \"nope\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(tt.path, tt.body)
			if status != tt.status || !strings.Contains(body, tt.contains) {
				t.Fatalf("status %d, body %s; want %d containing %q", status, body, tt.status, tt.contains)
			}
			if strings.Contains(body, "do-not-echo") || strings.Contains(body, "s3cret") {
				t.Fatalf("a supplied secret value came back: %s", body)
			}
			if status >= 400 && !strings.Contains(body, `"type":"https://factory.invalid/errors/`) {
				t.Fatalf("not a problem body: %s", body)
			}
		})
	}
	req, _ := http.NewRequest(http.MethodDelete, h.url+"/v1/secrets/sup", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("delete: %v %v", err, resp.Status)
	}
	resp.Body.Close()
}
