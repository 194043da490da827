package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"factory"

	"factory/client"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
)

const runsKey = "fk_test_runs_key_00000000000000000000000000"

// runsServer is a server whose default environment runs a shell script.
func runsServer(t testing.TB, max int, script string) *harness {
	t.Helper()
	return startWith(t, runsManager(max, script))
}

// runsManager is runsServer's run manager, for startConfigured.
func runsManager(max int, script string) func(*store.Store, string) *runs.Manager {
	return func(s *store.Store, data string) *runs.Manager {
		b := s.NewBatch()
		b.PutAPIKey(runsKey, &factory.APIKey{Name: "ci", Scope: factory.ScopeRuns, Prefix: runsKey[:8], CreatedAt: time.Now()})
		b.Commit()
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "default", MaxConcurrent: max,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Environments: map[string]runs.Environment{
				"default": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", script}, Grace: 200 * time.Millisecond}},
				"other":   {Executor: &runtime.ExecExecutor{Command: []string{"true"}}},
			}})
	}
}

// call sends a request with the runs key and decodes a JSON answer.
func call(t testing.TB, h *harness, method, path string, body any, headers ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = strings.NewReader(s)
		} else {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
	}
	req, _ := http.NewRequest(method, h.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+runsKey)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func createRun(t *testing.T, h *harness, body any) string {
	t.Helper()
	status, b := call(t, h, "POST", "/v1/agent/runs", body)
	var out struct{ RunID, TaskID, State string }
	json.Unmarshal(b, &out)
	var raw map[string]string
	json.Unmarshal(b, &raw)
	if status != 200 || raw["run_id"] == "" || raw["task_id"] != raw["run_id"] || raw["state"] != "QUEUED" {
		t.Fatalf("create: %d %s", status, b)
	}
	return raw["run_id"]
}

func getRun(t *testing.T, h *harness, id string) map[string]any {
	t.Helper()
	status, b := call(t, h, "GET", "/v1/agent/runs/"+id, nil)
	if status != 200 {
		t.Fatalf("get %s: %d %s", id, status, b)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

func waitState(t *testing.T, h *harness, id, state string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m := getRun(t, h, id)
		if m["state"] == state {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %v, want %s", id, m["state"], state)
		}
	}
}

func TestAgentsAPI(t *testing.T) {
	h := runsServer(t, 1, `if [ -e PROMPT.md ] && grep -q sleep PROMPT.md; then sleep 30; fi; echo "did: $(cat PROMPT.md)"`)
	ctx := context.Background()

	// Authentication and scopes.
	if err := client.New(h.url, "").Do(ctx, "GET", "/v1/agent/runs", nil, nil); err == nil || client.StatusOf(err) != 401 {
		t.Fatalf("no key: %v", err)
	}
	if _, err := client.New(h.url, runsKey).Secrets(ctx); err == nil || client.StatusOf(err) != 403 {
		t.Fatalf("a runs key on an admin call: %v", err)
	}

	id := agentsCreate(t, h)
	agentsAttachments(t, h)
	agentsValidation(t, h)
	agentsIdempotency(t, h)
	agentsCancel(t, h, id)
	agentsFollowUp(t, h, id)
}

// agentsCreate creates on both paths; the run finishes.
func agentsCreate(t *testing.T, h *harness) string {
	id := createRun(t, h, map[string]any{"prompt": "Say hi", "title": "greeting", "metadata": map[string]string{"team": "ci"},
		"config": map[string]any{"name": "greeter", "model_id": "m1"}, "some_future_field": true})
	status, b := call(t, h, "POST", "/v1/agent/run", map[string]any{"prompt": "old path"})
	if status != 200 || !strings.Contains(string(b), `"state":"QUEUED"`) {
		t.Fatalf("old path: %d %s", status, b)
	}
	run := waitState(t, h, id, "SUCCEEDED")
	cfg, _ := run["agent_config"].(map[string]any)
	if run["title"] != "greeting" || run["source"] != "API" || cfg["idle_timeout_minutes"].(float64) != 10 || cfg["environment_id"] != "default" ||
		run["creator"].(map[string]any)["display_name"] != "ci" || run["started_at"] == nil {
		t.Fatalf("run %v", run)
	}
	return id
}

// agentsAttachments: attachments are kept with the run and served back
// byte for byte.
func agentsAttachments(t *testing.T, h *harness) {
	data := "line one\r\n\x00binary"
	att := createRun(t, h, map[string]any{"prompt": "with a file", "attachments": []map[string]string{
		{"file_name": "notes.bin", "mime_type": "application/octet-stream", "data": base64.StdEncoding.EncodeToString([]byte(data))}}})
	if status, b := call(t, h, "GET", "/v1/agent/runs/"+att+"/attachments/notes.bin", nil); status != 200 || string(b) != data {
		t.Fatalf("attachment: %d %q", status, b)
	}
	if status, _ := call(t, h, "GET", "/v1/agent/runs/"+att+"/attachments/other.bin", nil); status != 404 {
		t.Fatalf("missing attachment: %d", status)
	}
	if r := getRun(t, h, att); fmt.Sprint(r["attachments"]) != "[map[file_name:notes.bin mime_type:application/octet-stream size:17]]" {
		t.Fatalf("attachments in the run: %v", r["attachments"])
	}

}

// agentsValidation: validation names the field.
func agentsValidation(t *testing.T, h *harness) {
	for body, want := range map[string]string{
		`{}`:            "prompt: required",
		`{"prompt": 5}`: "prompt: must be string",
		`{"prompt": "x", "config": {"idle_timeout_minutes": 0}}`:                  "config/idle_timeout_minutes",
		`{"prompt": "x", "config": {"environment_id": "nope"}}`:                   "no environment",
		`{"prompt": "x", "attachments": [{"file_name": "a.txt", "data": "%%%"}]}`: "attachments[0].data: must be base64",
		`{"prompt": "x", "attachments": [{"file_name": "../a", "data": ""}]}`:     "attachments[0].file_name",
		`{"prompt":`: "not valid JSON",
	} {
		status, b := call(t, h, "POST", "/v1/agent/runs", body)
		if status != 400 || !strings.Contains(string(b), want) || !strings.Contains(string(b), `"type":"https://factory.invalid/errors/invalid_request"`) {
			t.Errorf("%s: %d %s, want 400 with %q", body, status, b, want)
		}
	}

}

// agentsIdempotency: Idempotency-Key: same body, same run; other body, 409.
func agentsIdempotency(t *testing.T, h *harness) {
	s1, b1 := call(t, h, "POST", "/v1/agent/runs", `{"prompt":"once"}`, "Idempotency-Key", "k-1")
	s2, b2 := call(t, h, "POST", "/v1/agent/runs", `{"prompt":"once"}`, "Idempotency-Key", "k-1")
	s3, _ := call(t, h, "POST", "/v1/agent/runs", `{"prompt":"twice"}`, "Idempotency-Key", "k-1")
	if s1 != 200 || s2 != 200 || strings.TrimSpace(string(b1)) != strings.TrimSpace(string(b2)) || s3 != 409 {
		t.Fatalf("idempotency: %d %s / %d %s / %d", s1, b1, s2, b2, s3)
	}

}

// agentsCancel cancels a running, a queued and a finished run; the answer
// is the bare run ID.
func agentsCancel(t *testing.T, h *harness, finished string) {
	running := createRun(t, h, map[string]any{"prompt": "sleep please"})
	queued := createRun(t, h, map[string]any{"prompt": "after"})
	waitState(t, h, running, "INPROGRESS")
	status, b := call(t, h, "POST", "/v1/agent/runs/"+queued+"/cancel", nil)
	if status != 200 || string(bytes.TrimSpace(b)) != `"`+queued+`"` {
		t.Fatalf("cancel queued: %d %s", status, b)
	}
	waitState(t, h, queued, "CANCELLED")
	call(t, h, "POST", "/v1/agent/runs/"+running+"/cancel", nil)
	waitState(t, h, running, "CANCELLED")
	if status, _ := call(t, h, "POST", "/v1/agent/runs/"+finished+"/cancel", nil); status != 400 {
		t.Fatalf("cancel a finished run: %d", status)
	}
	if status, _ := call(t, h, "POST", "/v1/agent/runs/run_nope/cancel", nil); status != 404 {
		t.Fatalf("cancel an unknown run: %d", status)
	}

}

// agentsFollowUp: a follow-up continues a finished run.
func agentsFollowUp(t *testing.T, h *harness, id string) {
	if status, b := call(t, h, "POST", "/v1/agent/runs/"+id+"/followups", map[string]string{"message": "and again"}); status != 200 ||
		!regexp.MustCompile(`^\{"followup_id":"fu_[0-9a-z]{24}","outcome":"handoff_execution"\}$`).MatchString(strings.TrimSpace(string(b))) {
		t.Fatalf("follow-up: %d %s", status, b)
	}
	waitState(t, h, id, "SUCCEEDED")
	status, b := call(t, h, "GET", "/v1/agent/runs/"+id+"/timeline", nil)
	if status != 200 || strings.Count(string(b), `"kind":"started"`) != 2 || !strings.Contains(string(b), `"kind":"followup","message":"and again"`) {
		t.Fatalf("timeline: %s", b)
	}
	if status, _ := call(t, h, "POST", "/v1/agent/runs/"+id+"/followups", `{"message":""}`); status != 400 {
		t.Fatalf("an empty follow-up: %d", status)
	}
	if status, _ := call(t, h, "GET", "/v1/agent/runs/run_nope", nil); status != 404 {
		t.Fatalf("get unknown: %d", status)
	}
}

func listIDs(t *testing.T, h *harness, query string) ([]string, string) {
	t.Helper()
	status, b := call(t, h, "GET", "/v1/agent/runs?"+query, nil)
	if status != 200 {
		t.Fatalf("list %s: %d %s", query, status, b)
	}
	var out struct {
		Runs []struct {
			RunID string `json:"run_id"`
		} `json:"runs"`
		PageInfo struct {
			HasNext bool   `json:"has_next_page"`
			Next    string `json:"next_cursor"`
		} `json:"page_info"`
	}
	json.Unmarshal(b, &out)
	var ids []string
	for _, r := range out.Runs {
		ids = append(ids, r.RunID)
	}
	if out.PageInfo.HasNext != (out.PageInfo.Next != "") {
		t.Fatalf("page_info: %s", b)
	}
	return ids, out.PageInfo.Next
}

func TestListRuns(t *testing.T) {
	h := runsServer(t, 4, `true`)
	var all []string
	for i := 0; i < 30; i++ {
		cfg := map[string]any{"name": fmt.Sprintf("job-%d", i%3), "model_id": fmt.Sprintf("m%d", i%2)}
		if i%5 == 0 {
			cfg["environment_id"] = "other"
		}
		all = append(all, createRun(t, h, map[string]any{"prompt": fmt.Sprintf("run %d", i), "config": cfg}))
	}
	for _, id := range all {
		waitState(t, h, id, "SUCCEEDED")
	}
	between := time.Now().UTC()
	time.Sleep(5 * time.Millisecond)
	late := createRun(t, h, map[string]any{"prompt": "late", "config": map[string]any{"name": "job-0"}})
	waitState(t, h, late, "SUCCEEDED")

	listRunsFilters(t, h, between)
	listRunsOrder(t, h, all)
	listRunsPaging(t, h, append(all, late))
	listRunsRefusals(t, h)
}

// listRunsFilters counts, page by page, what each filter lists.
func listRunsFilters(t *testing.T, h *harness, between time.Time) {
	count := func(q string) int {
		total, cur := 0, ""
		for {
			ids, next := listIDs(t, h, q+"&limit=7&cursor="+url.QueryEscape(cur))
			total += len(ids)
			if next == "" {
				return total
			}
			cur = next
		}
	}
	for q, want := range map[string]int{
		"sort_by=created_at":            31,
		"name=job-0":                    11,
		"config_name=job-1":             10,
		"model_id=m1":                   15,
		"environment_id=other":          6,
		"source=API":                    31,
		"state=SUCCEEDED":               31,
		"state=QUEUED&state=INPROGRESS": 0,
		"state=QUEUED&state=SUCCEEDED":  31,
		"name=job-0&model_id=m0":        5,
		"name=job-0&environment_id=other&state=SUCCEEDED":                       2,
		"created_after=" + between.Format(time.RFC3339Nano):                     1,
		"sort_by=created_at&created_before=" + between.Format(time.RFC3339Nano): 30,
		"updated_after=" + between.Format(time.RFC3339Nano):                     1,
	} {
		if got := count(q); got != want {
			t.Errorf("%s: %d runs, want %d", q, got, want)
		}
	}

}

// listRunsOrder: both orders, on created_at, are exactly the creation
// order.
func listRunsOrder(t *testing.T, h *harness, all []string) {
	asc, _ := listIDs(t, h, "sort_by=created_at&sort_order=asc&limit=500")
	desc, _ := listIDs(t, h, "sort_by=created_at&limit=500")
	for i := range all {
		if asc[i] != all[i] || desc[len(desc)-1-i] != all[i] {
			t.Fatalf("order at %d: asc %s desc %s want %s", i, asc[i], desc[len(desc)-1-i], all[i])
		}
	}

}

// listRunsPaging: paging while runs are created neither skips nor repeats,
// and the Go client's iteration reaches every run, page after page.
func listRunsPaging(t *testing.T, h *harness, all []string) {
	seen := map[string]int{}
	cur := ""
	for page := 0; ; page++ {
		ids, next := listIDs(t, h, "sort_by=created_at&limit=4&cursor="+url.QueryEscape(cur))
		for _, id := range ids {
			seen[id]++
		}
		if page == 2 {
			createRun(t, h, map[string]any{"prompt": "created while paging"})
		}
		if next == "" {
			break
		}
		cur = next
	}
	for _, id := range all {
		if seen[id] != 1 {
			t.Fatalf("run %s seen %d times while paging", id, seen[id])
		}
	}

	n := 0
	for r, err := range h.c.AllRuns(context.Background(), url.Values{"limit": {"6"}, "sort_by": {"created_at"}}) {
		if err != nil || r.RunID == "" {
			t.Fatalf("iteration: %v", err)
		}
		n++
	}
	if n != len(seen)+1 {
		t.Fatalf("iterated %d runs, want %d", n, len(seen)+1)
	}

}

// listRunsRefusals: bad parameters and cursors are refused, naming them.
func listRunsRefusals(t *testing.T, h *harness) {
	_, next := listIDs(t, h, "sort_by=created_at&limit=2")
	for q, want := range map[string]string{
		"limit=0":                 "limit",
		"limit=501":               "limit",
		"sort_by=name":            "sort_by",
		"artifact_type=PDF":       "artifact_type",
		"metadata[a%2Fb]=x":       "metadata",
		"execution_location=MOON": "execution_location",
		"factory_only=maybe":      "factory_only",
		"sort_order=up":           "sort_order",
		"state=DONE":              "state",
		"created_after=yesterday": "created_after",
		"sort_by=created_at&limit=2&cursor=" + url.QueryEscape(next+"x"): "cursor",
		"sort_by=updated_at&limit=2&cursor=" + url.QueryEscape(next):     "cursor",
	} {
		status, b := call(t, h, "GET", "/v1/agent/runs?"+q, nil)
		if status != 400 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %s", q, status, b)
		}
	}
}

func TestFactoryDispatch(t *testing.T) {
	root := t.TempDir()
	h := startWith(t, func(s *store.Store, data string) *runs.Manager {
		b := s.NewBatch()
		b.PutAPIKey(runsKey, &factory.APIKey{Name: "ci", Scope: factory.ScopeRuns, Prefix: runsKey[:8], CreatedAt: time.Now()})
		b.Commit()
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "default", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Environments: map[string]runs.Environment{"default": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	}, dirSource("acme", root))
	st := h.status("acme")
	status, b := call(t, h, "POST", "/v1/factories/"+st.UID+"/runs", map[string]any{"prompt": "through the factory"})
	var out map[string]string
	json.Unmarshal(b, &out)
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	if r := getRun(t, h, out["run_id"]); r["factory_uid"] != st.UID || r["source"] != "API" {
		t.Fatalf("dispatched run: %v", r)
	}
	id := createRun(t, h, map[string]any{"prompt": "to the foreman", "agent_identity_uid": st.ForemanUID})
	if r := getRun(t, h, id); r["factory_uid"] != st.UID || r["source"] != "API" {
		t.Fatalf("agent_identity_uid run: %v", r)
	}
	if status, _ := call(t, h, "POST", "/v1/agent/runs", map[string]any{"prompt": "x", "agent_identity_uid": "fm_nope"}); status != 400 {
		t.Fatalf("unknown foreman: %d", status)
	}
	ids, _ := listIDs(t, h, "factory_uid="+st.UID)
	if len(ids) != 2 {
		t.Fatalf("factory_uid filter: %v", ids)
	}
}

// TestPagingThousandRuns pages through 1,000 runs, 50 at a time, in both
// orders, while runs are being created: none is skipped or repeated.
func TestPagingThousandRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 runs")
	}
	h := runsServer(t, 4, `true`)
	var all []string
	for i := 0; i < 1000; i++ {
		all = append(all, createRun(t, h, map[string]any{"prompt": fmt.Sprintf("run %d", i)}))
	}
	for _, order := range []string{"asc", "desc"} {
		seen := map[string]int{}
		cur := ""
		for page := 0; ; page++ {
			ids, next := listIDs(t, h, "sort_by=created_at&sort_order="+order+"&limit=50&cursor="+url.QueryEscape(cur))
			for _, id := range ids {
				seen[id]++
			}
			if page%5 == 0 {
				createRun(t, h, map[string]any{"prompt": "created while paging"})
			}
			if next == "" {
				break
			}
			cur = next
		}
		for _, id := range all {
			if seen[id] != 1 {
				t.Fatalf("%s: run %s seen %d times", order, id, seen[id])
			}
		}
	}
}

// TestPagingWhileRunsChange pages by updated_at (the default) while runs
// change state, both runs already returned and runs not yet returned:
// every run is seen exactly once.
func TestPagingWhileRunsChange(t *testing.T) {
	h := runsServer(t, 50, `sleep 30`)
	var all []string
	for i := 0; i < 40; i++ {
		all = append(all, createRun(t, h, map[string]any{"prompt": fmt.Sprintf("run %d", i)}))
	}
	for _, id := range all {
		waitState(t, h, id, "INPROGRESS")
	}
	seen := map[string]int{}
	cur := ""
	for page := 0; ; page++ {
		ids, next := listIDs(t, h, "limit=6&cursor="+url.QueryEscape(cur))
		for _, id := range ids {
			seen[id]++
		}
		// Change runs on both sides of the cursor: each moves to the head
		// of the updated_at order.
		if page < 3 {
			for _, id := range []string{all[page], all[len(all)/2+page], ids[0]} {
				call(t, h, "POST", "/v1/agent/runs/"+id+"/cancel", nil)
			}
			createRun(t, h, map[string]any{"prompt": "new while paging"})
		}
		if next == "" {
			break
		}
		cur = next
	}
	for i, id := range all {
		if seen[id] != 1 {
			_, b := call(t, h, "GET", "/v1/agent/runs/"+id+"/timeline", nil)
			t.Fatalf("run %d %s seen %d times; timeline %s", i, id, seen[id], b)
		}
	}
	// A new listing sees the changes.
	ids, _ := listIDs(t, h, "limit=500&state=CANCELLED")
	if len(ids) < 6 {
		t.Fatalf("cancelled runs: %d", len(ids))
	}
}

// TestAttachmentNamesRefused: names that pass a naive check but would break
// the run are refused at create. The attack: attachments, PROMPT.md
// (silently overwritten) and names with NUL were accepted, and the run then
// ended ERROR.
func TestAttachmentNamesRefused(t *testing.T) {
	h := runsServer(t, 1, `true`)
	data := base64.StdEncoding.EncodeToString([]byte("x"))
	for _, names := range [][]string{{"PROMPT.md"}, {"attachments"}, {"a\x00b"}, {"tab\there"}, {"a\\b"}, {strings.Repeat("n", 256)}, {"same.txt", "same.txt"}} {
		var atts []map[string]string
		for _, n := range names {
			atts = append(atts, map[string]string{"file_name": n, "data": data})
		}
		status, b := call(t, h, "POST", "/v1/agent/runs", map[string]any{"prompt": "x", "attachments": atts})
		if status != 400 || !strings.Contains(string(b), "file_name") {
			t.Errorf("%q: %d %s, want 400 naming file_name", names, status, b)
		}
	}
	if id := createRun(t, h, map[string]any{"prompt": "x", "attachments": []map[string]string{{"file_name": "event-payload.json", "data": data}}}); id == "" {
		t.Fatal("a plain name is refused")
	}
}

// TestRunItemFieldsOfTheCurrentSDKs: finished_at (null until terminal),
// root_run_id and run_time, the nine states as list filters, and the
// follow-up answer, read as the newest SDKs read them.
func TestRunItemFieldsOfTheCurrentSDKs(t *testing.T) {
	h := runsServer(t, 1, `if grep -q slow PROMPT.md; then sleep 2; fi; echo done`)
	slow := createRun(t, h, map[string]any{"prompt": "slow one"})
	waitState(t, h, slow, "INPROGRESS")
	live := getRun(t, h, slow)
	if v, ok := live["finished_at"]; !ok || v != nil || live["root_run_id"] != slow || !strings.HasPrefix(fmt.Sprint(live["run_time"]), "PT") {
		t.Fatalf("a running run: %v", live)
	}
	status, b := call(t, h, "POST", "/v1/agent/runs/"+slow+"/followups", map[string]string{"message": "next"})
	if status != 200 || !strings.Contains(string(b), `"outcome":"queued_prompt"`) {
		t.Fatalf("a follow-up to a running run: %d %s", status, b)
	}
	done := waitState(t, h, slow, "SUCCEEDED")
	fin, err := time.Parse(time.RFC3339Nano, fmt.Sprint(done["finished_at"]))
	if err != nil || fin.Before(time.Now().Add(-time.Minute)) || !regexp.MustCompile(`^PT[0-9.]+S$`).MatchString(fmt.Sprint(done["run_time"])) {
		t.Fatalf("a finished run: %v", done)
	}
	for _, st := range []string{"PENDING", "QUEUED", "CLAIMED", "INPROGRESS", "SUCCEEDED", "FAILED", "BLOCKED", "ERROR", "CANCELLED"} {
		if status, b := call(t, h, "GET", "/v1/agent/runs?state="+st, nil); status != 200 {
			t.Errorf("state=%s: %d %s", st, status, b)
		}
	}
}

// TestSingularFactoryPaths: the current SDKs' /v1/factory paths: the
// Factory object, pages of factories, and a dispatch answered as they read
// it; the plural paths keep working (TestFactoryDispatch).
func TestSingularFactoryPaths(t *testing.T) {
	rootA, rootB := t.TempDir(), t.TempDir()
	h := startWith(t, func(s *store.Store, data string) *runs.Manager {
		b := s.NewBatch()
		b.PutAPIKey(runsKey, &factory.APIKey{Name: "ci", Scope: factory.ScopeRuns, Prefix: runsKey[:8], CreatedAt: time.Now()})
		b.Commit()
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "default", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Environments: map[string]runs.Environment{"default": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	}, dirSource("acme", rootA), dirSource("beta", rootB))
	st := h.status("acme")
	status, b := call(t, h, "GET", "/v1/factory/"+st.UID, nil)
	var obj map[string]any
	json.Unmarshal(b, &obj)
	for _, k := range []string{"uid", "name", "alias", "repositories", "integrations", "agent_defaults", "credential_strategy",
		"default_model", "created_at", "updated_at", "foreman_uid", "source", "revision", "synced_at", "ready"} {
		if _, ok := obj[k]; !ok || status != 200 {
			t.Fatalf("Factory lacks %s: %d %s", k, status, b)
		}
	}
	var page struct {
		Factories []struct {
			Name string `json:"name"`
		} `json:"factories"`
		PageInfo factory.PageInfo `json:"page_info"`
	}
	_, b = call(t, h, "GET", "/v1/factory?limit=1", nil)
	json.Unmarshal(b, &page)
	if len(page.Factories) != 1 || page.Factories[0].Name != "acme" || !page.PageInfo.HasNextPage {
		t.Fatalf("first page: %s", b)
	}
	_, b = call(t, h, "GET", "/v1/factory?limit=1&cursor="+url.QueryEscape(page.PageInfo.NextCursor), nil)
	json.Unmarshal(b, &page)
	if len(page.Factories) != 1 || page.Factories[0].Name != "beta" || page.PageInfo.HasNextPage {
		t.Fatalf("second page: %s", b)
	}
	if _, b = call(t, h, "GET", "/v1/factory?search=BET", nil); !strings.Contains(string(b), `"name":"beta"`) || strings.Contains(string(b), `"name":"acme"`) {
		t.Fatalf("search: %s", b)
	}
	if status, _ := call(t, h, "GET", "/v1/factory?limit=101", nil); status != 400 {
		t.Fatalf("limit 101: %d", status)
	}
	status, b = call(t, h, "POST", "/v1/factory/"+st.UID+"/runs", map[string]any{"prompt": "triage", "ticket_ref": "linear:ENG-1"})
	var d map[string]any
	json.Unmarshal(b, &d)
	if status != 200 || d["factory_uid"] != st.UID || d["foreman_agent"] != "foreman" || d["ticket_ref"] != "linear:ENG-1" || d["state"] != "QUEUED" ||
		!strings.HasSuffix(fmt.Sprint(d["run_url"]), "/v1/agent/runs/"+fmt.Sprint(d["run_id"])) {
		t.Fatalf("dispatch: %d %s", status, b)
	}
	if r := getRun(t, h, fmt.Sprint(d["run_id"])); r["source"] != "API" || r["factory_uid"] != st.UID {
		t.Fatalf("the dispatched run: %v", r)
	}
	_, b = call(t, h, "POST", "/v1/factory/"+st.UID+"/runs", map[string]any{"prompt": "no ticket"})
	json.Unmarshal(b, &d)
	if d["ticket_ref"] != "api:"+fmt.Sprint(d["run_id"]) {
		t.Fatalf("a minted ticket_ref: %s", b)
	}
	if status, _ := call(t, h, "POST", "/v1/factory/"+st.UID+"/runs", map[string]any{"title": "no prompt"}); status != 400 {
		t.Fatalf("no prompt: %d", status)
	}
	if status, _ := call(t, h, "GET", "/v1/factory/fc_nope", nil); status != 404 {
		t.Fatalf("unknown factory: %d", status)
	}
}

// TestOldSourcesReadBackWithNewNames: runs stored before the product's
// source names (WEBHOOK, FACTORY) read back as CUSTOM_WEBHOOK and API, and
// both the new and the old name find the webhook's runs.
func TestOldSourcesReadBackWithNewNames(t *testing.T) {
	h := runsServer(t, 1, `true`)
	now := time.Now().UTC()
	b := h.store.NewLogBatch()
	for id, src := range map[string]string{"run_old0000000000000000001": "WEBHOOK", "run_old0000000000000000002": "FACTORY"} {
		b.PutRun(&factory.Run{ID: id, Title: "old", Prompt: "old", State: factory.StateSucceeded, CreatedAt: now, UpdatedAt: now, Source: src}, nil)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := getRun(t, h, "run_old0000000000000000001"); r["source"] != "CUSTOM_WEBHOOK" {
		t.Fatalf("an old webhook run: %v", r["source"])
	}
	if r := getRun(t, h, "run_old0000000000000000002"); r["source"] != "API" {
		t.Fatalf("an old factory run: %v", r["source"])
	}
	for _, q := range []string{"source=CUSTOM_WEBHOOK", "source=WEBHOOK"} {
		if ids, _ := listIDs(t, h, q); len(ids) != 1 || ids[0] != "run_old0000000000000000001" {
			t.Fatalf("%s: %v", q, ids)
		}
	}
	if ids, _ := listIDs(t, h, "source=FACTORY"); len(ids) != 1 || ids[0] != "run_old0000000000000000002" {
		t.Fatalf("source=FACTORY: %v", ids)
	}
}

// TestTimelineOfTheCurrentSDKs: each event has event_type, event_uuid (a
// UUID, the same at every read), occurred_at and run_id, with the detail in
// payload; the older fields (time, kind, state, message) stay.
func TestTimelineOfTheCurrentSDKs(t *testing.T) {
	h := runsServer(t, 1, `echo working`)
	id := createRun(t, h, map[string]any{"prompt": "go"})
	waitState(t, h, id, "SUCCEEDED")
	read := func() []map[string]any {
		_, b := call(t, h, "GET", "/v1/agent/runs/"+id+"/timeline", nil)
		var out struct {
			Events []map[string]any `json:"events"`
		}
		json.Unmarshal(b, &out)
		return out.Events
	}
	first, second := read(), read()
	var types []string
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for i, e := range first {
		types = append(types, fmt.Sprint(e["event_type"]))
		if !uuid.MatchString(fmt.Sprint(e["event_uuid"])) || e["event_uuid"] != second[i]["event_uuid"] || e["run_id"] != id ||
			e["occurred_at"] == nil || e["occurred_at"] != e["time"] || e["kind"] == nil {
			t.Fatalf("event %d: %v", i, e)
		}
	}
	if want := "oz_run_created oz_run_claimed agent_started status_message oz_run_done"; strings.Join(types, " ") != want {
		t.Fatalf("event types %v, want %s", types, want)
	}
	if p, _ := first[3]["payload"].(map[string]any); p["message"] != "working" {
		t.Fatalf("the status message's payload: %v", first[3])
	}
}

// TestEnvironmentsAgentsAndCapacity: GET /v1/agent/environments lists the
// environments without their commands or variables, GET /v1/agent lists
// the (so far no) agents, and a create says whether it had to queue.
func TestEnvironmentsAgentsAndCapacity(t *testing.T) {
	h := runsServer(t, 1, `sleep 1`)
	status, b := call(t, h, "GET", "/v1/agent/environments", nil)
	if status != 200 || !regexp.MustCompile(`"name":"default"`).Match(b) || !strings.Contains(string(b), `"setup_failed":false`) ||
		!strings.Contains(string(b), `"uid":"env_`) || strings.Contains(string(b), "sleep") {
		t.Fatalf("environments: %d %s", status, b)
	}
	if status, b := call(t, h, "GET", "/v1/agent", nil); status != 200 || strings.TrimSpace(string(b)) != `{"agents":[]}` {
		t.Fatalf("agents: %d %s", status, b)
	}
	_, first := call(t, h, "POST", "/v1/agent/runs", map[string]any{"prompt": "one"})
	var out map[string]any
	json.Unmarshal(first, &out)
	waitState(t, h, fmt.Sprint(out["run_id"]), "INPROGRESS")
	_, second := call(t, h, "POST", "/v1/agent/runs", map[string]any{"prompt": "two"})
	if !strings.Contains(string(first), `"at_capacity":false`) || !strings.Contains(string(second), `"at_capacity":true`) {
		t.Fatalf("at_capacity: %s then %s", first, second)
	}
}

// TestCreateLimitsOfThePlatformAPI: metadata keys and values and the mode
// are checked as the platform API checks them.
func TestCreateLimitsOfThePlatformAPI(t *testing.T) {
	h := runsServer(t, 1, `true`)
	for body, want := range map[string]string{
		`{"prompt":"x","metadata":{"bad key":"v"}}`:                          "metadata: key",
		`{"prompt":"x","metadata":{"k":"` + strings.Repeat("v", 257) + `"}}`: "over 256 bytes",
		`{"prompt":"x","metadata":{"` + strings.Repeat("k", 65) + `":"v"}}`:  "metadata: key",
		`{"prompt":"x","mode":"yolo"}`:                                       "mode",
	} {
		if status, b := call(t, h, "POST", "/v1/agent/runs", body); status != 400 || !strings.Contains(string(b), want) {
			t.Errorf("%.60s: %d %s", body, status, b)
		}
	}
	if status, b := call(t, h, "POST", "/v1/agent/runs", `{"prompt":"x","mode":"plan","metadata":{"team.name-1_a":"`+strings.Repeat("v", 256)+`"}}`); status != 200 {
		t.Fatalf("within the limits: %d %s", status, b)
	}
}
