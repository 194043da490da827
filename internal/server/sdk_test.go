package server_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ozSDK is the official TypeScript SDK of the Oz Agent API, pinned.
const ozSDK = "oz-agent-sdk@1.0.0-alpha.8"

// sdkScript uses the SDK exactly as a user would, pointed at this server.
const sdkScript = `
const OzAPI = require('oz-agent-sdk').default;
const { NotFoundError, AuthenticationError } = require('oz-agent-sdk');
(async () => {
  const out = {};
  const client = new OzAPI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY, maxRetries: 0 });
  const first = await client.agent.run({ prompt: 'first: keep working', title: 'from the SDK' });
  const second = await client.agent.run({ prompt: 'second', config: { name: 'sdk-test' } });
  out.created = [first, second];
  await new Promise(r => setTimeout(r, 300));
  const list = await client.agent.runs.list({ state: ['QUEUED', 'INPROGRESS'], limit: 10 });
  out.listed = list.runs.map(r => [r.run_id, r.state]);
  out.filtered = (await client.agent.runs.list({ name: 'sdk-test' })).runs.map(r => r.run_id);
  out.retrieved = await client.agent.runs.retrieve(first.run_id);
  out.cancelled = await client.agent.runs.cancel(second.run_id);
  try { await client.agent.runs.retrieve('run_does_not_exist'); } catch (e) {
    out.notFound = { isNotFound: e instanceof NotFoundError, status: e.status };
  }
  const anonymous = new OzAPI({ baseURL: process.env.BASE_URL, apiKey: 'not-a-key', maxRetries: 0 });
  try { await anonymous.agent.runs.list(); } catch (e) {
    out.unauthenticated = { isAuthentication: e instanceof AuthenticationError, status: e.status };
  }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(1); });
`

// TestOfficialTypeScriptSDK installs the official SDK from the npm registry
// and drives a real server with it.
func TestOfficialTypeScriptSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("installs an npm package")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"sdk-test","private":true}`), 0o644)
	install := exec.Command("npm", "install", "--no-audit", "--no-fund", "--loglevel=error", ozSDK)
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s: %v\n%s", ozSDK, err, out)
	}
	os.WriteFile(filepath.Join(dir, "test.js"), []byte(sdkScript), 0o644)

	h := runsServer(t, 1, `sleep 20`)
	node := exec.Command("node", "test.js")
	node.Dir = dir
	node.Env = append(os.Environ(), "BASE_URL="+h.url+"/v1", "API_KEY="+runsKey)
	out, err := node.CombinedOutput()
	if err != nil {
		t.Fatalf("the SDK script failed: %v\n%s", err, out)
	}
	var res struct {
		Created []struct {
			RunID string `json:"run_id"`
			State string `json:"state"`
		} `json:"created"`
		Listed          [][2]string    `json:"listed"`
		Filtered        []string       `json:"filtered"`
		Retrieved       map[string]any `json:"retrieved"`
		Cancelled       string         `json:"cancelled"`
		NotFound        map[string]any `json:"notFound"`
		Unauthenticated map[string]any `json:"unauthenticated"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(out))), &res); err != nil {
		t.Fatalf("SDK output: %v\n%s", err, out)
	}
	first, second := res.Created[0], res.Created[1]
	if first.State != "QUEUED" || second.State != "QUEUED" || first.RunID == "" {
		t.Fatalf("created: %+v", res.Created)
	}
	if len(res.Listed) != 2 || res.Listed[0][0] != second.RunID && res.Listed[1][0] != second.RunID {
		t.Fatalf("listed with a state filter: %v", res.Listed)
	}
	if len(res.Filtered) != 1 || res.Filtered[0] != second.RunID {
		t.Fatalf("listed by name: %v", res.Filtered)
	}
	if res.Retrieved["run_id"] != first.RunID || res.Retrieved["title"] != "from the SDK" || res.Retrieved["state"] != "INPROGRESS" {
		t.Fatalf("retrieved: %v", res.Retrieved)
	}
	if res.Cancelled != second.RunID {
		t.Fatalf("cancelled: %q", res.Cancelled)
	}
	if res.NotFound["isNotFound"] != true || res.NotFound["status"] != 404.0 {
		t.Fatalf("404: %v", res.NotFound)
	}
	if res.Unauthenticated["isAuthentication"] != true || res.Unauthenticated["status"] != 401.0 {
		t.Fatalf("401: %v", res.Unauthenticated)
	}
}
