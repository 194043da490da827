package measure

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"factory"
	"factory/internal/automations"
	"factory/internal/runs"
	"factory/internal/store"
)

// sample starts a judge run of each of the factory's scorers that judges
// the run's agent and samples it: runs that completed (SUCCEEDED or
// FAILED), not those the server stopped (ERROR) or a person cancelled.
func (s *Service) sample(r *factory.Run) error {
	if r.State != factory.StateSucceeded && r.State != factory.StateFailed {
		return nil
	}
	f, err := s.factoryOf(r.FactoryUID)
	if err != nil {
		return err
	}
	scs, err := Scorers(s.cfg.Store, f)
	if err != nil {
		return err
	}
	for _, sc := range scs {
		if !sc.Applies(agentOf(r)) || !Sampled(sc.UID, r.ID, sc.Rate) {
			continue
		}
		if _, err := s.startJudge(sc, r, factory.ScoreAutomatic, ""); err != nil {
			return err
		}
	}
	return nil
}

// ScoreRun scores a run now with a scorer of its factory (on demand):
// a judge run starts whatever the sampling rate, and its answer replaces
// the scorer's last score of the run.
func (s *Service) ScoreRun(scorerID, runID string) (*factory.Score, error) {
	sc, err := FindScorer(s.cfg.Store, scorerID)
	if err != nil {
		return nil, err
	}
	r, err := s.cfg.Store.Run(runID)
	if store.IsNotFound(err) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no run %s", runID)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case r.FactoryUID != sc.Factory.UID:
		return nil, factory.Errorf(factory.EINVALID, "run %s is not a run of factory %s, whose scorer %s is", runID, sc.Factory.Name, sc.Name)
	case !r.State.Terminal():
		return nil, factory.Errorf(factory.ECONFLICT, "run %s is %s: a scorer judges runs that have ended", runID, r.State)
	case r.Source == factory.SourceScorer:
		return nil, factory.Errorf(factory.EINVALID, "run %s is a judge run: scorers judge the factory's other runs", runID)
	}
	return s.startJudge(sc, r, factory.ScoreManual, "")
}

// startJudge records the scorer's attempt on the run, then starts its
// judge run: an automatic attempt on the same turn of the run is made once
// (its judge's ID is derived from them), a manual one every time.
func (s *Service) startJudge(sc *Scorer, r *factory.Run, trigger, criteria string) (*factory.Score, error) {
	now := s.cfg.Now().UTC()
	parts := []string{"judge", sc.UID, r.ID, strconv.Itoa(r.Turns)}
	if trigger == factory.ScoreManual {
		parts = append(parts, strconv.FormatInt(now.UnixNano(), 10))
	}
	judgeID := factory.DerivedID(factory.PrefixRun, parts...)
	fresh := false
	score, err := s.cfg.Store.UpdateScore(sc.UID, r.ID, func(score *factory.Score, exists bool) error {
		if exists && score.JudgeRunID == judgeID {
			return store.ErrNoChange
		}
		fresh = true
		score.ScorerName, score.FactoryUID, score.Agent, score.JudgeRunID = sc.Name, sc.Factory.UID, agentOf(r), judgeID
		score.Trigger, score.AttemptedAt, score.InFlight, score.Error = trigger, now, true, ""
		score.Threshold, score.Labels, score.SelfImprovement = sc.Threshold, sc.Labels, sc.SelfImprovement
		if score.Value == nil {
			score.Status = factory.ScoreInFlight
		}
		return nil
	})
	if err != nil || !fresh {
		return score, err
	}
	req, err := s.judgeRequest(sc, r, judgeID, criteria)
	if err == nil {
		_, err = s.cfg.Runs.Create(req)
	}
	if err != nil {
		return s.attemptFailed(score, "starting the judge run: "+err.Error())
	}
	return score, nil
}

// judgeRequest is the judge run of a scorer on a run: an ordinary run of
// the factory (source RUN_SCORER) of the scorer's model, whose prompt
// holds the rubric, the labels, how to answer, and the run.
func (s *Service) judgeRequest(sc *Scorer, r *factory.Run, id, criteria string) (runs.CreateRequest, error) {
	events, err := s.cfg.Store.RunEvents(r.ID)
	if err != nil {
		return runs.CreateRequest{}, err
	}
	harness := &factory.Harness{Type: factory.HarnessOz, Model: sc.Model}
	cfg, _ := json.Marshal(map[string]string{"model_id": sc.Model, "name": "scorer " + sc.Name})
	req := runs.CreateRequest{ID: id, Prompt: JudgePrompt(sc, r, events, criteria), Title: "Score " + sc.Name + ": " + r.Title,
		Source: factory.SourceScorer, FactoryUID: sc.Factory.UID, Config: cfg, Repositories: []factory.RepoCheckout{},
		Metadata: map[string]string{"scorer": sc.Name, "scored_run_id": r.ID}, ErrorOnUnknownEnvironment: true,
		Setup: &factory.RunSetup{Agent: "scorer:" + sc.Name, Harness: harness}, Creator: &factory.Creator{Type: "service_account", UID: "scorer", DisplayName: "scorer " + sc.Name}}
	env, ok := s.cfg.Runs.HarnessEnvironment(harness.Type)
	req.Environment = env
	if !ok {
		req.FailWith = &factory.StatusMessage{ErrorCode: automations.CodeHarnessNotConfigured,
			Message: fmt.Sprintf("no environment runs the %s harness that scorer %s's judge needs", harness.Type, sc.Name)}
	}
	return req, nil
}

// Bounds of what a judge is shown of a run: the end of what it did is
// the most telling.
const (
	maxJudgedPrompt   = 16 << 10
	maxJudgedMessages = 32 << 10
)

// JudgePrompt is what a judge run is asked: what to check (the rubric, and
// a benchmark task's success criteria), the labels and their scores, how
// to answer (one JSON object, which ParseVerdict reads), and the run: its
// prompt, its messages and tool calls, what it produced, how it ended.
func JudgePrompt(sc *Scorer, r *factory.Run, events []*factory.RunEvent, criteria string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are the judge of scorer %q of factory %q. Judge the completed run below against what to check, and classify it with exactly one label.\n\n", sc.Name, sc.Factory.Name)
	b.WriteString("## What to check\n\n" + strings.TrimSpace(sc.Rubric) + "\n\n")
	if criteria != "" {
		b.WriteString("## Success criteria\n\n" + strings.TrimSpace(criteria) + "\n\n")
	}
	b.WriteString("## Labels\n\n")
	for _, l := range sc.Labels {
		fmt.Fprintf(&b, "- %s (score %g)", l.Value, l.Score)
		if l.Description != "" {
			b.WriteString(": " + l.Description)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nA run passes with a score of %g or more.\n\n## How to answer\n\n", sc.Threshold)
	b.WriteString("End your answer with one line holding only a JSON object: " +
		`{"classification": "<one of the labels>", "reason": "<why, in a few sentences>"}` + "\n\n")
	fmt.Fprintf(&b, "## The run\n\nRun %s, %q, of agent %s, ended %s", r.ID, r.Title, orNone(agentOf(r)), r.State)
	if m := r.StatusMessage; m != nil && m.Message != "" {
		fmt.Fprintf(&b, " (%s)", clip(m.Message, 500))
	}
	b.WriteString(".\n\n### Its prompt\n\n" + clip(r.Prompt, maxJudgedPrompt) + "\n\n### What it did\n\n")
	b.WriteString(judgedMessages(events))
	b.WriteString("\n### What it produced\n\n")
	if len(r.Artifacts) == 0 {
		b.WriteString("Nothing.\n")
	}
	for _, a := range r.Artifacts {
		fmt.Fprintf(&b, "- %s %s%s\n", a.Type, a.Data.Filename, a.Data.URL)
	}
	return b.String()
}

// judgedMessages are the run's messages, the last of them when they are
// many.
func judgedMessages(events []*factory.RunEvent) string {
	var lines []string
	size := 0
	for i := len(events) - 1; i >= 0 && size < maxJudgedMessages; i-- {
		if e := events[i]; e.Kind == "message" || e.Kind == "followup" {
			line := clip(e.Message, 4096)
			lines = append(lines, line)
			size += len(line)
		}
	}
	if len(lines) == 0 {
		return "No messages.\n"
	}
	var b strings.Builder
	for i := len(lines) - 1; i >= 0; i-- {
		b.WriteString(lines[i] + "\n")
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// judged records a judge run's answer as its scorer's score of the run it
// judged: the label it chose in its last message and that label's score,
// or the attempt's failure (the judge did not succeed, or named no label).
func (s *Service) judged(judge *factory.Run) error {
	score, err := s.cfg.Store.ScoreOfJudge(judge.ID)
	if store.IsNotFound(err) || err == nil && (score.JudgeRunID != judge.ID || !score.InFlight) {
		return nil // replaced by a later attempt, or recorded already
	}
	if err != nil {
		return err
	}
	v, why := s.verdictOf(judge, score)
	if why != "" {
		score, err = s.attemptFailed(score, why)
	} else {
		score, err = s.recordVerdict(score, judge.ID, v)
	}
	if err != nil {
		return err
	}
	return s.scoreRecorded(score)
}

// verdictOf reads a judge's answer; why says why there is none.
func (s *Service) verdictOf(judge *factory.Run, score *factory.Score) (Verdict, string) {
	if judge.State != factory.StateSucceeded {
		why := "the judge run ended " + string(judge.State)
		if m := judge.StatusMessage; m != nil && m.Message != "" {
			why += ": " + m.Message
		}
		return Verdict{}, why
	}
	events, err := s.cfg.Store.RunEvents(judge.ID)
	if err != nil {
		return Verdict{}, "reading the judge's messages: " + err.Error()
	}
	var text strings.Builder
	for _, e := range events {
		if e.Kind == "message" {
			text.WriteString(e.Message + "\n")
		}
	}
	labels := make([]string, len(score.Labels))
	for i, l := range score.Labels {
		labels[i] = l.Value
	}
	v, err := ParseVerdict(text.String(), labels)
	if err != nil {
		return Verdict{}, err.Error()
	}
	return v, ""
}

// recordVerdict makes the judge's label the live score.
func (s *Service) recordVerdict(score *factory.Score, judgeID string, v Verdict) (*factory.Score, error) {
	now := s.cfg.Now().UTC()
	return s.cfg.Store.UpdateScore(score.ScorerUID, score.RunID, func(sc *factory.Score, _ bool) error {
		if sc.JudgeRunID != judgeID || !sc.InFlight {
			return store.ErrNoChange
		}
		for _, l := range sc.Labels {
			if l.Value == v.Classification {
				value := l.Score
				sc.Value = &value
			}
		}
		sc.Classification, sc.Reason, sc.ScoredAt = v.Classification, clip(v.Reason, factory.MaxScoreReason), &now
		sc.Status, sc.InFlight, sc.Error = factory.ScoreScored, false, ""
		return nil
	})
}

// attemptFailed ends an attempt without a score: a live score from an
// earlier attempt stays; without one the attempt reads failed.
func (s *Service) attemptFailed(score *factory.Score, why string) (*factory.Score, error) {
	judgeID := score.JudgeRunID
	return s.cfg.Store.UpdateScore(score.ScorerUID, score.RunID, func(sc *factory.Score, _ bool) error {
		if sc.JudgeRunID != judgeID || !sc.InFlight {
			return store.ErrNoChange
		}
		sc.InFlight, sc.Error = false, clip(why, 2000)
		if sc.Value == nil {
			sc.Status = factory.ScoreFailed
		}
		return nil
	})
}

// scoreRecorded is what follows a judge's answer: a failing score of a
// scorer that feeds self-improvement counts against the agent; a trial's
// score may complete its benchmark run.
func (s *Service) scoreRecorded(score *factory.Score) error {
	if score.Trigger == factory.ScoreBenchmark {
		return s.trialJudged(score)
	}
	if score.Status != factory.ScoreScored || score.Passed(score.Threshold) || !score.SelfImprovement || score.Agent == "" {
		return nil
	}
	title := ""
	if r, err := s.cfg.Store.Run(score.RunID); err == nil {
		title = r.Title
	}
	return s.addRegression(score.FactoryUID, score.Agent, factory.Regression{RunID: score.RunID, Title: title, At: time.Now().UTC(),
		ScorerUID: score.ScorerUID, ScorerName: score.ScorerName, Classification: score.Classification, Reason: clip(score.Reason, 1000)})
}
