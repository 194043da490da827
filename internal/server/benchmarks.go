package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"factory"
	"factory/internal/measure"
	"factory/internal/store"
)

// Benchmark runs and self-improvement as the newest SDKs call them
// (docs/measure-and-improve.md).

// suiteResource finds the suite a path names, with its factory and the
// factory's agents' UIDs.
func (s *Server) suiteResource(r *http.Request) (*factory.Factory, *measure.Suite, map[string]string, error) {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return nil, nil, nil, err
	}
	var su *measure.Suite
	var agents map[string]string
	err = s.eachFactoryResource(f.UID, factory.ResourceSuite, func(_ *factory.Factory, res *factory.Resource, a map[string]string) {
		if res.UID == r.PathValue("suiteUid") && err == nil {
			su, err = measure.SuiteOf(res, a)
			agents = a
		}
	})
	if err == nil && su == nil {
		err = errorf(CodeNotFound, "factory "+f.Name+" has no suite "+r.PathValue("suiteUid"))
	}
	return f, su, agents, err
}

// launchSuite is POST .../suites/{suite}/runs: a benchmark run of the
// suite, launched (the SDKs' SuiteLaunchRunParams; 201 {uid, state}).
func (s *Server) launchSuite(w http.ResponseWriter, r *http.Request) error {
	var q struct {
		RepetitionCount *int             `json:"repetition_count"`
		Configurations  []map[string]any `json:"configurations"`
		ScorerSelection []int64          `json:"scorer_selection"`
		Tasks           []string         `json:"tasks"`
	}
	raw, err := readJSON(r, 1<<20, &q)
	if err != nil {
		return err
	}
	f, su, agents, err := s.suiteResource(r)
	if err != nil {
		return err
	}
	if q.RepetitionCount == nil || *q.RepetitionCount < 1 {
		return errorf(CodeInvalidRequest, "repetition_count: required, at least 1")
	}
	l := measure.Launch{Repetitions: *q.RepetitionCount, ScorerIDs: q.ScorerSelection, TaskUIDs: q.Tasks, Creator: creatorOf(r)}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(raw, &keys)
	if _, given := keys["configurations"]; given {
		l.Configs = []factory.BenchConf{}
		for i, c := range q.Configurations {
			l.Configs = append(l.Configs, measure.ConfigOf(i+1, c, agents))
		}
	}
	if _, given := keys["tasks"]; given && l.TaskUIDs == nil {
		l.TaskUIDs = []string{}
	}
	br, err := s.measure.LaunchSuite(f, su, l)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]any{"uid": br.UID, "state": br.State})
	return nil
}

// benchmarkRunOf reads the benchmark run a path names, of the path's
// factory.
func (s *Server) benchmarkRunOf(r *http.Request) (*factory.BenchmarkRun, error) {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return nil, err
	}
	br, err := s.store.BenchmarkRun(r.PathValue("runUid"))
	if store.IsNotFound(err) || err == nil && br.FactoryUID != f.UID {
		return nil, errorf(CodeNotFound, "factory "+f.Name+" has no benchmark run "+r.PathValue("runUid"))
	}
	return br, err
}

// listBenchmarkRuns is GET /v1/factory/{uid}/benchmarks/runs, newest
// first, filtered by state and suite_uid.
func (s *Server) listBenchmarkRuns(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	scope := "benchmark-runs/" + f.UID
	limit, pos, err := s.pageOf(r, scope, 20, 100)
	if err != nil {
		return err
	}
	states, suite := r.URL.Query()["state"], r.URL.Query().Get("suite_uid")
	out := []map[string]any{}
	more := false
	for len(out) < limit {
		brs, last, next, err := s.store.BenchmarkRuns(f.UID, pos, limit)
		if err != nil {
			return err
		}
		for _, br := range brs {
			if (len(states) == 0 || slices.Contains(states, br.State)) && (suite == "" || br.SuiteUID == suite) && len(out) < limit {
				res, err := s.measure.Results(br)
				if err != nil {
					return err
				}
				out = append(out, benchRunObject(res, false))
				pos = ""
			}
		}
		if more = next; !next {
			break
		}
		pos = last
	}
	info, err := s.sealedPage(scope, pos, more && pos != "")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out, "page_info": info})
	return nil
}

func (s *Server) getBenchmarkRun(w http.ResponseWriter, r *http.Request) error {
	br, err := s.benchmarkRunOf(r)
	if err != nil {
		return err
	}
	res, err := s.measure.Results(br)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, benchRunObject(res, true))
	return nil
}

func (s *Server) cancelBenchmarkRun(w http.ResponseWriter, r *http.Request) error {
	br, err := s.benchmarkRunOf(r)
	if err != nil {
		return err
	}
	if br, err = s.measure.CancelBenchmark(br.UID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"uid": br.UID, "state": br.State})
	return nil
}

// elapsedOf is a benchmark run's wall time so far, nil before it started.
func elapsedOf(br *factory.BenchmarkRun) *float64 {
	if br.StartedAt == nil {
		return nil
	}
	end := time.Now()
	if br.CompletedAt != nil {
		end = *br.CompletedAt
	}
	v := end.Sub(*br.StartedAt).Seconds()
	return &v
}

// benchRunObject is a benchmark run as the SDKs' RunListResponse, or
// RunGetResponse when full.
func benchRunObject(res *measure.Results, full bool) map[string]any {
	br := res.Run
	o := map[string]any{"uid": br.UID, "factory_uid": br.FactoryUID, "suite_uid": br.SuiteUID, "suite_name": br.SuiteName, "state": br.State,
		"created_at": br.CreatedAt, "updated_at": br.UpdatedAt, "agent_name": br.AgentName, "agent_uid": br.AgentUID,
		"started_at": br.StartedAt, "completed_at": br.CompletedAt, "repetition_count": br.Repetitions, "elapsed_s": elapsedOf(br),
		"configuration_stats": nil, "cost_usd": nil, "scorer_count": nil, "task_count": nil, "trial_count": nil, "total_credits": nil}
	if br.Creator != nil {
		o["creator"] = map[string]any{"type": br.Creator.Type, "uid": br.Creator.UID, "display_name": br.Creator.DisplayName}
	}
	if dispatched := countDispatched(br); dispatched > 0 {
		o["trial_count"], o["scorer_count"], o["task_count"] = dispatched, len(br.Scorers), len(br.Tasks)
		o["cost_usd"] = sumCosts(res.TrialCostUSD, res.ScoringCostUSD)
		stats := []map[string]any{}
		for _, c := range res.Configs {
			st := map[string]any{"id": c.Config.ID, "display_name": c.Config.DisplayName, "role": c.Config.Role, "trial_count": c.Trials,
				"pass_count": c.Pass, "fail_count": c.Fail, "pass_rate": c.PassRate, "avg_wall_time_s": c.MeanWall,
				"avg_total_credits_per_trial": nil, "model": c.Config.Model, "harness": c.Config.Harness, "avg_cost_usd_per_trial": c.MeanCost}
			stats = append(stats, st)
		}
		o["configuration_stats"] = stats
	}
	if full {
		o["configurations"] = confObjects(br.Configs)
		sel := []int64{}
		for _, sc := range br.Scorers {
			if sc.Kind == measure.KindUser {
				sel = append(sel, sc.ID)
			}
		}
		o["scorer_selection"] = sel
		o["trials"] = trialObjects(br, res, false)
	}
	return o
}

func countDispatched(br *factory.BenchmarkRun) int {
	n := 0
	for _, t := range br.Trials {
		if t.RunID != "" {
			n++
		}
	}
	return n
}

func sumCosts(a, b *float64) *float64 {
	if a == nil && b == nil {
		return nil
	}
	v := 0.0
	for _, c := range []*float64{a, b} {
		if c != nil {
			v += *c
		}
	}
	return &v
}

// confObjects are configurations as the SDKs'.
func confObjects(cs []factory.BenchConf) []map[string]any {
	out := []map[string]any{}
	for _, c := range cs {
		o := map[string]any{"id": c.ID, "display_name": c.DisplayName, "role": c.Role, "model": c.Model, "harness": c.Harness}
		if c.AuthSecret != "" {
			o["harness_auth_secret_name"] = c.AuthSecret
		}
		if len(c.Agents) > 0 {
			o["agent_configs"] = c.Agents
		}
		out = append(out, o)
	}
	return out
}

// trialObjects are the trials as the SDKs' (RunGetResponse.Trial, or with
// their scores and metrics RunGetResultsResponse.Trial).
func trialObjects(br *factory.BenchmarkRun, res *measure.Results, withScores bool) []map[string]any {
	out := []map[string]any{}
	for _, tr := range res.Trials {
		t := tr.Trial
		task := br.Tasks[slices.IndexFunc(br.Tasks, func(x factory.BenchTask) bool { return x.UID == t.TaskUID })]
		o := map[string]any{"id": t.ID, "configuration_id": t.ConfigID, "rep_index": t.Rep, "state": trialState(t.State),
			"suite_task_id": task.ID, "task_uid": task.UID, "task_title": task.Title, "attempt_count": 1, "attempts": []any{}}
		if t.RunID != "" {
			o["run_id"] = t.RunID
			o["attempts"] = []map[string]any{{"attempt_number": 1, "run_id": t.RunID, "state": t.State}}
		}
		if withScores {
			o["metrics"] = map[string]any{"wall_time_s": tr.WallS, "cost_usd": tr.CostUSD}
			o["judge_runs"] = tr.Judges
			o["scores"] = trialScores(br, tr)
			if t.State == factory.StateFailed || t.State == factory.StateError {
				o["terminal_reason"] = "failure"
			}
		}
		out = append(out, o)
	}
	return out
}

// trialState is a trial's state as the SDKs spell it.
func trialState(st factory.RunState) string {
	switch st {
	case "":
		return "pending"
	case factory.StateSucceeded:
		return "succeeded"
	case factory.StateFailed, factory.StateError:
		return "failed"
	case factory.StateCancelled:
		return "cancelled"
	case factory.StateQueued, factory.StatePending:
		return "pending"
	}
	return "running"
}

// trialScores are a trial's scores, one per scorer of the run.
func trialScores(br *factory.BenchmarkRun, tr measure.TrialResult) []map[string]any {
	out := []map[string]any{}
	for _, sc := range tr.Scores {
		bs := br.Scorers[slices.IndexFunc(br.Scorers, func(b factory.BenchScorer) bool { return b.UID == sc.ScorerUID })]
		o := map[string]any{"scorer_id": bs.ID, "scorer_name": bs.Name, "scorer_kind": bs.Kind, "status": sc.Status, "is_in_flight": sc.InFlight,
			"scoring_run_id": sc.JudgeRunID}
		if sc.Value != nil {
			o["classification"], o["score"], o["outcome"], o["reason"] = sc.Classification, *sc.Value, outcome(sc.Passed(bs.Threshold)), sc.Reason
		}
		out = append(out, o)
	}
	return out
}
