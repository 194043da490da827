package server_test

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/store"
)

// metricsWorld is a factory with four runs over three UTC days, written
// as the run manager writes them: a root run (Ada, API, the reviewer on
// claude/sonnet, $1.75) and its sub-run (claude/opus, $2) that opened
// pull request 1, merged since; a failed scheduled run (Bo, $0.50) that
// opened pull requests 2 and 3, of which the code host has said nothing;
// a queued run of no agent and no cost. A run of another factory ($100,
// a pull request) must count nowhere.
type metricsWorld struct {
	h          *harness
	uid        string
	now        time.Time
	days       []string // the range's days: the day before the first run's, then each
	start, end string
}

const (
	pr1 = "https://github.com/acme/widgets/pull/1"
	pr2 = "https://github.com/acme/widgets/pull/2"
	pr3 = "https://github.com/acme/widgets/pull/3"
)

func newMetricsWorld(t *testing.T) *metricsWorld {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"factory.yaml":             "schemaVersion: v1alpha1\nname: Metrics\nrepositories: []\ncodeForges: [NONE]\nagentDefaults:\n  model: auto\n",
		"agents/foreman/agent.md":  "---\nagentType: FOREMAN\n---\nRoute.\n",
		"agents/reviewer/agent.md": "---\nagentType: REVIEW\n---\nReview.\n",
	})
	h := start(t, dirSource("acme", root))
	w := &metricsWorld{h: h, uid: h.eventually("acme", "ready", func(st *factory.FactoryStatus) bool { return st.Ready }).UID, now: time.Now().UTC()}
	for i := -3; i <= 0; i++ {
		w.days = append(w.days, w.now.AddDate(0, 0, i).Format(time.DateOnly))
	}
	w.start, w.end = w.days[0], w.now.AddDate(0, 0, 1).Format(time.DateOnly)
	usd := func(v float64) *float64 { return &v }
	claude := func(model string) *factory.RunSetup {
		return &factory.RunSetup{Agent: "reviewer", Harness: &factory.Harness{Type: "claude", Model: model}}
	}
	ada, bo := &factory.Creator{Type: "USER", UID: "u_ada", DisplayName: "Ada"}, &factory.Creator{Type: "USER", UID: "u_bo", DisplayName: "Bo"}
	pr := func(url, status string) factory.Artifact {
		return factory.Artifact{Type: factory.ArtifactPullRequest, Data: factory.ArtifactData{URL: url, Branch: "b", Status: status}}
	}
	runs := []*factory.Run{
		{ID: "run_m1", State: factory.StateSucceeded, CreatedAt: w.now.Add(-48 * time.Hour), Source: factory.SourceAPI, Creator: ada,
			Setup: claude("sonnet"), Usage: &factory.RequestUsage{InferenceCostUSD: usd(1), ComputeCostUSD: usd(0.5), PlatformCostUSD: usd(0.25)},
			Artifacts: []factory.Artifact{pr(pr1, "open")}},
		{ID: "run_m2", State: factory.StateSucceeded, CreatedAt: w.now.Add(-48 * time.Hour), Source: factory.SourceAPI, Creator: ada,
			ParentRunID: "run_m1", Ancestors: []string{"run_m1"}, Setup: claude("opus"), Usage: &factory.RequestUsage{InferenceCostUSD: usd(2)}},
		{ID: "run_m3", State: factory.StateFailed, CreatedAt: w.now.Add(-24 * time.Hour), Source: factory.SourceScheduled, Creator: bo,
			Setup: &factory.RunSetup{Agent: "reviewer"}, Usage: &factory.RequestUsage{InferenceCostUSD: usd(0.3), ComputeCostUSD: usd(0.2)},
			Artifacts: []factory.Artifact{pr(pr2, "unknown"), pr(pr3, "unknown")}},
		{ID: "run_m4", State: factory.StateQueued, CreatedAt: w.now, Source: factory.SourceAPI, Creator: ada},
	}
	for _, r := range runs {
		r.FactoryUID = w.uid
	}
	runs = append(runs, &factory.Run{ID: "run_m5", State: factory.StateSucceeded, CreatedAt: w.now, Source: factory.SourceAPI,
		FactoryUID: "fa_another", Usage: &factory.RequestUsage{InferenceCostUSD: usd(100)}, Artifacts: []factory.Artifact{pr(pr1+"0", "open")}})
	for _, r := range runs {
		r.UpdatedAt = r.CreatedAt
		b := h.store.NewBatch()
		b.PutRun(r, nil)
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// The code host says pull request 1 merged, as trackPullRequests
	// writes it.
	_, err := h.store.UpdateRun("run_m1", true, func(r *factory.Run, _ *store.Batch) error {
		r.Artifacts[0].Data.Status = "merged"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// get answers a metrics call with the admin key: its status and body.
func (w *metricsWorld) get(t *testing.T, path string, q url.Values) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", w.h.url+"/v1/factory/"+w.uid+path+"?"+q.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

// at reads a value at a path of keys and list indexes.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// groupTotals are a breakdown's groups as key → total (runs) or
// key → dollars.total (spend).
func groupTotals(out map[string]any) map[string]float64 {
	m := map[string]float64{}
	for _, g := range out["groups"].([]any) {
		g := g.(map[string]any)
		if d, ok := g["dollars"].(map[string]any); ok {
			m[g["key"].(string)] = d["total"].(float64)
		} else {
			m[g["key"].(string)] = g["total"].(float64)
		}
	}
	return m
}

func near(a any, want, tolerance float64) bool {
	f, ok := a.(float64)
	return ok && math.Abs(f-want) <= tolerance
}

func sameTotals(got, want map[string]float64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-9 {
			return false
		}
	}
	return true
}

// metricsCase is a call of the metrics API and what its answer must be.
type metricsCase struct {
	name   string
	path   string
	q      url.Values
	status int
	check  func(out map[string]any) bool
}

// rng is the world's range, with more parameters.
func (w *metricsWorld) rng(kv ...string) url.Values {
	q := url.Values{"start_date": {w.start}, "end_date": {w.end}}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Add(kv[i], kv[i+1])
	}
	return q
}

// twoDays is the first pull request's cycle time: its kickoff run was
// created two days before the world's writes.
var twoDays = (48 * time.Hour).Seconds()

// runCases: productivity.
func (w *metricsWorld) runCases() []metricsCase {
	rng := w.rng
	return []metricsCase{
		{"productivity", "/metrics", rng("group_by_period", "day"), 200, func(o map[string]any) bool {
			return o["run_count"] == 4.0 && o["pr_count"] == 3.0 && o["merged_pr_count"] == 1.0 && o["factory_uid"] == w.uid &&
				o["team_uid"] != nil && o["as_of"] != nil && len(o["period_list"].([]any)) == 4 && at(o, "period_list", 0) == w.days[0] &&
				jsonEq(o["run_count_series"], []int{0, 2, 1, 1}) && jsonEq(o["pr_count_series"], []int{0, 0, 0, 3}) &&
				jsonEq(o["merged_pr_count_series"], []int{0, 0, 0, 1}) && at(o, "autonomy_funnel", "factory_merged") == 1.0 &&
				at(o, "pr_latency", "merged_pr_count") == 1.0 && at(o, "pr_latency", "kickoff_to_merge", "measured_pr_count") == 1.0 &&
				near(at(o, "pr_latency", "kickoff_to_merge", "median_seconds"), twoDays, 0.05*twoDays) &&
				at(o, "pr_latency", "pr_to_first_review", "median_seconds") == nil && at(o, "impact", "merged_pr_count") == 1.0
		}},
		{"productivity: no buckets", "/metrics", rng(), 200, func(o map[string]any) bool {
			_, series := o["run_count_series"]
			_, list := o["period_list"]
			return o["run_count"] == 4.0 && !series && !list
		}},
		{"productivity: days (end exclusive)", "/metrics", url.Values{"start_date": {w.days[1]}, "end_date": {w.days[3]}}, 200,
			func(o map[string]any) bool { return o["run_count"] == 3.0 && o["pr_count"] == 0.0 }},
		{"productivity: by week", "/metrics", rng("group_by_period", "week"), 200, func(o map[string]any) bool {
			n := 0.0
			for _, v := range o["run_count_series"].([]any) {
				n += v.(float64)
			}
			return n == 4 && len(o["period_list"].([]any)) >= 1 && len(o["period_list"].([]any)) <= 2
		}},
	}
}

// breakdownCases: the run breakdown by each dimension.
func (w *metricsWorld) breakdownCases() []metricsCase {
	rng := w.rng
	return []metricsCase{
		{"run breakdown by status", "/metrics/run-breakdown", rng("group_by", "status", "group_by_period", "day"), 200, func(o map[string]any) bool {
			return o["total"] == 4.0 && o["root_run_count"] == 3.0 && o["group_by"] == "status" &&
				sameTotals(groupTotals(o), map[string]float64{"SUCCEEDED": 2, "FAILED": 1, "QUEUED": 1}) &&
				at(o, "groups", 0, "key") == "SUCCEEDED" && at(o, "groups", 0, "label") == "Succeeded" &&
				jsonEq(at(o, "groups", 0, "series"), []int{0, 2, 0, 0})
		}},
		{"run breakdown by source: top-level runs", "/metrics/run-breakdown", rng("group_by", "source"), 200, func(o map[string]any) bool {
			return o["total"] == 3.0 && sameTotals(groupTotals(o), map[string]float64{"API": 2, "SCHEDULED_AGENT": 1})
		}},
		{"run breakdown by root_vs_subrun", "/metrics/run-breakdown", rng("group_by", "root_vs_subrun"), 200, func(o map[string]any) bool {
			return sameTotals(groupTotals(o), map[string]float64{"ROOT": 3, "SUBRUN": 1})
		}},
		{"run breakdown by agent_type", "/metrics/run-breakdown", rng("group_by", "agent_type"), 200, func(o map[string]any) bool {
			return sameTotals(groupTotals(o), map[string]float64{"REVIEW": 3, "NONE": 1})
		}},
		{"run breakdown by model", "/metrics/run-breakdown", rng("group_by", "model"), 200, func(o map[string]any) bool {
			return sameTotals(groupTotals(o), map[string]float64{"sonnet": 1, "opus": 1, "unknown": 2})
		}},
		{"run breakdown by harness", "/metrics/run-breakdown", rng("group_by", "harness"), 200, func(o map[string]any) bool {
			return sameTotals(groupTotals(o), map[string]float64{"claude": 2, "unknown": 2})
		}},
		{"run breakdown: no group_by", "/metrics/run-breakdown", rng(), 400, nil},
	}
}

// spendCases: the cost breakdown.
func (w *metricsWorld) spendCases() []metricsCase {
	rng := w.rng
	return []metricsCase{
		{"spend by user: a tree to its root's creator", "/costs/breakdown", rng("group_by", "user", "group_by_period", "day"), 200, func(o map[string]any) bool {
			return near(at(o, "total", "total"), 4.25, 1e-9) && near(at(o, "total", "inference"), 3.3, 1e-9) &&
				near(at(o, "total", "compute"), 0.7, 1e-9) && near(at(o, "total", "platform"), 0.25, 1e-9) &&
				sameTotals(groupTotals(o), map[string]float64{"u_ada": 3.75, "u_bo": 0.5}) && at(o, "groups", 0, "label") == "Ada" &&
				at(o, "groups", 0, "deleted") == false && near(at(o, "groups", 0, "series", 1, "total"), 3.75, 1e-9) &&
				near(at(o, "groups", 0, "series", 0, "total"), 0, 0) && len(o["total_series"].([]any)) == 4
		}},
		{"spend by source", "/costs/breakdown", rng("group_by", "source"), 200, func(o map[string]any) bool {
			return sameTotals(groupTotals(o), map[string]float64{"API": 3.75, "SCHEDULED_AGENT": 0.5})
		}},
		{"spend by agent", "/costs/breakdown", rng("group_by", "agent"), 200, func(o map[string]any) bool {
			return sameTotals(groupTotals(o), map[string]float64{"reviewer": 4.25})
		}},
		{"spend by model: each run on its own", "/costs/breakdown", rng("group_by", "model"), 200, func(o map[string]any) bool {
			return sameTotals(groupTotals(o), map[string]float64{"opus": 2, "sonnet": 1.75, "unknown": 0.5})
		}},
		{"spend: a bad group_by", "/costs/breakdown", rng("group_by", "team"), 400, nil},
	}
}

// perPRCases: the cost per pull request, by size, and the costliest.
func (w *metricsWorld) perPRCases() []metricsCase {
	rng := w.rng
	return []metricsCase{
		{"cost per pull request", "/costs/per-pr", rng("group_by_period", "day"), 200, func(o map[string]any) bool {
			return o["pr_count"] == 3.0 && near(at(o, "dollars", "total"), 4.25, 1e-9) && near(o["mean"], 4.25/3, 1e-9) &&
				at(o, "series", 3, "pr_count") == 3.0 && near(at(o, "series", 3, "inference_mean"), 3.3/3, 1e-9) &&
				at(o, "series", 0, "mean") == nil && at(o, "series", 3, "period") == w.days[3]
		}},
		{"cost per pull request by size: none sized", "/costs/per-pr/by-size", rng(), 200, func(o map[string]any) bool {
			return o["pr_count"] == 3.0 && o["sized_pr_count"] == 0.0 && len(o["buckets"].([]any)) == 4 &&
				at(o, "buckets", 3, "size") == "XL" && at(o, "buckets", 0, "mean") == nil
		}},
		{"costliest pull requests", "/costs/per-pr/top", rng("limit", "2"), 200, func(o map[string]any) bool {
			_, list := o["period_list"]
			return len(o["data"].([]any)) == 2 && at(o, "data", 0, "url") == pr1 && near(at(o, "data", 0, "dollars", "total"), 3.75, 1e-9) &&
				at(o, "data", 0, "creator", "uid") == "u_ada" && at(o, "data", 0, "source") == "API" &&
				at(o, "data", 0, "state") == "merged" && at(o, "data", 0, "repo_full_name") == "acme/widgets" &&
				at(o, "data", 0, "pr_number") == 1.0 && near(at(o, "data", 1, "dollars", "total"), 0.25, 1e-9) && !list
		}},
		{"costliest pull requests: limit 51", "/costs/per-pr/top", rng("limit", "51"), 400, nil},
	}
}

// recordCases: the pull request list and the errors.
func (w *metricsWorld) recordCases() []metricsCase {
	rng := w.rng
	return []metricsCase{
		{"pull requests", "/pull-requests", nil, 200, func(o map[string]any) bool {
			return len(o["pull_requests"].([]any)) == 3 && at(o, "page_info", "has_next_page") == false && o["factory_uid"] == w.uid
		}},
		{"pull requests merged", "/pull-requests", url.Values{"state": {"merged"}}, 200, func(o map[string]any) bool {
			p := at(o, "pull_requests", 0)
			return len(o["pull_requests"].([]any)) == 1 && at(p, "url") == pr1 && at(p, "merged_at") != nil &&
				near(at(p, "cycle_time", "kickoff_to_merge"), twoDays, 60) && at(p, "runs", 0, "run_id") == "run_m1" &&
				at(p, "history_complete") == false && at(p, "provider") == "github"
		}},
		{"pull requests open: unknown to the code host", "/pull-requests", url.Values{"state": {"open"}}, 200, func(o map[string]any) bool {
			return len(o["pull_requests"].([]any)) == 2 && at(o, "pull_requests", 0, "cycle_time", "kickoff_to_merge") == nil
		}},
		{"pull requests of a repository", "/pull-requests", url.Values{"repo": {"acme/other"}}, 200, func(o map[string]any) bool {
			return len(o["pull_requests"].([]any)) == 0
		}},
		{"pull requests merged after now", "/pull-requests", url.Values{"merged_after": {w.now.Add(time.Hour).Format(time.RFC3339)}}, 200,
			func(o map[string]any) bool { return len(o["pull_requests"].([]any)) == 0 }},
		{"pull requests: a bad state", "/pull-requests", url.Values{"state": {"shipped"}}, 400, nil},
		{"a bad period", "/metrics", rng("group_by_period", "year"), 400, nil},
		{"start after end", "/metrics", url.Values{"start_date": {w.end}, "end_date": {w.start}}, 400, nil},
		{"a bad date", "/costs/per-pr", url.Values{"start_date": {"yesterday"}}, 400, nil},
		{"more than 365 buckets", "/metrics", url.Values{"start_date": {"2020-01-01"}, "group_by_period": {"day"}}, 400, nil},
	}
}

// TestMetricsAPI: the 7 endpoints of the metrics API over the world
// above, each answer checked against the docs' fields and the figures
// the runs make; a bad parameter is a 400, another factory's UID a 404.
func TestMetricsAPI(t *testing.T) {
	w := newMetricsWorld(t)
	var cases []metricsCase
	for _, group := range [][]metricsCase{w.runCases(), w.breakdownCases(), w.spendCases(), w.perPRCases(), w.recordCases()} {
		cases = append(cases, group...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, out := w.get(t, c.path, c.q)
			if status != c.status || c.check != nil && !c.check(out) {
				b, _ := json.MarshalIndent(out, "", " ")
				t.Fatalf("%d (want %d): %s", status, c.status, b)
			}
		})
	}
	w.uid = "fa_nope"
	if status, _ := w.get(t, "/metrics", nil); status != 404 {
		t.Errorf("another factory's metrics: %d", status)
	}
}

// TestMetricsPullRequestPages: the pull request list in pages of 2, with
// the cursor each page gives.
func TestMetricsPullRequestPages(t *testing.T) {
	w := newMetricsWorld(t)
	seen := map[string]bool{}
	q := url.Values{"limit": {"2"}}
	for page := 0; ; page++ {
		status, out := w.get(t, "/pull-requests", q)
		if status != 200 || page > 2 {
			t.Fatalf("page %d: %d %v", page, status, out)
		}
		for _, p := range out["pull_requests"].([]any) {
			seen[at(p, "url").(string)] = true
		}
		next, _ := at(out, "page_info", "next_cursor").(string)
		if at(out, "page_info", "has_next_page") != true {
			break
		}
		q.Set("cursor", next)
	}
	if len(seen) != 3 || !seen[pr1] || !seen[pr2] || !seen[pr3] {
		t.Fatalf("pull requests seen: %v", seen)
	}
}

func jsonEq(got any, want any) bool {
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	return string(a) == string(b)
}

// TestMetricsOnTheOverview: the dashboard's overview shows a factory's
// last 30 days as the metrics API counts them (4 runs, 3 pull requests,
// 1 merged two days after its kickoff, $4.25), and a bar for each day.
func TestMetricsOnTheOverview(t *testing.T) {
	w := newMetricsWorld(t)
	c := signIn(t, w.h, adminKey)
	status, _, body := fetch(t, c, w.h.url+"/ui/")
	part := between(body, `class="metrics"`, `</div>`)
	for _, want := range []string{"Runs <strong>4</strong>", "Pull requests opened <strong>3</strong>", "Merged <strong>1</strong>",
		"Median kickoff to merge <strong>4", "Spend <strong>$4.25</strong>", w.days[1] + ": 2 runs", w.days[3] + ": 1 runs"} {
		if status != 200 || !strings.Contains(part, want) {
			t.Fatalf("the overview's figures lack %q: %d %s", want, status, part)
		}
	}
	if n := strings.Count(part, "<rect"); n != 30 && n != 31 {
		t.Errorf("%d bars for 30 days", n)
	}
}
