package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"factory"

	"factory/internal/reconciler"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/secrets"
	"factory/internal/store"
)

// FuzzAgentsAPIInput sends arbitrary create bodies and list queries to the
// real handlers: each answer is 200 or 400, never a 5xx or a panic.
func FuzzAgentsAPIInput(f *testing.F) {
	f.Add(`{"prompt":"x"}`, "limit=5&state=QUEUED")
	f.Add(`{"prompt":"x","config":{"idle_timeout_minutes":5,"mcp_servers":{"a":{"command":"x"}}},"attachments":[{"file_name":"a","data":"YQ=="}]}`, "sort_by=created_at&sort_order=asc&created_after=2026-01-01")
	f.Add(`{"prompt":5}`, "cursor=abc.def&limit=x")
	f.Add(`{"config":{"skill_spec":"a/b:c"},"metadata":{"k":"v"}}`, "state=DONE&updated_after=yesterday")
	f.Add(`[`, "name=%ZZ")
	dir := f.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	kr, _ := secrets.LoadKeyring(dir)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	runs := runs.NewManager(runs.Config{Store: st, DataDir: dir, DefaultEnvironment: "d", Log: log,
		Environments: map[string]runs.Environment{"d": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	s := New(Config{Runs: runs}, &reconciler.Applier{Store: st, Keyring: kr}, log)
	key := "fk_fuzz_key_000000000000000000000000000000"
	b := st.NewBatch()
	b.PutAPIKey(key, &factory.APIKey{Name: "fuzz", Scope: factory.ScopeRuns, Prefix: key[:8], CreatedAt: time.Now()})
	b.Commit()
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body, query string) {
		for _, req := range []*http.Request{
			httptest.NewRequest("POST", "/v1/agent/runs", strings.NewReader(body)),
			httptest.NewRequest("GET", "/v1/agent/runs?"+url.PathEscape(query), nil),
		} {
			if req.URL.RawQuery == "" && req.Method == "GET" {
				req.URL.RawQuery = query
			}
			req.Header.Set("Authorization", "Bearer "+key)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 && rec.Code != 400 {
				t.Fatalf("%s %s: %d %s", req.Method, req.URL, rec.Code, rec.Body)
			}
		}
	})
}
