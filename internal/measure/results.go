package measure

import (
	"fmt"
	"slices"
	"strings"

	"factory"
)

// Results are a benchmark run's results so far: each configuration's
// tally, each trial with its scores, and the recommendation.
type Results struct {
	Run     *factory.BenchmarkRun
	Configs []ConfigResult
	Trials  []TrialResult
	// Recommendation is the configuration of the highest quality, when at
	// least two have scored trials; Fastest and Cheapest the most
	// efficient ones, when they differ from it (Cheapest only where cost
	// is known).
	Recommendation, Fastest, Cheapest *Recommendation
	// TrialCostUSD and ScoringCostUSD are what the trials and their judges
	// cost, nil while no run's cost is known.
	TrialCostUSD, ScoringCostUSD *float64
}

// ConfigResult is one configuration's tally: its trials, its scored
// outcomes (pass or fail, every scorer), the mean score, the mean wall
// time and cost of its trials.
type ConfigResult struct {
	Config                        factory.BenchConf
	Trials, Succeeded, Failed     int
	Pass, Fail                    int
	ByScorer                      map[string]*Tally
	ScoreSum                      float64
	Scored                        int
	WallSum                       float64
	Timed                         int
	CostSum                       float64
	Costed                        int
	PassRate, MeanScore, MeanWall *float64
	MeanCost                      *float64
}

// Tally counts one scorer's outcomes.
type Tally struct {
	Pass, Fail int
	ScoreSum   float64
}

// TrialResult is a trial with its run's scores, wall time and cost.
type TrialResult struct {
	Trial   factory.Trial
	Scores  []*factory.Score
	WallS   *float64
	CostUSD *float64
	Judges  []string
}

// Recommendation names a configuration and says why.
type Recommendation struct {
	ConfigID    int    `json:"configuration_id"`
	DisplayName string `json:"display_name"`
	Reason      string `json:"reason"`
}

// Results tallies a benchmark run from its trials' runs and scores. A
// trial whose run failed counts as failing every scorer (it is not
// judged); a cancelled one counts for none.
func (s *Service) Results(br *factory.BenchmarkRun) (*Results, error) {
	res := &Results{Run: br}
	byConf := map[int]*ConfigResult{}
	for _, c := range br.Configs {
		res.Configs = append(res.Configs, ConfigResult{Config: c, ByScorer: map[string]*Tally{}})
	}
	for i := range res.Configs {
		byConf[res.Configs[i].Config.ID] = &res.Configs[i]
	}
	for _, t := range br.Trials {
		tr, err := s.trialResult(br, t, res)
		if err != nil {
			return nil, err
		}
		res.Trials = append(res.Trials, tr)
		if cr := byConf[t.ConfigID]; cr != nil {
			cr.add(br, tr)
		}
	}
	for i := range res.Configs {
		res.Configs[i].finish()
	}
	res.recommend()
	return res, nil
}

// trialResult reads a trial's run and scores.
func (s *Service) trialResult(br *factory.BenchmarkRun, t factory.Trial, res *Results) (TrialResult, error) {
	tr := TrialResult{Trial: t}
	if t.RunID == "" {
		return tr, nil
	}
	r, err := s.cfg.Store.Run(t.RunID)
	if err != nil {
		return tr, err
	}
	tr.Trial.State = r.State
	if r.StartedAt != nil && r.FinishedAt != nil && r.State.Terminal() {
		w := r.FinishedAt.Sub(*r.StartedAt).Seconds()
		tr.WallS = &w
	}
	tr.CostUSD = RunCostUSD(r)
	res.TrialCostUSD = addCost(res.TrialCostUSD, tr.CostUSD)
	scs, err := s.cfg.Store.ScoresOfRun(t.RunID)
	if err != nil {
		return tr, err
	}
	for _, sc := range scs {
		if !slices.ContainsFunc(br.Scorers, func(b factory.BenchScorer) bool { return b.UID == sc.ScorerUID }) {
			continue
		}
		tr.Scores = append(tr.Scores, sc)
		if sc.JudgeRunID != "" {
			tr.Judges = append(tr.Judges, sc.JudgeRunID)
			if j, err := s.cfg.Store.Run(sc.JudgeRunID); err == nil {
				res.ScoringCostUSD = addCost(res.ScoringCostUSD, RunCostUSD(j))
			}
		}
	}
	return tr, nil
}

// add counts a trial.
func (cr *ConfigResult) add(br *factory.BenchmarkRun, tr TrialResult) {
	cr.Trials++
	switch tr.Trial.State {
	case factory.StateSucceeded:
		cr.Succeeded++
	case factory.StateFailed, factory.StateError:
		cr.Failed++
		for _, bs := range br.Scorers {
			cr.tally(bs.UID).Fail++
			cr.Fail++
		}
	}
	if tr.WallS != nil {
		cr.WallSum += *tr.WallS
		cr.Timed++
	}
	if tr.CostUSD != nil {
		cr.CostSum += *tr.CostUSD
		cr.Costed++
	}
	for _, sc := range tr.Scores {
		if sc.Value == nil {
			continue
		}
		bs := br.Scorers[slices.IndexFunc(br.Scorers, func(b factory.BenchScorer) bool { return b.UID == sc.ScorerUID })]
		t := cr.tally(sc.ScorerUID)
		t.ScoreSum += *sc.Value
		cr.ScoreSum += *sc.Value
		cr.Scored++
		if sc.Passed(bs.Threshold) {
			t.Pass++
			cr.Pass++
		} else {
			t.Fail++
			cr.Fail++
		}
	}
}

func (cr *ConfigResult) tally(uid string) *Tally {
	if cr.ByScorer[uid] == nil {
		cr.ByScorer[uid] = &Tally{}
	}
	return cr.ByScorer[uid]
}

// finish computes the means.
func (cr *ConfigResult) finish() {
	ratio := func(a float64, n int) *float64 {
		if n == 0 {
			return nil
		}
		v := a / float64(n)
		return &v
	}
	cr.PassRate = ratio(float64(cr.Pass), cr.Pass+cr.Fail)
	cr.MeanScore = ratio(cr.ScoreSum, cr.Scored)
	cr.MeanWall = ratio(cr.WallSum, cr.Timed)
	cr.MeanCost = ratio(cr.CostSum, cr.Costed)
}

// recommend picks the configuration of the highest pass rate (then mean
// score, then lower mean cost, then lower mean wall time, then the
// baseline and the first), among those with scored outcomes, when there
// are at least two; and the fastest and cheapest when they differ.
func (res *Results) recommend() {
	var cands []*ConfigResult
	for i := range res.Configs {
		if res.Configs[i].PassRate != nil {
			cands = append(cands, &res.Configs[i])
		}
	}
	if len(cands) < 2 {
		return
	}
	slices.SortStableFunc(cands, compareQuality)
	best := cands[0]
	res.Recommendation = &Recommendation{ConfigID: best.Config.ID, DisplayName: best.Config.DisplayName, Reason: qualityReason(best, cands[1:])}
	if f := extreme(cands, func(c *ConfigResult) *float64 { return c.MeanWall }); f != nil && f != best {
		res.Fastest = &Recommendation{ConfigID: f.Config.ID, DisplayName: f.Config.DisplayName,
			Reason: fmt.Sprintf("the fastest: %.1f s per trial on average, against %.1f s for %s", *f.MeanWall, deref(best.MeanWall), best.Config.DisplayName)}
	}
	if c := extreme(cands, func(c *ConfigResult) *float64 { return c.MeanCost }); c != nil && c != best {
		res.Cheapest = &Recommendation{ConfigID: c.Config.ID, DisplayName: c.Config.DisplayName,
			Reason: fmt.Sprintf("the lowest cost: $%.4f per trial on average, against $%.4f for %s", *c.MeanCost, deref(best.MeanCost), best.Config.DisplayName)}
	}
}

// compareQuality orders configurations best first.
func compareQuality(a, b *ConfigResult) int {
	for _, c := range []int{cmpDesc(a.PassRate, b.PassRate), cmpDesc(a.MeanScore, b.MeanScore), cmpAsc(a.MeanCost, b.MeanCost), cmpAsc(a.MeanWall, b.MeanWall)} {
		if c != 0 {
			return c
		}
	}
	if a.Config.Role != b.Config.Role {
		if a.Config.Role == "baseline" {
			return -1
		}
		return 1
	}
	return a.Config.ID - b.Config.ID
}

// cmpDesc orders known before unknown, higher before lower.
func cmpDesc(a, b *float64) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	case *a > *b:
		return -1
	case *a < *b:
		return 1
	}
	return 0
}

// cmpAsc orders known before unknown, lower before higher.
func cmpAsc(a, b *float64) int {
	if a != nil && b != nil {
		return -cmpDesc(a, b)
	}
	return cmpDesc(a, b)
}

// extreme is the configuration with the lowest known value, if every
// candidate's is known.
func extreme(cands []*ConfigResult, of func(*ConfigResult) *float64) *ConfigResult {
	var out *ConfigResult
	for _, c := range cands {
		v := of(c)
		if v == nil {
			return nil
		}
		if out == nil || *v < *of(out) {
			out = c
		}
	}
	return out
}

// qualityReason says why the best configuration is recommended.
func qualityReason(best *ConfigResult, others []*ConfigResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s passed %d of %d scored outcomes (%.0f%%)", best.Config.DisplayName, best.Pass, best.Pass+best.Fail, 100**best.PassRate)
	for i, o := range others {
		sep := ", against "
		if i > 0 {
			sep = ", and "
		}
		fmt.Fprintf(&b, "%s%d of %d (%.0f%%) for %s", sep, o.Pass, o.Pass+o.Fail, 100**o.PassRate, o.Config.DisplayName)
	}
	if len(others) > 0 && *others[0].PassRate == *best.PassRate {
		b.WriteString("; tied on pass rate, it is ahead on mean score, then cost, then time")
	}
	b.WriteString(".")
	return b.String()
}

func deref(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}

// RunCostUSD is what a run cost in US dollars, by its request_usage (the
// inference, compute and platform dollars it reports); nil when it reports
// none of them.
func RunCostUSD(r *factory.Run) *float64 {
	u := r.Usage
	if u == nil || u.InferenceCostUSD == nil && u.ComputeCostUSD == nil && u.PlatformCostUSD == nil {
		return nil
	}
	v := deref(u.InferenceCostUSD) + deref(u.ComputeCostUSD) + deref(u.PlatformCostUSD)
	return &v
}

func addCost(sum, v *float64) *float64 {
	if v == nil {
		return sum
	}
	out := *v + deref(sum)
	return &out
}
