package server_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/codehost/github/githubtest"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
	"factory/internal/testbin"
)

// measureServer serves a v1alpha1 tree whose default environment is the
// demo agent (the exec protocol, no pauses: it judges as its prompt
// scripts) and whose "quick" environment is a command that succeeds at
// once.
func measureServer(t *testing.T, tree map[string]string) *harness {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, tree)
	bin := testbin.Factory(t)
	return startWith(t, func(s *store.Store, data string) *runs.Manager {
		b := s.NewBatch()
		b.PutAPIKey(runsKey, &factory.APIKey{Name: "ci", Scope: factory.ScopeRuns, Prefix: runsKey[:8], CreatedAt: time.Now()})
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "demo", Log: slog.New(slog.DiscardHandler), MaxConcurrent: 8,
			Environments: map[string]runs.Environment{
				"demo":  {Executor: &runtime.ExecExecutor{Command: []string{bin, "demo-agent", "--delay", "0s"}}},
				"quick": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	}, dirSource("acme", root))
}

// awaitRuns waits until the factory has at least want runs, every one
// terminal, and every judge's answer recorded; it returns the runs by
// source.
func awaitRuns(t *testing.T, h *harness, factoryUID string, want int) map[string][]*factory.Run {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		page, err := h.store.ListRuns(store.RunQuery{Equal: map[string]string{"factory_uid": factoryUID}, Limit: 2000})
		if err != nil {
			t.Fatal(err)
		}
		bySource, settled := map[string][]*factory.Run{}, len(page.Runs) >= want
		for _, r := range page.Runs {
			bySource[r.Source] = append(bySource[r.Source], r)
			settled = settled && r.State.Terminal()
		}
		for _, j := range bySource[factory.SourceScorer] {
			if !settled {
				break
			}
			sc, err := h.store.ScoreOfJudge(j.ID)
			settled = err == nil && !sc.InFlight
		}
		if settled {
			return bySource
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs still going: %d of at least %d", len(page.Runs), want)
		}
	}
}

// TestScorerSampling: scorers at samplingRate 0, 50 and 100 over the same
// 200 completed runs start 0, a binomial share, and 200 judge runs
// (source RUN_SCORER, the demo agent answering the label its rubric
// scripts); each judged run gets a live score of the label's value; the
// scorers list counts them.
func TestScorerSampling(t *testing.T) {
	scorer := func(rate int) string {
		return fmt.Sprintf("---\nlabels:\n  - {value: good, score: 1}\n  - {value: bad, score: 0}\npassingScore: 1\nmodel: judge-1\nsamplingRate: %d\n---\nDid it work?\n\ndemo-score: good\n", rate)
	}
	h := measureServer(t, map[string]string{
		"factory.yaml":            "schemaVersion: v1alpha1\nname: Sampling\nrepositories: []\ncodeForges: [NONE]\nagentDefaults:\n  model: auto\n",
		"agents/worker/agent.md":  "---\nagentType: FOREMAN\nenvironmentId: quick\n---\nWork.\n",
		"scorers/none/scorer.md":  scorer(0),
		"scorers/half/scorer.md":  scorer(50),
		"scorers/every/scorer.md": scorer(100),
	})
	f := h.status("acme")
	const n = 200
	ids := map[string]bool{}
	for i := range n {
		status, b := call(t, h, "POST", "/v1/factory/"+f.UID+"/runs", map[string]any{"prompt": fmt.Sprintf("job %d", i)})
		var out map[string]any
		if json.Unmarshal(b, &out); status != 200 {
			t.Fatalf("dispatch: %d %s", status, b)
		}
		ids[out["run_id"].(string)] = true
	}
	runs := awaitRuns(t, h, f.UID, n)
	judges := runs[factory.SourceScorer]
	byScorer := map[string]int{}
	for _, j := range judges {
		byScorer[j.Metadata["scorer"]]++
		if j.State != factory.StateSucceeded || !ids[j.Metadata["scored_run_id"]] {
			t.Fatalf("judge run %s: %s, of %s", j.ID, j.State, j.Metadata["scored_run_id"])
		}
	}
	// 50% of 200: mean 100, standard deviation 7.07; ±5 of them.
	if byScorer["none"] != 0 || byScorer["every"] != n || byScorer["half"] < 65 || byScorer["half"] > 135 {
		t.Fatalf("judge runs by scorer: %v", byScorer)
	}
	t.Logf("judge runs by scorer: %v", byScorer)
	_, b := call(t, h, "GET", "/v1/factory/scorers?factory_uid="+f.UID, nil)
	var list struct {
		Scorers []struct {
			ID          int64   `json:"id"`
			Name        string  `json:"name"`
			ResultCount int     `json:"result_count"`
			Rate        float64 `json:"sampling_rate"`
			Summary     struct {
				Pass     int      `json:"pass_count"`
				Fail     int      `json:"fail_count"`
				PassRate *float64 `json:"pass_rate"`
			} `json:"pass_rate_summary"`
		} `json:"scorers"`
	}
	json.Unmarshal(b, &list)
	for _, sc := range list.Scorers {
		if sc.ResultCount != byScorer[sc.Name] || sc.ResultCount > 0 && (sc.Summary.Pass != min(50, sc.ResultCount) || sc.Summary.Fail != 0 || *sc.Summary.PassRate != 1) {
			t.Errorf("scorer %s: %d results, summary %+v; judged %d", sc.Name, sc.ResultCount, sc.Summary, byScorer[sc.Name])
		}
	}
	for _, j := range judges[:3] {
		checkScore(t, h, j.Metadata["scored_run_id"], j.ID)
	}
}

// checkScore: a judged run's scores hold its judge's answer.
func checkScore(t *testing.T, h *harness, runID, judgeID string) {
	t.Helper()
	_, b := call(t, h, "GET", "/v1/factory/runs/"+runID+"/scores", nil)
	var out struct {
		Scores []map[string]any `json:"scores"`
	}
	json.Unmarshal(b, &out)
	for _, sc := range out.Scores {
		if sc["scoring_run_id"] == judgeID {
			if sc["attempt_status"] != "scored" || sc["classification"] != "good" || sc["score"] != 1.0 || sc["trigger_source"] != "automatic" {
				t.Errorf("the score: %v", sc)
			}
			return
		}
	}
	t.Errorf("run %s has no score by judge %s: %s", runID, judgeID, b)
}

// benchmarkTree is a factory whose coder runs the demo agent, and a suite
// of two tasks under two configurations: the hard task's criteria pass
// only a trial that ran as strong-1.
var benchmarkTree = map[string]string{
	"factory.yaml":          "schemaVersion: v1alpha1\nname: Bench\nrepositories: []\ncodeForges: [NONE]\nagentDefaults:\n  model: auto\nscorerDefaults:\n  model: judge-1\n",
	"agents/coder/agent.md": "---\nagentType: FOREMAN\n---\nCode.\n",
	"benchmarks/models/suite.yaml": "name: Models\nagent: coder\nconfigurations:\n  - name: weak\n    role: baseline\n    agents:\n      - {agent: coder, model: weak-1}\n" +
		"  - name: strong\n    role: candidate\n    agents:\n      - {agent: coder, model: strong-1}\ntasks: [hard, easy]\n",
	"benchmarks/models/tasks/hard.yaml": "title: Hard\nprompt: Do the hard thing.\nsuccessCriteria: |\n  The hard thing is done.\n  demo-score: pass if running as model strong-1\n  demo-score: fail\n",
	"benchmarks/models/tasks/easy.yaml": "title: Easy\nprompt: Do the easy thing.\nsuccessCriteria: |\n  The easy thing is done.\n  demo-score: pass\n",
}

// TestBenchmark: a suite of 2 tasks × 2 configurations × 3 repetitions
// runs 12 trials (source BENCHMARK_TRIAL, the configuration's model
// reaching the agent), judged by the correctness scorer against each
// task's success criteria; the results table and the recommendation are
// the expected ones.
func TestBenchmark(t *testing.T) {
	h := measureServer(t, benchmarkTree)
	f := h.status("acme")
	suite := f.BenchmarkSuites[0].UID
	status, b := call(t, h, "POST", "/v1/factory/"+f.UID+"/benchmarks/suites/"+suite+"/runs", map[string]any{"repetition_count": 3})
	var launched map[string]any
	if json.Unmarshal(b, &launched); status != 201 || launched["state"] != "running" {
		t.Fatalf("launch: %d %s", status, b)
	}
	uid := launched["uid"].(string)
	runs := awaitRuns(t, h, f.UID, 24)
	if len(runs[factory.SourceBenchmarkTrial]) != 12 || len(runs[factory.SourceScorer]) != 12 {
		t.Fatalf("%d trials, %d judges", len(runs[factory.SourceBenchmarkTrial]), len(runs[factory.SourceScorer]))
	}
	res := awaitBenchmark(t, h, f.UID, uid)
	want := map[string][2]float64{"weak": {3, 3}, "strong": {6, 0}} // pass, fail
	for _, c := range res.Configurations {
		w := want[c.DisplayName]
		if c.Scoring.Pass != w[0] || c.Scoring.Fail != w[1] || c.Metrics.Trials != 6 || c.Metrics.Succeeded != 6 {
			t.Errorf("configuration %s: %+v, want pass %v fail %v", c.DisplayName, c, w[0], w[1])
		}
	}
	rec := res.Recommendation
	if rec == nil || rec.DisplayName != "strong" || rec.ConfigID != 2 ||
		rec.Reason != "strong passed 6 of 6 scored outcomes (100%), against 3 of 6 (50%) for weak." {
		t.Fatalf("recommendation: %+v", rec)
	}
	if res.SummaryStatus != "available" || !strings.Contains(res.Narrative, "Recommended: strong") || len(res.Trials) != 12 {
		t.Errorf("summary %s %q, %d trials", res.SummaryStatus, res.Narrative, len(res.Trials))
	}
	for _, tr := range res.Trials {
		if len(tr.Scores) != 1 || tr.Scores[0]["scorer_kind"] != "benchmark_task_correctness" {
			t.Errorf("trial %v: scores %v", tr.ID, tr.Scores)
		}
	}
}

// benchResults is the part of a benchmark's results the test reads.
type benchResults struct {
	State          string `json:"run_state"`
	SummaryStatus  string `json:"summary_status"`
	Narrative      string `json:"summary_narrative"`
	Configurations []struct {
		DisplayName string `json:"display_name"`
		Scoring     struct {
			Pass float64 `json:"pass_count"`
			Fail float64 `json:"fail_count"`
		} `json:"scoring"`
		Metrics struct {
			Trials    int `json:"trial_count"`
			Succeeded int `json:"succeeded"`
		} `json:"metrics"`
	} `json:"configurations"`
	Trials []struct {
		ID     int              `json:"id"`
		Scores []map[string]any `json:"scores"`
	} `json:"trials"`
	Recommendation *struct {
		ConfigID    int    `json:"configuration_id"`
		DisplayName string `json:"display_name"`
		Reason      string `json:"reason"`
	} `json:"recommendation"`
}

// awaitBenchmark waits for a benchmark run to complete, and reads its
// results.
func awaitBenchmark(t *testing.T, h *harness, factoryUID, uid string) benchResults {
	t.Helper()
	var res benchResults
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		status, b := call(t, h, "GET", "/v1/factory/"+factoryUID+"/benchmarks/runs/"+uid+"/results", nil)
		if status != 200 {
			t.Fatalf("results: %d %s", status, b)
		}
		res = benchResults{}
		json.Unmarshal(b, &res)
		if res.State == "completed" {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("the benchmark run is %s: %s", res.State, b)
		}
	}
}

// TestSelfImprovement: three runs of the lead that its scorer (samplingRate
// 100, selfImprovement) finds bad reach the factory's failedRunThreshold
// of 3: one self-improvement run (source SELF_IMPROVEMENT) starts on the
// factory's repository, and opens one pull request on the code host whose
// description lists the three regressions; the factory's self-improvement
// list shows it with its pull request; the failures are addressed.
func TestSelfImprovement(t *testing.T) {
	f := githubtest.New(t)
	f.AddRepo("acme", "widgets", map[string]string{"README.md": "# Widgets\n"})
	h, _, _ := codeHostServerTree(t, f, map[string]string{
		"factory.yaml": "schemaVersion: v1alpha1\nname: Widgets\nrepositories:\n  - owner: acme\n    name: widgets\nagentDefaults:\n  model: auto\n" +
			"selfImprovement:\n  reviewerType: custom\n  failedRunThreshold: 3\n  reviewerEmails: [lead@example.com]\n",
		"agents/lead/agent.md":    "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"webhooks/github.yaml":    "authMode: signature\nsignatureScheme: github\nsecretName: gh\n",
		"scorers/tests/scorer.md": "---\nagents: [lead]\nlabels:\n  - {value: good, score: 1}\n  - {value: bad, score: 0}\npassingScore: 1\nmodel: judge-1\nsamplingRate: 100\nselfImprovement: true\n---\nDid it run the tests?\n\ndemo-score: bad\n",
	})
	st := h.status("acme")
	var failing []string
	for i := range 3 {
		status, b := call(t, h, "POST", "/v1/factory/"+st.UID+"/runs", map[string]any{"prompt": fmt.Sprintf("Tidy module %d", i)}, "Authorization", "Bearer "+adminKey)
		var out map[string]any
		if json.Unmarshal(b, &out); status != 200 {
			t.Fatalf("dispatch: %d %s", status, b)
		}
		failing = append(failing, out["run_id"].(string))
	}
	runs := awaitRuns(t, h, st.UID, 7) // 3 runs, 3 judges, 1 self-improvement
	si := runs[factory.SourceSelfImprovement]
	if len(si) != 1 || si[0].State != factory.StateSucceeded || len(runs[factory.SourceScorer]) != 3 {
		t.Fatalf("self-improvement runs %v, %d judges", si, len(runs[factory.SourceScorer]))
	}
	f.Snapshot(func() {
		if len(f.Pulls) != 1 {
			t.Fatalf("%d pull requests on the code host, want 1", len(f.Pulls))
		}
		body := f.Pulls[0].Body
		if !strings.Contains(body, "## Regressions addressed") {
			t.Errorf("the pull request's description: %q", body)
		}
		for _, id := range failing {
			if !strings.Contains(body, "run "+id) || !strings.Contains(body, "classified it bad") {
				t.Errorf("the pull request does not list %s: %q", id, body)
			}
		}
	})
	if !slices.ContainsFunc(si[0].Artifacts, func(a factory.Artifact) bool { return a.Type == factory.ArtifactPullRequest }) {
		t.Errorf("the self-improvement run's artifacts: %+v", si[0].Artifacts)
	}
	_, b := call(t, h, "GET", "/v1/factory/"+st.UID+"/self-improvement", nil, "Authorization", "Bearer "+adminKey)
	var list struct {
		Runs []struct {
			RunID        string               `json:"run_id"`
			Agent        string               `json:"agent"`
			Regressions  []factory.Regression `json:"regressions"`
			PullRequests []map[string]any     `json:"pull_requests"`
			Reviewers    []string             `json:"reviewers"`
		} `json:"runs"`
		Unaddressed map[string]any `json:"unaddressed"`
	}
	json.Unmarshal(b, &list)
	if len(list.Runs) != 1 || list.Runs[0].RunID != si[0].ID || list.Runs[0].Agent != "lead" || len(list.Runs[0].Regressions) != 3 ||
		len(list.Runs[0].PullRequests) != 1 || len(list.Unaddressed) != 0 || list.Runs[0].Reviewers[0] != "lead@example.com" {
		t.Errorf("self-improvement: %s", b)
	}
}
