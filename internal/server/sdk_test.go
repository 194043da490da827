package server_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory/internal/server"
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

// scheduleScript drives the seven schedules calls of the SDK; the
// schedule fires every second for a while before it is deleted.
const scheduleScript = `
const OzAPI = require('oz-agent-sdk').default;
(async () => {
  const out = {};
  const client = new OzAPI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY, maxRetries: 0 });
  out.created = await client.agent.schedules.create({ name: 'nightly', cron_schedule: '0 3 * * *', prompt: 'Summarise the night', enabled: true, metadata: { team: 'web' } });
  const id = out.created.id;
  out.listed = (await client.agent.schedules.list()).schedules.map(s => s.id);
  out.retrieved = await client.agent.schedules.retrieve(id);
  out.updated = await client.agent.schedules.update(id, { name: 'every second', cron_schedule: '@every 1s', enabled: true, prompt: 'Tick' });
  out.paused = await client.agent.schedules.pause(id);
  out.resumed = await client.agent.schedules.resume(id);
  await new Promise(r => setTimeout(r, 2600));
  out.afterRuns = await client.agent.schedules.retrieve(id);
  out.deleted = await client.agent.schedules.delete(id);
  try { await client.agent.schedules.retrieve(id); } catch (e) { out.gone = e.status; }
  try { await client.agent.schedules.create({ name: 'bad', cron_schedule: 'every tuesday', prompt: 'x' }); } catch (e) { out.badCron = e.status; }
  out.id = id;
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

	// The schedules' part fires a schedule every second: the minimum
	// interval is lowered for it.
	h := startConfigured(t, func(c *server.Config) { c.Schedules.MinInterval = time.Second }, runsManager(1, `sleep 20`))
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
	checkSDKSchedules(t, h, dir)
}

// checkSDKSchedules runs scheduleScript against h and checks the answers
// and the runs the schedule started.
func checkSDKSchedules(t *testing.T, h *harness, dir string) {
	t.Helper()
	os.WriteFile(filepath.Join(dir, "schedules.js"), []byte(scheduleScript), 0o644)
	node := exec.Command("node", "schedules.js")
	node.Dir = dir
	node.Env = append(os.Environ(), "BASE_URL="+h.url+"/v1", "API_KEY="+runsKey)
	out, err := node.CombinedOutput()
	if err != nil {
		t.Fatalf("the SDK schedules script failed: %v\n%s", err, out)
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	id := checkScheduleAnswers(t, res)
	checkScheduledRuns(t, h, id)
}

// checkScheduleAnswers checks the SDK's answers, call by call; it returns
// the schedule's ID.
func checkScheduleAnswers(t *testing.T, res map[string]any) string {
	t.Helper()
	item := func(k string) map[string]any { m, _ := res[k].(map[string]any); return m }
	id, _ := res["id"].(string)
	created, updated := item("created"), item("updated")
	hist, _ := created["history"].(map[string]any)
	if !strings.HasPrefix(id, "sch_") || created["name"] != "nightly" || created["cron_schedule"] != "0 3 * * *" || created["enabled"] != true ||
		created["prompt"] != "Summarise the night" || created["created_at"] == nil || created["updated_at"] == nil || hist["next_run"] == nil {
		t.Fatalf("created: %v", created)
	}
	if ids, _ := res["listed"].([]any); len(ids) != 1 || ids[0] != id || item("retrieved")["id"] != id {
		t.Fatalf("listed %v, retrieved %v", res["listed"], item("retrieved"))
	}
	if updated["cron_schedule"] != "@every 1s" || updated["name"] != "every second" || item("paused")["enabled"] != false || item("resumed")["enabled"] != true {
		t.Fatalf("updated %v, paused %v, resumed %v", updated, item("paused"), item("resumed"))
	}
	if h2, _ := item("afterRuns")["history"].(map[string]any); h2["last_ran"] == nil {
		t.Fatalf("the schedule never ran: %v", item("afterRuns"))
	}
	if item("deleted")["success"] != true || res["gone"] != 404.0 || res["badCron"] != 400.0 {
		t.Fatalf("deleted %v, then %v; a bad cron: %v", item("deleted"), res["gone"], res["badCron"])
	}
	return id
}

// checkScheduledRuns: the runs the schedule started list under its ID,
// each with its schedule.
func checkScheduledRuns(t *testing.T, h *harness, id string) {
	t.Helper()
	code, body := call(t, h, "GET", "/v1/agent/runs?schedule_id="+id, nil)
	var list struct {
		Runs []struct {
			Source   string         `json:"source"`
			Schedule map[string]any `json:"schedule"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(body, &list); err != nil || code != 200 || len(list.Runs) == 0 {
		t.Fatalf("runs of the schedule: %d %s", code, body)
	}
	for _, r := range list.Runs {
		if r.Source != "SCHEDULED_AGENT" || r.Schedule["schedule_id"] != id || r.Schedule["schedule_name"] != "every second" || r.Schedule["cron_schedule"] != "@every 1s" {
			t.Fatalf("a scheduled run: %+v", r)
		}
	}
}
