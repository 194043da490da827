package server

import (
	"net/http"

	"factory"
	"factory/internal/measure"
)

// creatorOf is who an API call acts as: its key, nil for none.
func creatorOf(r *http.Request) *factory.Creator {
	if key := callerKey(r); key != nil {
		return apiKeyCreator(key)
	}
	return nil
}

// benchmarkResults is GET .../benchmarks/runs/{run}/results: the SDKs'
// RunGetResultsResponse, with the recommendation (an extension) and the
// summary narrative that states it.
func (s *Server) benchmarkResults(w http.ResponseWriter, r *http.Request) error {
	br, err := s.benchmarkRunOf(r)
	if err != nil {
		return err
	}
	res, err := s.measure.Results(br)
	if err != nil {
		return err
	}
	o := map[string]any{"benchmark_run_uid": br.UID, "run_state": br.State, "suite_name": br.SuiteName, "repetition_count": br.Repetitions,
		"provisional":    br.State == factory.BenchPending || br.State == factory.BenchRunning || br.State == factory.BenchScoring,
		"configurations": resultConfigs(res), "trials": trialObjects(br, res, true), "scorers": benchScorers(br),
		"trial_progress": trialProgress(br), "score_progress": scoreProgress(res), "summary_status": "pending",
		"cost_latency": costLatency(res), "recommendation": res.Recommendation}
	o["trials_being_judged"], o["trials_scoring_finished"] = judging(res)
	if br.Incomplete != "" {
		o["incomplete_reason"] = br.Incomplete
	}
	if res.TrialCostUSD != nil {
		o["run_metrics"] = map[string]any{"cost_usd": *res.TrialCostUSD, "scoring_cost_usd": deref(res.ScoringCostUSD), "elapsed_s": deref(elapsedOf(br)),
			"total_credits": "0", "compute_credits": "0", "platform_credits": "0"}
	}
	more := []*measure.Recommendation{}
	for _, rec := range []*measure.Recommendation{res.Fastest, res.Cheapest} {
		if rec != nil {
			more = append(more, rec)
		}
	}
	o["additional_recommendations"] = more
	switch br.State {
	case factory.BenchCompleted:
		o["summary_status"], o["summary_narrative"] = "available", narrative(res)
	case factory.BenchFailed, factory.BenchCancelled:
		o["summary_status"] = "unavailable"
	}
	writeJSON(w, http.StatusOK, o)
	return nil
}

func deref(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}

// narrative is the completed run's summary: its recommendation, or why
// there is none.
func narrative(res *measure.Results) string {
	if res.Recommendation == nil {
		return "No recommendation: fewer than two configurations have scored trials."
	}
	out := "Recommended: " + res.Recommendation.DisplayName + ". " + res.Recommendation.Reason
	for _, rec := range []*measure.Recommendation{res.Fastest, res.Cheapest} {
		if rec != nil {
			out += " " + rec.DisplayName + " is " + rec.Reason + "."
		}
	}
	return out
}

// resultConfigs are the configurations with their tallies.
func resultConfigs(res *measure.Results) []map[string]any {
	out := []map[string]any{}
	for _, c := range res.Configs {
		o := confObjects([]factory.BenchConf{c.Config})[0]
		byScorer := map[string]any{}
		for uid, t := range c.ByScorer {
			byScorer[uid] = map[string]any{"pass_count": t.Pass, "fail_count": t.Fail}
		}
		o["scoring"] = map[string]any{"pass_count": c.Pass, "fail_count": c.Fail, "pass_rate": c.PassRate, "mean_score": c.MeanScore, "by_scorer": byScorer}
		o["metrics"] = map[string]any{"trial_count": c.Trials, "succeeded": c.Succeeded, "failed": c.Failed, "avg_wall_time_s": c.MeanWall,
			"avg_cost_usd": c.MeanCost, "total_cost_usd": costOrNil(c.CostSum, c.Costed)}
		o["retried_trial_count"], o["retry_count"] = 0, 0
		out = append(out, o)
	}
	return out
}

func costOrNil(sum float64, n int) *float64 {
	if n == 0 {
		return nil
	}
	return &sum
}

// costLatency is each configuration's mean cost and wall time per trial.
func costLatency(res *measure.Results) []map[string]any {
	out := []map[string]any{}
	for _, c := range res.Configs {
		out = append(out, map[string]any{"configuration_id": c.Config.ID, "avg_cost_usd": c.MeanCost, "avg_wall_time_s": c.MeanWall})
	}
	return out
}

func benchScorers(br *factory.BenchmarkRun) []map[string]any {
	out := []map[string]any{}
	for _, sc := range br.Scorers {
		out = append(out, map[string]any{"id": sc.ID, "uid": sc.UID, "name": sc.Name, "scorer_kind": sc.Kind, "threshold": sc.Threshold})
	}
	return out
}

// trialProgress counts the trials by state.
func trialProgress(br *factory.BenchmarkRun) map[string]int {
	p := map[string]int{"pending": 0, "running": 0, "succeeded": 0, "failed": 0, "cancelled": 0, "completed": 0, "total": len(br.Trials)}
	for _, t := range br.Trials {
		st := trialState(t.State)
		p[st]++
		if st == "succeeded" || st == "failed" || st == "cancelled" {
			p["completed"]++
		}
	}
	return p
}

// scoreProgress counts the judges' work: scored, judging, failed.
func scoreProgress(res *measure.Results) map[string]int {
	p := map[string]int{"judging": 0, "scored": 0, "finished_unscored": 0}
	for _, tr := range res.Trials {
		for _, sc := range tr.Scores {
			switch {
			case sc.InFlight:
				p["judging"]++
			case sc.Value != nil:
				p["scored"]++
			default:
				p["finished_unscored"]++
			}
		}
	}
	p["received"], p["expected"] = p["scored"], p["judging"]+p["scored"]+p["finished_unscored"]
	return p
}

// judging counts the succeeded trials with a judge still at work, and
// those whose judges are all done.
func judging(res *measure.Results) (being, finished int) {
	for _, tr := range res.Trials {
		if tr.Trial.State != factory.StateSucceeded {
			continue
		}
		busy := len(tr.Scores) < len(res.Run.Scorers)
		for _, sc := range tr.Scores {
			busy = busy || sc.InFlight
		}
		if busy {
			being++
		} else {
			finished++
		}
	}
	return being, finished
}

// listProposals is GET /v1/factory/{uid}/self-improvement (an
// extension): the factory's self-improvement runs, newest first, each
// with its pull requests and the regressions it addresses, and the
// failures not addressed yet.
func (s *Server) listProposals(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	ps, err := s.store.Proposals(f.UID)
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, p := range ps {
		o := map[string]any{"run_id": p.RunID, "agent": p.Agent, "regressions": p.Regressions, "reviewers": p.Reviewers, "created_at": p.CreatedAt,
			"pull_requests": []any{}}
		if run, err := s.store.Run(p.RunID); err == nil {
			o["state"] = run.State
			prs := []factory.ArtifactData{}
			for _, a := range run.Artifacts {
				if a.Type == factory.ArtifactPullRequest {
					prs = append(prs, a.Data)
				}
			}
			o["pull_requests"] = prs
		}
		out = append(out, o)
	}
	pending, err := s.store.Regressions(f.UID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out, "unaddressed": pending})
	return nil
}

// improveNow is POST /v1/factory/{uid}/self-improvement/run (an
// extension: the dashboard's "Run now"): a self-improvement run for each
// agent with at least one unaddressed failure.
func (s *Server) improveNow(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	ps, err := s.measure.Improve(f.UID, true)
	if err != nil {
		return err
	}
	ids := []string{}
	for _, p := range ps {
		ids = append(ids, p.RunID)
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"run_ids": ids})
	return nil
}
