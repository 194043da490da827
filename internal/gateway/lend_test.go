package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"factory"
	"factory/internal/gateway"
)

// TestGatewayLendsNoMoreThanModelCalls is the attack of an agent that uses
// its run's token for more than model calls: the provider's files,
// batches and fine-tuning (the key's whole authority, unmetered, outliving
// the run), a path that climbs out of the provider's base path, and a
// redirect that would carry the real key to another host. None reaches
// the provider, or the other host, with the key.
func TestGatewayLendsNoMoreThanModelCalls(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, "elsewhere "+r.URL.Path+" "+r.Header.Get("x-api-key"))
		mu.Unlock()
	}))
	defer elsewhere.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/models") {
			http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	defer up.Close()
	tokens := &gateway.Tokens{Key: []byte("test key of the server")}
	runs := &fakeRuns{runs: map[string]*factory.Run{"run_live": {ID: "run_live", State: factory.StateInProgress}}}
	g := gateway.New(gateway.Config{Tokens: tokens, Runs: runs,
		Providers: map[string]gateway.Provider{gateway.Anthropic: {URL: up.URL + "/anthropic"}, gateway.OpenAI: {URL: up.URL + "/openai"}},
		Key:       func(*factory.Run, string) ([]byte, error) { return []byte(realKey), nil }})
	gw := httptest.NewServer(g)
	defer gw.Close()
	token := tokens.Mint("run_live")
	for _, c := range []struct {
		method, provider, path string
		want                   int
	}{
		{"POST", "anthropic", "/v1/messages/batches", http.StatusForbidden},
		{"GET", "anthropic", "/v1/files", http.StatusForbidden},
		{"POST", "openai", "/v1/files", http.StatusForbidden},
		{"POST", "openai", "/v1/fine_tuning/jobs", http.StatusForbidden},
		{"DELETE", "openai", "/v1/models/ft-mine", http.StatusForbidden},
		{"POST", "openai", "/%2e%2e/admin/v1/responses", http.StatusBadRequest},
		{"POST", "openai", "/v1/%2E%2E/%2e%2e/x/v1/responses", http.StatusBadRequest},
		{"POST", "openai", "/v1%2fresponses", http.StatusBadRequest},
		{"GET", "anthropic", "/v1/models", http.StatusTemporaryRedirect}, // answered, not followed
		{"POST", "anthropic", "/v1/messages/count_tokens", http.StatusOK},
		{"POST", "openai", "/v1/responses", http.StatusOK},
	} {
		req, _ := http.NewRequest(c.method, gw.URL+gateway.Prefix+c.provider+c.path, strings.NewReader(`{"model":"m"}`))
		authHeader(req, c.provider, token)
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s %s: %d, want %d", c.method, c.provider, c.path, resp.StatusCode, c.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"GET /anthropic/v1/models", "POST /anthropic/v1/messages/count_tokens", "POST /openai/v1/responses"}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("the provider (and elsewhere) saw:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}
