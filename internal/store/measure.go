package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"factory"

	"github.com/cockroachdb/pebble"
)

// Key layout of scores, benchmark runs and self-improvement
// (docs/measure-and-improve.md).
const (
	scorePrefix      = "score/"      // score/<scorer uid>/<run id> → Score
	scoreAtPrefix    = "scoreat/"    // scoreat/<scorer uid>/<attempted ns>/<run id> → nothing: a scorer's results by time
	scoreRunPrefix   = "scorerun/"   // scorerun/<run id>/<scorer uid> → nothing: a run's scores
	scoreJudgePrefix = "scorejudge/" // scorejudge/<judge run id> → <scorer uid>/<run id>
	scoreCountPrefix = "scorecount/" // scorecount/<scorer uid> → how many runs have a live score

	benchPrefix        = "bench/"      // bench/<uid> → BenchmarkRun
	benchFactoryPrefix = "benchf/"     // benchf/<factory uid>/<created ns>/<uid> → nothing
	benchTrialPrefix   = "benchtrial/" // benchtrial/<trial run id> → <bench uid>

	regressionPrefix = "sifail/" // sifail/<factory uid>/<agent>/<run id>/<scorer uid or ->  → Regression
	proposalPrefix   = "siprop/" // siprop/<factory uid>/<created ns>/<run id> → ImprovementProposal
	proposalRun      = "sirun/"  // sirun/<run id> → the proposal's key
)

// measureLocks serialise the read-modify-writes of scores and benchmark
// runs; they are few (a judge's or a trial's end), so one lock each.
type measureLocks struct {
	score, bench sync.Mutex
}

// Score reads a scorer's score of a run.
func (s *Store) Score(scorerUID, runID string) (*factory.Score, error) {
	sc := &factory.Score{}
	return sc, s.getJSON(scorePrefix+scorerUID+"/"+runID, sc)
}

// UpdateScore reads a scorer's score of a run (a zero one, exists false,
// when there is none), lets fn change it, and writes it with its indexes,
// synced; fn's ErrNoChange writes nothing. The count of live scores
// follows.
func (s *Store) UpdateScore(scorerUID, runID string, fn func(sc *factory.Score, exists bool) error) (*factory.Score, error) {
	s.measure.score.Lock()
	defer s.measure.score.Unlock()
	prev, err := s.Score(scorerUID, runID)
	exists := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if !exists {
		prev = &factory.Score{ScorerUID: scorerUID, RunID: runID}
	}
	sc := *prev
	if err := fn(&sc, exists); err != nil {
		if errors.Is(err, ErrNoChange) {
			return prev, nil
		}
		return nil, err
	}
	sc.ScorerUID, sc.RunID = scorerUID, runID
	b := s.NewLogBatch()
	b.putJSON(scorePrefix+scorerUID+"/"+runID, &sc)
	if exists && !prev.AttemptedAt.Equal(sc.AttemptedAt) {
		b.delete(scoreAtPrefix + scorerUID + "/" + nanos(prev.AttemptedAt) + "/" + runID)
	}
	b.putRaw(scoreAtPrefix+scorerUID+"/"+nanos(sc.AttemptedAt)+"/"+runID, nil)
	b.putRaw(scoreRunPrefix+runID+"/"+scorerUID, nil)
	if exists && prev.JudgeRunID != "" && prev.JudgeRunID != sc.JudgeRunID {
		b.delete(scoreJudgePrefix + prev.JudgeRunID)
	}
	if sc.JudgeRunID != "" {
		b.putRaw(scoreJudgePrefix+sc.JudgeRunID, []byte(scorerUID+"/"+runID))
	}
	if prev.Value == nil && sc.Value != nil {
		n, err := s.ScorerResultCount(scorerUID)
		if err != nil {
			b.Abort()
			return nil, err
		}
		b.putRaw(scoreCountPrefix+scorerUID, []byte(strconv.Itoa(n+1)))
	}
	return &sc, b.Commit()
}

// ScoreOfJudge is the score a judge run was started for.
func (s *Store) ScoreOfJudge(judgeRunID string) (*factory.Score, error) {
	v, err := s.get(scoreJudgePrefix + judgeRunID)
	if err != nil {
		return nil, err
	}
	scorer, run, _ := strings.Cut(string(v), "/")
	return s.Score(scorer, run)
}

// ScoresOfRun are every scorer's score of a run.
func (s *Store) ScoresOfRun(runID string) ([]*factory.Score, error) {
	var out []*factory.Score
	prefix := scoreRunPrefix + runID + "/"
	err := s.scan(prefix, func(key string, _ []byte) error {
		sc, err := s.Score(key[len(prefix):], runID)
		if err == nil {
			out = append(out, sc)
		}
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	})
	return out, err
}

// ScorerResultCount is how many runs a scorer holds a live score of.
func (s *Store) ScorerResultCount(scorerUID string) (int, error) {
	v, err := s.get(scoreCountPrefix + scorerUID)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(v))
}

// ScorerResults lists a scorer's scores, newest attempt first, from
// before a position (a page's Last, "" from the newest), at most limit:
// a walk of its index, as long as the page.
func (s *Store) ScorerResults(scorerUID, before string, limit int) (*ScorePage, error) {
	prefix := scoreAtPrefix + scorerUID + "/"
	upper := prefixEnd(prefix)
	if before != "" {
		upper = []byte(prefix + before)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	page := &ScorePage{}
	for ok := it.Last(); ok; ok = it.Prev() {
		pos := string(it.Key())[len(prefix):]
		if len(page.Scores) == limit {
			page.More = true
			break
		}
		sc, err := s.Score(scorerUID, pos[strings.IndexByte(pos, '/')+1:])
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		page.Scores, page.Last = append(page.Scores, sc), pos
	}
	return page, it.Error()
}

// ScorePage is a page of a scorer's scores and the position to go on from.
type ScorePage struct {
	Scores []*factory.Score
	More   bool
	Last   string
}

// CreateBenchmarkRun stores a new benchmark run, findable by its factory.
func (s *Store) CreateBenchmarkRun(br *factory.BenchmarkRun) error {
	s.measure.bench.Lock()
	defer s.measure.bench.Unlock()
	b := s.NewLogBatch()
	b.putJSON(benchPrefix+br.UID, br)
	b.putRaw(benchFactoryPrefix+br.FactoryUID+"/"+nanos(br.CreatedAt)+"/"+br.UID, nil)
	return b.Commit()
}

// BenchmarkRun reads a benchmark run.
func (s *Store) BenchmarkRun(uid string) (*factory.BenchmarkRun, error) {
	br := &factory.BenchmarkRun{}
	return br, s.getJSON(benchPrefix+uid, br)
}

// UpdateBenchmarkRun reads a benchmark run, lets fn change it and writes
// it, with the index of its trials' runs; fn's ErrNoChange writes nothing.
func (s *Store) UpdateBenchmarkRun(uid string, fn func(*factory.BenchmarkRun) error) (*factory.BenchmarkRun, error) {
	s.measure.bench.Lock()
	defer s.measure.bench.Unlock()
	br, err := s.BenchmarkRun(uid)
	if err != nil {
		return nil, err
	}
	if err := fn(br); err != nil {
		if errors.Is(err, ErrNoChange) {
			return br, nil
		}
		return nil, err
	}
	b := s.NewLogBatch()
	b.putJSON(benchPrefix+uid, br)
	for _, t := range br.Trials {
		if t.RunID != "" {
			b.putRaw(benchTrialPrefix+t.RunID, []byte(uid))
		}
	}
	return br, b.Commit()
}

// BenchmarkOfTrial is the benchmark run a trial's run belongs to.
func (s *Store) BenchmarkOfTrial(runID string) (string, error) {
	v, err := s.get(benchTrialPrefix + runID)
	return string(v), err
}

// BenchmarkRuns lists a factory's benchmark runs, newest first, from
// before a position ("" from the newest), at most limit.
func (s *Store) BenchmarkRuns(factoryUID, before string, limit int) ([]*factory.BenchmarkRun, string, bool, error) {
	prefix := benchFactoryPrefix + factoryUID + "/"
	upper := prefixEnd(prefix)
	if before != "" {
		upper = []byte(prefix + before)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: upper})
	if err != nil {
		return nil, "", false, err
	}
	defer it.Close()
	var out []*factory.BenchmarkRun
	last := ""
	for ok := it.Last(); ok; ok = it.Prev() {
		if len(out) == limit {
			return out, last, true, nil
		}
		pos := string(it.Key())[len(prefix):]
		br, err := s.BenchmarkRun(pos[strings.IndexByte(pos, '/')+1:])
		if err != nil {
			return nil, "", false, err
		}
		out, last = append(out, br), pos
	}
	return out, last, false, it.Error()
}

func regressionKey(factoryUID, agent string, r factory.Regression) string {
	scorer := r.ScorerUID
	if scorer == "" {
		scorer = "-"
	}
	return regressionPrefix + factoryUID + "/" + escapeIndexValue(agent) + "/" + r.RunID + "/" + scorer
}

// AddRegression records a failure of an agent's run that no
// self-improvement run has addressed yet (once per run and scorer).
func (s *Store) AddRegression(factoryUID, agent string, r factory.Regression) error {
	b := s.NewLogBatch()
	b.putJSON(regressionKey(factoryUID, agent, r), r)
	return b.Commit()
}

// Regressions are the unaddressed failures of a factory's agents, by
// agent, oldest first.
func (s *Store) Regressions(factoryUID string) (map[string][]factory.Regression, error) {
	out := map[string][]factory.Regression{}
	prefix := regressionPrefix + factoryUID + "/"
	err := s.scan(prefix, func(key string, v []byte) error {
		var r factory.Regression
		if err := decodeJSON(key, v, &r); err != nil {
			return err
		}
		agent := key[len(prefix):]
		agent = unescapeIndexValue(agent[:strings.IndexByte(agent, '/')])
		out[agent] = append(out[agent], r)
		return nil
	})
	for _, rs := range out {
		sortRegressions(rs)
	}
	return out, err
}

// AddProposal records a self-improvement run and takes the regressions it
// addresses off the agent's unaddressed failures, together.
func (s *Store) AddProposal(p *factory.ImprovementProposal) error {
	b := s.NewLogBatch()
	key := proposalPrefix + p.FactoryUID + "/" + nanos(p.CreatedAt) + "/" + p.RunID
	b.putJSON(key, p)
	b.putRaw(proposalRun+p.RunID, []byte(key))
	for _, r := range p.Regressions {
		b.delete(regressionKey(p.FactoryUID, p.Agent, r))
	}
	return b.Commit()
}

// Proposals lists a factory's self-improvement runs, newest first.
func (s *Store) Proposals(factoryUID string) ([]*factory.ImprovementProposal, error) {
	ps, err := scanJSON[factory.ImprovementProposal](s, proposalPrefix+factoryUID+"/")
	for i, j := 0, len(ps)-1; i < j; i, j = i+1, j-1 {
		ps[i], ps[j] = ps[j], ps[i]
	}
	return ps, err
}

// ProposalOfRun is the self-improvement proposal a run is.
func (s *Store) ProposalOfRun(runID string) (*factory.ImprovementProposal, error) {
	key, err := s.get(proposalRun + runID)
	if err != nil {
		return nil, err
	}
	p := &factory.ImprovementProposal{}
	return p, s.getJSON(string(key), p)
}

func decodeJSON(key string, v []byte, out any) error {
	if err := json.Unmarshal(v, out); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}

// unescapeIndexValue undoes escapeIndexValue.
func unescapeIndexValue(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	return strings.NewReplacer("%2F", "/", "%25", "%").Replace(v)
}

// sortRegressions orders failures oldest first.
func sortRegressions(rs []factory.Regression) {
	slices.SortStableFunc(rs, func(a, b factory.Regression) int { return a.At.Compare(b.At) })
}
