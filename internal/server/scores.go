package server

import (
	"net/http"
	"strconv"
	"time"

	"factory"
	"factory/internal/cursor"
	"factory/internal/measure"
	"factory/internal/store"
)

// Scorers' results and runs' scores as the newest SDKs read them
// (docs/measure-and-improve.md): each is a score of the store, a scorer's
// latest attempt on a run.

// pageOf reads a page's limit (1..max, default def) and its cursor,
// opened in scope.
func (s *Server) pageOf(r *http.Request, scope string, def, max int) (limit int, pos string, err error) {
	limit = def
	if v := r.URL.Query().Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > max {
			return 0, "", errorf(CodeInvalidRequest, "limit: a whole number from 1 to "+strconv.Itoa(max))
		}
	}
	if c := r.URL.Query().Get("cursor"); c != "" {
		key, err := s.cursorKey()
		if err != nil {
			return 0, "", err
		}
		if pos, err = cursor.Open(key, scope, c); err != nil {
			return 0, "", errorf(CodeInvalidRequest, "the cursor is not one this server gave for this list")
		}
	}
	return limit, pos, nil
}

// sealedPage is a page's page_info, its next cursor sealed in scope.
func (s *Server) sealedPage(scope, last string, more bool) (factory.PageInfo, error) {
	p := factory.PageInfo{HasNextPage: more}
	if more {
		key, err := s.cursorKey()
		if err != nil {
			return p, err
		}
		p.NextCursor = cursor.Seal(key, scope, last)
	}
	return p, nil
}

// scorerOf finds the scorer a path names, by numeric ID or UID.
func (s *Server) scorerOf(r *http.Request) (*measure.Scorer, error) {
	return measure.FindScorer(s.store, r.PathValue("scorerId"))
}

// scorerResults is GET /v1/factory/scorers/{id}/results: the scorer's
// attempts, newest first.
func (s *Server) scorerResults(w http.ResponseWriter, r *http.Request) error {
	sc, err := s.scorerOf(r)
	if err != nil {
		return err
	}
	limit, pos, err := s.pageOf(r, "scorer-results/"+sc.UID, 50, 100)
	if err != nil {
		return err
	}
	page, err := s.store.ScorerResults(sc.UID, pos, limit)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(page.Scores))
	for _, score := range page.Scores {
		out = append(out, s.resultObject(sc, score))
	}
	info, err := s.sealedPage("scorer-results/"+sc.UID, page.Last, page.More)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out, "page_info": info})
	return nil
}

// resultObject is a score as the SDK's ScorerListResultsResponse: its
// outcome derived against the scorer's current threshold.
func (s *Server) resultObject(sc *measure.Scorer, score *factory.Score) map[string]any {
	o := map[string]any{"run_id": score.RunID, "attempted_at": score.AttemptedAt, "is_in_flight": score.InFlight, "status": score.Status}
	if run, err := s.store.Run(score.RunID); err == nil {
		o["conversation_id"], o["conversation_title"] = run.Conversation(), run.Title
	}
	if score.Value != nil {
		o["classification"], o["score"], o["scored_at"] = score.Classification, *score.Value, score.ScoredAt
		o["outcome"] = outcome(score.Passed(sc.Threshold))
	}
	if score.JudgeRunID != "" {
		o["scoring_run_id"] = score.JudgeRunID
		if judge, err := s.store.Run(score.JudgeRunID); err == nil {
			it := judge.Item()
			if it.FinishedAt != nil && it.RunTime != "" {
				o["scoring_run_time"] = it.RunTime
			}
			if judge.Usage != nil {
				o["scoring_run_usage"] = judge.Usage
			}
		}
	}
	if score.Error != "" {
		o["error"] = score.Error // extension: why the last attempt failed
	}
	return o
}

func outcome(passed bool) string {
	if passed {
		return "pass"
	}
	return "fail"
}

// scorerReasons is GET .../scorers/{id}/results/reasons?run_id=...: the
// judge's reason for each run, available or absent.
func (s *Server) scorerReasons(w http.ResponseWriter, r *http.Request) error {
	sc, err := s.scorerOf(r)
	if err != nil {
		return err
	}
	ids := r.URL.Query()["run_id"]
	if len(ids) == 0 || len(ids) > 100 {
		return errorf(CodeInvalidRequest, "run_id: give 1 to 100, one parameter each")
	}
	out := []map[string]any{}
	for _, id := range ids {
		o := map[string]any{"run_id": id, "status": "absent"}
		score, err := s.store.Score(sc.UID, id)
		switch {
		case err == nil && score.Value != nil && score.Reason != "":
			o["status"], o["reason"] = "available", score.Reason
		case err != nil && !store.IsNotFound(err):
			o["status"] = "unavailable"
		}
		out = append(out, o)
	}
	writeJSON(w, http.StatusOK, map[string]any{"reasons": out})
	return nil
}

// runScores is GET /v1/factory/runs/{run_id}/scores: every scorer's
// latest attempt on the run, most recent first.
func (s *Server) runScores(w http.ResponseWriter, id string) error {
	run, err := s.store.Run(id)
	if store.IsNotFound(err) {
		return errorf(CodeNotFound, "no run "+id)
	}
	if err != nil {
		return err
	}
	scores, err := s.store.ScoresOfRun(run.ID)
	if err != nil {
		return err
	}
	sortScores(scores)
	out := make([]map[string]any, 0, len(scores))
	for _, sc := range scores {
		out = append(out, scoreObject(sc))
	}
	writeJSON(w, http.StatusOK, map[string]any{"run_id": run.ID, "scores": out})
	return nil
}

// scoreObject is a score as the SDK's RunListScoresResponse.Score.
func scoreObject(sc *factory.Score) map[string]any {
	status := sc.Status
	if sc.Value != nil {
		status = factory.ScoreScored
	}
	trigger := sc.Trigger
	if trigger != factory.ScoreManual {
		trigger = factory.ScoreAutomatic // a benchmark's judges score as the run asked
	}
	o := map[string]any{"attempt_status": status, "attempted_at": sc.AttemptedAt, "is_in_flight": sc.InFlight,
		"scorer_id": measure.NumericID(sc.ScorerUID), "scorer_uid": sc.ScorerUID, "scorer_name": sc.ScorerName, "trigger_source": trigger}
	if sc.Value != nil {
		o["classification"], o["scored_at"], o["score"] = sc.Classification, sc.ScoredAt, *sc.Value
		o["outcome"] = outcome(sc.Passed(sc.Threshold))
	}
	if sc.JudgeRunID != "" {
		o["scoring_run_id"] = sc.JudgeRunID
	}
	if sc.Error != "" {
		o["error"] = sc.Error
	}
	return o
}

// sortScores orders scores most recent attempt first.
func sortScores(scores []*factory.Score) {
	for i := 1; i < len(scores); i++ {
		for j := i; j > 0 && scores[j].AttemptedAt.After(scores[j-1].AttemptedAt); j-- {
			scores[j], scores[j-1] = scores[j-1], scores[j]
		}
	}
}

// scoreRun is POST /v1/factory/scorers/{id}/score {"run_id"} (an
// extension: on-demand scoring, as the dashboard's "Score this run"):
// a judge run starts now, and its answer replaces the scorer's last score
// of the run. 202 with the attempt.
func (s *Server) scoreRun(w http.ResponseWriter, r *http.Request) error {
	var q struct {
		RunID string `json:"run_id"`
	}
	if _, err := readJSON(r, 64<<10, &q); err != nil {
		return err
	}
	if q.RunID == "" {
		return errorf(CodeInvalidRequest, "run_id: required")
	}
	sc, err := s.measure.ScoreRun(r.PathValue("scorerId"), q.RunID)
	if err != nil {
		return err
	}
	o := scoreObject(sc)
	o["run_id"] = sc.RunID
	writeJSON(w, http.StatusAccepted, o)
	return nil
}

// passRateSummary is a scorer's pass_rate_summary: the outcomes of its
// most recent live scores (at most limit, oldest first), or of those
// scored in [start, end) when a window is given.
func (s *Server) passRateSummary(sc *measure.Scorer, limit int, start, end *time.Time) (map[string]any, *time.Time, error) {
	outcomes := []string{}
	pass, fail := 0, 0
	var last *time.Time
	pos := ""
	for walked := 0; len(outcomes) < limit && walked < 10*limit; {
		page, err := s.store.ScorerResults(sc.UID, pos, limit)
		if err != nil {
			return nil, nil, err
		}
		for _, score := range page.Scores {
			walked++
			if score.Value == nil || score.ScoredAt == nil || len(outcomes) == limit ||
				start != nil && (score.ScoredAt.Before(*start) || !score.ScoredAt.Before(*end)) {
				continue
			}
			if last == nil || score.ScoredAt.After(*last) {
				last = score.ScoredAt
			}
			o := outcome(score.Passed(sc.Threshold))
			outcomes = append([]string{o}, outcomes...)
			if o == "pass" {
				pass++
			} else {
				fail++
			}
		}
		if !page.More {
			break
		}
		pos = page.Last
	}
	out := map[string]any{"pass_count": pass, "fail_count": fail, "recent_outcomes": outcomes, "pass_rate": nil}
	if pass+fail > 0 {
		out["pass_rate"] = float64(pass) / float64(pass+fail)
	}
	return out, last, nil
}
