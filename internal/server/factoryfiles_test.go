package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"factory"
	"factory/internal/reconciler"
)

func get(t *testing.T, url string) answer {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// The schemas are served without a key; each of the nine documents is a
// JSON Schema that compiles, and the bundle holds them all.
func TestSchemasEndpoints(t *testing.T) {
	h := start(t)
	a := get(t, h.url+"/v1/factory-files/schemas")
	if a.status != 200 || strings.TrimSpace(a.body) != `{"current":"v1alpha1","current_version":"v1alpha1","versions":[{"schema_url":"/v1/factory-files/schemas/v1alpha1","schema_version":"v1alpha1"}]}` {
		t.Fatalf("versions: %d %s", a.status, a.body)
	}
	a = get(t, h.url+"/v1/factory-files/schemas/v1alpha1")
	var bundle struct {
		Version   string                     `json:"version"`
		Documents map[string]json.RawMessage `json:"documents"`
	}
	if err := json.Unmarshal([]byte(a.body), &bundle); err != nil || a.status != 200 || len(bundle.Documents) != 9 {
		t.Fatalf("bundle: %d %v %d documents", a.status, err, len(bundle.Documents))
	}
	c := jsonschema.NewCompiler()
	for _, name := range []string{"factory", "agent", "automation", "runner", "scorer", "webhook", "benchmark_suite", "benchmark_suite_task", "common"} {
		one := get(t, h.url+"/v1/factory-files/schemas/v1alpha1/"+name)
		var served, inBundle any
		_ = json.Unmarshal([]byte(one.body), &served)
		_ = json.Unmarshal(bundle.Documents[name+".json"], &inBundle)
		if one.status != 200 || one.header.Get("Content-Type") != "application/schema+json" || served == nil || !reflect.DeepEqual(served, inBundle) {
			t.Fatalf("%s: %d %s", name, one.status, one.header.Get("Content-Type"))
		}
		if err := c.AddResource("https://factory.invalid/schemas/"+name+".json", strings.NewReader(one.body)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"filter", "config"} { // referenced by automation
		b, _ := os.ReadFile(filepath.Join("..", "schema", "schemas", name+".json"))
		_ = c.AddResource("https://factory.invalid/schemas/"+name+".json", strings.NewReader(string(b)))
	}
	if _, err := c.Compile("https://factory.invalid/schemas/automation.json"); err != nil {
		t.Fatalf("the served documents do not compile together: %v", err)
	}
	for _, path := range []string{"/v1/factory-files/schemas/v2", "/v1/factory-files/schemas/v1alpha1/agents"} {
		if a := get(t, h.url+path); a.status != 404 || !strings.Contains(a.body, "application/problem") && !strings.Contains(a.header.Get("Content-Type"), "problem") {
			t.Fatalf("%s: %d %s", path, a.status, a.body)
		}
	}
}

// POST /v1/factory-files/validate answers what `reconcile --dry-run
// --output json` prints for the same files: compared here with the report
// of a dry-run of the same tree written to a directory.
func TestValidateFiles(t *testing.T) {
	h := start(t)
	files := map[string]string{
		"factory.yaml":                "schemaVersion: v1alpha1\nname: V\nrepositories: []\nagentDefaults:\n  model: auto\n",
		"agents/foreman/agent.md":     "---\nagentType: FOREMAN\n---\nForeman.\n",
		"agents/builder/agent.md":     "---\nrunner: gpu\n---\nBuilder.\n",
		"automations/a/automation.md": "---\nagent: builder\ntriggers:\n  - provider: github\n    event: issue_labled\n---\nGo.\n",
		"README.md":                   "not a definition\n",
	}
	var req struct {
		Files []map[string]string `json:"files"`
	}
	for p, c := range files {
		req.Files = append(req.Files, map[string]string{"path": p, "content": c})
	}
	body, _ := json.Marshal(req)
	if a := post(t, h.url+"/v1/factory-files/validate", "", string(body)); a.status != 401 {
		t.Fatalf("without a key: %d", a.status)
	}
	a := post(t, h.url+"/v1/factory-files/validate", "", string(body), "Authorization", "Bearer "+adminKey)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	dir := t.TempDir()
	writeTree(t, dir, files)
	c, err := reconciler.Check(context.Background(), reconciler.DirSource{Root: dir}, "validate", nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(reconciler.PlanJSON(c.Plan, true))
	var got, wantV map[string]any
	_ = json.Unmarshal([]byte(a.body), &got)
	_ = json.Unmarshal(want, &wantV)
	delete(got, "revision") // a directory's revision and a request's are digests of the same files, computed alike
	delete(wantV, "revision")
	// The SDKs' FileValidateResponse is beside the report: the errors again,
	// located by file, and what the validation did not check.
	for _, k := range []string{"schema_version", "diagnostics", "deferred_resolutions", "state_dependent_checks_not_run", "validation_scope"} {
		if _, ok := got[k]; !ok {
			t.Fatalf("validate lacks %s: %s", k, a.body)
		}
		delete(got, k)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(wantV)
	if string(g) != string(w) {
		t.Fatalf("validate answered\n%s\nthe dry-run reports\n%s", g, w)
	}
	if got["valid"] != false || !strings.Contains(a.body, `"line":2,"column":9`) || !strings.Contains(a.body, `did you mean \"issue_labeled\"`) {
		t.Fatalf("the errors are not positioned: %s", a.body)
	}
	// A file over the limit is reported, not read; the others still are.
	big, _ := json.Marshal(map[string]any{"files": []map[string]string{{"path": "agents/big/agent.md", "content": strings.Repeat("x", 1<<20+1)},
		{"path": "factory.yaml", "content": files["factory.yaml"]}}})
	if a := post(t, h.url+"/v1/factory-files/validate", "", string(big), "Authorization", "Bearer "+adminKey); a.status != 200 ||
		!strings.Contains(a.body, `"file":"agents/big/agent.md"`) || !strings.Contains(a.body, "the limit is 1 MiB") {
		t.Fatalf("an oversized file: %d %.300s", a.status, a.body)
	}
	for _, bad := range []string{`{"files":[]}`, `{"files":[{"path":"../x","content":""}]}`, `{"files":[{"path":"/etc/passwd","content":""}]}`,
		`{"files":[{"path":"a.yaml"}]}`, `not json`} {
		if a := post(t, h.url+"/v1/factory-files/validate", "", bad, "Authorization", "Bearer "+adminKey); a.status != 400 {
			t.Fatalf("%s: %d %s", bad, a.status, a.body)
		}
	}
}

// TestValidateIsBounded: a read key drove the server's memory with
// validations (each holds several times its body, bodies of 65 MiB were
// read, and any number ran at once). The attack, both ways: a body over
// the limit is refused by its size before it is read (413), and past the
// validations that may run at once the next is answered 429, at once and
// unread, with Retry-After, as the problem type resource_unavailable.
func TestValidateIsBounded(t *testing.T) {
	h := start(t)
	const readKey = "fk_test_read_key_00000000000000000000000000"
	b := h.store.NewBatch()
	b.PutAPIKey(readKey, &factory.APIKey{Name: "pr-check", Scope: factory.ScopeRead, CreatedAt: time.Now()})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	auth := []string{"Authorization", "Bearer " + readKey}
	big := `{"files":[{"path":"factory.yaml","content":"` + strings.Repeat("x", 8<<20) + `"}]}`
	if a := post(t, h.url+"/v1/factory-files/validate", "", big, auth...); a.status != 413 ||
		!strings.Contains(a.body, `"type":"https://factory.invalid/errors/payload_too_large"`) || !strings.Contains(a.body, "8 MiB") {
		t.Errorf("a body over the limit: %d %.300s", a.status, a.body)
	}

	// Two validations whose bodies never end hold every slot.
	for range 2 {
		pr, pw := io.Pipe()
		req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/factory-files/validate", pr)
		req.Header.Set("Authorization", "Bearer "+readKey)
		go func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		if _, err := pw.Write([]byte(`{"files":[`)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pw.Close() })
	}
	small := `{"files":[{"path":"factory.yaml","content":"schemaVersion: v1alpha1\n"}]}`
	var a answer
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if a = post(t, h.url+"/v1/factory-files/validate", "", small, auth...); a.status == 429 {
			break
		}
	}
	if a.status != 429 || a.header.Get("Retry-After") == "" || !strings.Contains(a.body, `"type":"https://factory.invalid/errors/resource_unavailable"`) {
		t.Fatalf("a validation past the ones that may run at once: %d %v %.300s", a.status, a.header, a.body)
	}
}
