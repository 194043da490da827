package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// artifactScript is an agent that reports what the platform API's
// artifacts are: a file in its output folder, described by the manifest,
// a pull request and a plan.
const artifactScript = `cd "$FACTORY_OUTPUT_DIR" && printf '# report\n' > REPORT.md && printf '1. fix it\n' > plan.md &&
cat > artifacts.jsonl <<'JSONL'
{"artifact_type":"FILE","file":"REPORT.md","description":"the report"}
{"artifact_type":"PLAN","file":"plan.md","title":"The plan"}
{"artifact_type":"PULL_REQUEST","url":"https://github.com/acme/app/pull/42","branch":"fix-42"}
JSONL`

func TestArtifacts(t *testing.T) {
	h := runsServer(t, 2, artifactScript)
	id := createRun(t, h, map[string]any{"prompt": "report"})
	run := waitState(t, h, id, "SUCCEEDED")
	arts, _ := run["artifacts"].([]any)
	byType := map[string]map[string]any{}
	for _, a := range arts {
		m := a.(map[string]any)
		if m["created_at"] == nil {
			t.Errorf("artifact without created_at: %v", m)
		}
		byType[m["artifact_type"].(string)] = m["data"].(map[string]any)
	}
	if len(arts) != 3 {
		t.Fatalf("artifacts: %v", arts)
	}
	// Each type's required fields, as the SDKs' ArtifactItem union has them.
	for typ, fields := range map[string][]string{"FILE": {"artifact_uid", "filename", "filepath", "mime_type"},
		"PLAN": {"document_uid"}, "PULL_REQUEST": {"url", "branch"}} {
		for _, f := range fields {
			if v, ok := byType[typ][f].(string); !ok || v == "" {
				t.Errorf("%s lacks %s: %v", typ, f, byType[typ])
			}
		}
	}
	file := byType["FILE"]
	if file["filename"] != "REPORT.md" || file["size_bytes"] != float64(9) || file["description"] != "the report" {
		t.Errorf("file: %v", file)
	}
	artifactDownload(t, h, file["artifact_uid"].(string))
	artifactPlan(t, h, byType["PLAN"]["artifact_uid"].(string))
	artifactLookups(t, h, id)
}

// artifactDownload: the artifact's answer has a download URL that works
// without a key until it expires, and not for another artifact or when
// changed; with a key the download works without a token.
func artifactDownload(t *testing.T, h *harness, uid string) {
	status, b := call(t, h, "GET", "/v1/agent/artifacts/"+uid, nil)
	var got struct {
		Type, UID, Created string
		Data               map[string]any
	}
	var raw map[string]any
	json.Unmarshal(b, &raw)
	json.Unmarshal(b, &got)
	if status != 200 || raw["artifact_type"] != "FILE" || raw["artifact_uid"] != uid || raw["created_at"] == nil {
		t.Fatalf("get artifact: %d %s", status, b)
	}
	for _, f := range []string{"content_type", "download_url", "expires_at", "filename"} {
		if _, ok := got.Data[f].(string); !ok {
			t.Errorf("the FILE answer lacks %s: %s", f, b)
		}
	}
	link := got.Data["download_url"].(string)
	resp, err := http.Get(link) // no API key
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "# report\n" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/markdown") ||
		resp.Header.Get("Content-Security-Policy") != "sandbox" {
		t.Errorf("download: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	u, _ := url.Parse(link)
	token := u.Query().Get("token")
	for name, path := range map[string]string{
		"changed token":  "/v1/agent/artifacts/" + uid + "/download?token=" + url.QueryEscape(token+"x"),
		"other artifact": "/v1/agent/artifacts/00000000-0000-4000-8000-000000000000/download?token=" + url.QueryEscape(token),
	} {
		resp, err := http.Get(h.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("%s: %d, want 403", name, resp.StatusCode)
		}
	}
	if resp, _ := http.Get(h.url + "/v1/agent/artifacts/" + uid + "/download"); resp.StatusCode != 401 {
		t.Errorf("no token and no key: %d, want 401", resp.StatusCode)
	}
	if status, b := call(t, h, "GET", "/v1/agent/artifacts/"+uid+"/download", nil); status != 200 || string(b) != "# report\n" {
		t.Errorf("with a key: %d %q", status, b)
	}
	if status, _ := call(t, h, "GET", "/v1/agent/artifacts/nope", nil); status != 404 {
		t.Errorf("an unknown artifact: %d", status)
	}
}

// artifactPlan: a plan's answer holds its content.
func artifactPlan(t *testing.T, h *harness, uid string) {
	status, b := call(t, h, "GET", "/v1/agent/artifacts/"+uid, nil)
	var got struct {
		Type string         `json:"artifact_type"`
		Data map[string]any `json:"data"`
	}
	json.Unmarshal(b, &got)
	if status != 200 || got.Type != "PLAN" || got.Data["content"] != "1. fix it\n" || got.Data["title"] != "The plan" ||
		got.Data["document_uid"] == nil || got.Data["notebook_uid"] == nil || got.Data["content_type"] == nil {
		t.Errorf("plan: %d %s", status, b)
	}
}

// artifactLookups: the run by its pull request's URL, and the list
// filtered by artifact type.
func artifactLookups(t *testing.T, h *harness, id string) {
	status, b := call(t, h, "GET", "/v1/agent/run-by-external-reference?url="+url.QueryEscape("https://github.com/acme/app/pull/42"), nil)
	if status != 200 || !strings.Contains(string(b), `"run_id":"`+id+`"`) {
		t.Errorf("run by reference: %d %s", status, b)
	}
	if status, _ := call(t, h, "GET", "/v1/agent/run-by-external-reference?url=https://x/pull/1", nil); status != 404 {
		t.Errorf("an unknown reference: %d", status)
	}
	other := createRun(t, h, map[string]any{"prompt": "another", "config": map[string]any{"environment_id": "other"}})
	waitState(t, h, other, "SUCCEEDED")
	if ids, _ := listIDs(t, h, "artifact_type=PULL_REQUEST"); !slices.Equal(ids, []string{id}) {
		t.Errorf("artifact_type=PULL_REQUEST: %v, want %v", ids, []string{id})
	}
	if ids, _ := listIDs(t, h, "artifact_type=SCREENSHOT"); len(ids) != 0 {
		t.Errorf("artifact_type=SCREENSHOT: %v", ids)
	}
}

func TestListParametersOfThePlatformAPI(t *testing.T) {
	h := runsServer(t, 4, `true`)
	mk := func(body map[string]any) string {
		id := createRun(t, h, body)
		waitState(t, h, id, "SUCCEEDED")
		return id
	}
	banana := mk(map[string]any{"prompt": "peel it", "title": "banana", "skill": "acme/tools:fruit", "metadata": map[string]string{"ticket": "T-1", "team": "a"}})
	apple := mk(map[string]any{"prompt": "Find the WORM", "title": "Apple", "metadata": map[string]string{"ticket": "T-2", "team": "a"}})
	cherry := mk(map[string]any{"prompt": "pit it", "title": "cherry", "skill": "acme/tools:berry", "parent_run_id": apple})
	grand := mk(map[string]any{"prompt": "deeper", "title": "apple pie", "parent_run_id": cherry})
	for q, want := range map[string][]string{
		"sort_by=title&sort_order=asc":           {apple, grand, banana, cherry},
		"sort_by=title&sort_order=desc":          {cherry, banana, grand, apple},
		"q=worm":                                 {apple},
		"q=APPLE&sort_by=title&sort_order=asc":   {apple, grand},
		"q=fruit":                                {banana},
		"q=" + cherry:                            {cherry},
		"metadata[team]=a&sort_by=created_at":    {apple, banana},
		"metadata[team]=a&metadata[ticket]=T-1":  {banana},
		"metadata[ticket]=T-9":                   nil,
		"ancestor_run_id=" + apple:               {grand, cherry},
		"ancestor_run_id=" + cherry:              {grand},
		"skill=acme/tools:berry":                 {cherry},
		"skill_spec=acme/tools:fruit":            {banana},
		"execution_location=LOCAL":               nil,
		"executor=someone-else":                  nil,
		"factory_only=true":                      nil,
		"source=API&source=CLI&sort_by=title":    {cherry, banana, grand, apple},
		"source=SLACK&source=CLI":                nil,
		"execution_location=REMOTE&q=pit&q=peel": {cherry},
	} {
		ids, _ := listIDs(t, h, q)
		if !slices.Equal(ids, want) {
			t.Errorf("%s: %v, want %v", q, ids, want)
		}
	}
	// By skill, runs without one after them (among themselves, by ID).
	ids, _ := listIDs(t, h, "sort_by=agent&sort_order=asc")
	if len(ids) != 4 || ids[0] != cherry || ids[1] != banana || !slices.Contains(ids[2:], apple) || !slices.Contains(ids[2:], grand) {
		t.Errorf("sort_by=agent: %v, want %s %s then the two without a skill", ids, cherry, banana)
	}
	run := getRun(t, h, grand)
	if run["parent_run_id"] != cherry || run["root_run_id"] != apple {
		t.Errorf("grandchild: parent %v root %v, want %s %s", run["parent_run_id"], run["root_run_id"], cherry, apple)
	}
	if status, _ := call(t, h, "GET", "/v1/agent/runs?ancestor_run_id=run_nonexistent0000000000", nil); status != 404 {
		t.Errorf("an unknown ancestor: %d, want 404", status)
	}
	if status, b := call(t, h, "POST", "/v1/agent/runs", map[string]any{"prompt": "x", "parent_run_id": "run_nope0000000000000000"}); status != 400 ||
		!strings.Contains(string(b), "parent_run_id") {
		t.Errorf("an unknown parent: %d %s", status, b)
	}
	if status, b := call(t, h, "GET", "/v1/agent/runs?metadata[a]=1&metadata[b]=1&metadata[c]=1&metadata[d]=1&metadata[e]=1&metadata[f]=1", nil); status != 400 {
		t.Errorf("six metadata pairs: %d %s", status, b)
	}
}

// TestTitlePagingWhileRunsChange: pages of a title order neither repeat
// nor miss a run while runs change state between them.
func TestTitlePagingWhileRunsChange(t *testing.T) {
	h := runsServer(t, 50, `sleep 30`)
	var all []string
	for i := 0; i < 30; i++ {
		all = append(all, createRun(t, h, map[string]any{"prompt": fmt.Sprintf("run %02d", i)}))
	}
	for _, id := range all {
		waitState(t, h, id, "INPROGRESS")
	}
	seen := map[string]int{}
	var order []string
	cur := ""
	for page := 0; ; page++ {
		ids, next := listIDs(t, h, "sort_by=title&sort_order=asc&limit=7&cursor="+url.QueryEscape(cur))
		for _, id := range ids {
			seen[id]++
			order = append(order, id)
		}
		if page < 3 {
			for _, id := range []string{all[page], all[len(all)-1-page], ids[0]} {
				call(t, h, "POST", "/v1/agent/runs/"+id+"/cancel", nil)
			}
		}
		if next == "" {
			break
		}
		cur = next
	}
	if !slices.Equal(order, all) {
		t.Fatalf("title order while runs changed:\n%v\nwant\n%v", order, all)
	}
}

// TestInterruptAndConversation: an interrupt stops the turn (the agent's
// group gets SIGINT) and leaves the run BLOCKED; a follow-up continues it;
// the conversation shows both turns.
func TestInterruptAndConversation(t *testing.T) {
	h := runsServer(t, 2, `if [ -n "$FACTORY_FOLLOWUP" ]; then echo "continuing: $FACTORY_FOLLOWUP"; exit 0; fi
trap 'echo got SIGINT; exit 130' INT
echo working
while :; do sleep 0.05; done`)
	// (An idle timeout of a minute bounds the test if the interrupt is lost.)
	id := createRun(t, h, map[string]any{"prompt": "work until stopped", "config": map[string]any{"idle_timeout_minutes": 1}})
	waitState(t, h, id, "INPROGRESS")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := getRun(t, h, id); m["status_message"] != nil || time.Now().After(deadline) {
			break // the agent has said "working": its trap is set
		}
	}
	if status, b := call(t, h, "POST", "/v1/agent/runs/"+id+"/interrupt", nil); status != 202 {
		_, timeline := call(t, h, "GET", "/v1/agent/runs/"+id+"/timeline", nil)
		t.Fatalf("interrupt: %d %s\nrun %v\ntimeline %s", status, b, getRun(t, h, id), timeline)
	}
	run := waitState(t, h, id, "BLOCKED")
	if run["finished_at"] != nil {
		t.Errorf("a blocked run has finished_at %v", run["finished_at"])
	}
	if status, b := call(t, h, "POST", "/v1/agent/runs/"+id+"/interrupt", nil); status != 409 {
		t.Errorf("interrupting a blocked run: %d %s", status, b)
	}
	status, b := call(t, h, "POST", "/v1/agent/runs/"+id+"/followups", map[string]any{"message": "go on"})
	if status != 200 || !strings.Contains(string(b), `"outcome":"queued_prompt"`) {
		t.Fatalf("follow-up: %d %s", status, b)
	}
	waitState(t, h, id, "SUCCEEDED")
	if status, _ := call(t, h, "POST", "/v1/agent/runs/run_nope0000000000000000/interrupt", nil); status != 404 {
		t.Errorf("interrupting an unknown run: %d", status)
	}
	status, b = call(t, h, "GET", "/v1/agent/runs/"+id+"/conversation", nil)
	var conv struct {
		RunID          string `json:"run_id"`
		ConversationID string `json:"conversation_id"`
		Turns          []struct {
			Index    int    `json:"index"`
			Prompt   string `json:"prompt"`
			State    string `json:"state"`
			Messages []struct{ Role, Kind, Text string }
		} `json:"turns"`
	}
	if err := json.Unmarshal(b, &conv); err != nil || status != 200 || conv.RunID != id || conv.ConversationID == "" || len(conv.Turns) != 2 {
		t.Fatalf("conversation: %d %s", status, b)
	}
	first, second := conv.Turns[0], conv.Turns[1]
	text := func(turn int) string { b, _ := json.Marshal(conv.Turns[turn].Messages); return string(b) }
	if first.Prompt != "work until stopped" || first.State != "BLOCKED" || !strings.Contains(text(0), "got SIGINT") {
		t.Errorf("first turn: %+v", first)
	}
	if second.Prompt != "go on" || second.State != "SUCCEEDED" || !strings.Contains(text(1), "continuing: go on") {
		t.Errorf("second turn: %+v", second)
	}
	_, b = call(t, h, "GET", "/v1/agent/runs/"+id+"/timeline", nil)
	if !strings.Contains(string(b), `"event_type":"oz_run_blocked"`) {
		t.Errorf("the timeline has no oz_run_blocked: %s", b)
	}
}

// TestFollowUpAttachments: a follow-up attaches an artifact (of another
// run), which the next turn finds in its attachments folder.
func TestFollowUpAttachments(t *testing.T) {
	h := runsServer(t, 2, `if [ -n "$FACTORY_FOLLOWUP" ]; then echo "read: $(cat "$FACTORY_ATTACHMENTS_DIR/prev.md")"; exit 0; fi
`+artifactScript)
	first := createRun(t, h, map[string]any{"prompt": "report"})
	run := waitState(t, h, first, "SUCCEEDED")
	var uid string
	for _, a := range run["artifacts"].([]any) {
		if m := a.(map[string]any); m["artifact_type"] == "FILE" {
			uid = m["data"].(map[string]any)["artifact_uid"].(string)
		}
	}
	second := createRun(t, h, map[string]any{"prompt": "start"})
	waitState(t, h, second, "SUCCEEDED")
	for body, want := range map[string]string{
		`{"message":"x","attachments":[{"attachment_id":"nope"}]}`:                           "no artifact",
		`{"message":"x","attachments":[{"attachment_id":"` + uid + `","file_name":"../x"}]}`: "attachments",
		`{"message":"x","mode":"turbo"}`:                                                     "mode",
	} {
		if status, b := call(t, h, "POST", "/v1/agent/runs/"+second+"/followups", body); status != 400 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %s", body, status, b)
		}
	}
	status, b := call(t, h, "POST", "/v1/agent/runs/"+second+"/followups",
		map[string]any{"message": "use the report", "mode": "normal", "attachments": []map[string]string{{"attachment_id": uid, "file_name": "prev.md"}}})
	if status != 200 || !strings.Contains(string(b), `"outcome":"handoff_execution"`) || !strings.Contains(string(b), `"followup_id":"`) {
		t.Fatalf("follow-up: %d %s", status, b)
	}
	run = waitState(t, h, second, "SUCCEEDED")
	_, b = call(t, h, "GET", "/v1/agent/runs/"+second+"/timeline", nil)
	if !strings.Contains(string(b), "read: # report") {
		t.Errorf("the second turn did not read the attachment: %s", b)
	}
	if atts, _ := run["attachments"].([]any); len(atts) != 1 {
		t.Errorf("attachments: %v", run["attachments"])
	}
}
