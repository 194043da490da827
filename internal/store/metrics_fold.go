package store

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"factory"
)

// DayRollup is a factory's metrics of one UTC day: its runs (created that
// day) by each dimension the run breakdown groups by, their spend by each
// dimension the cost breakdown groups by, the pull requests first seen
// that day (and how many of them merged since, and what they cost), and
// the merges of that day with their cycle times.
type DayRollup struct {
	Runs  int `json:"runs"`
	Roots int `json:"roots"`
	// Groups counts runs by dimension (agent_type, status, source,
	// root_vs_subrun, model, harness), then key.
	Groups map[string]map[string]int `json:"groups,omitempty"`
	Cost   Dollars                   `json:"cost"`
	// Costed counts the runs whose cost is known.
	Costed     int                           `json:"costed"`
	CostGroups map[string]map[string]Dollars `json:"cost_groups,omitempty"`
	// Labels are display names of group keys (users).
	Labels map[string]string `json:"labels,omitempty"`
	PRs    int               `json:"prs"`
	// MergedCohort counts the pull requests first seen this day that have
	// merged since; PRCost is what those first seen this day cost, and
	// PRCosted how many of them have a known cost.
	MergedCohort int     `json:"merged_cohort"`
	PRCost       Dollars `json:"pr_cost"`
	PRCosted     int     `json:"pr_costed"`
	// Merged counts the factory's pull requests that merged this day, and
	// Latency their cycle time stages.
	Merged  int                   `json:"merged"`
	Latency map[string]*Histogram `json:"latency,omitempty"`
}

// Histogram counts durations in buckets 5% wide (log scale), so that a
// median over any number of days is read to within 5%.
type Histogram struct {
	Count   int         `json:"n"`
	Buckets map[int]int `json:"b"`
}

// histBase is the buckets' ratio.
const histBase = 1.05

func (h *Histogram) add(seconds float64, n int) {
	if h.Buckets == nil {
		h.Buckets = map[int]int{}
	}
	b := 0
	if seconds >= 1 {
		b = int(math.Log(seconds)/math.Log(histBase)) + 1
	}
	h.Buckets[b] += n
	h.Count += n
}

// Merge adds another histogram's counts.
func (h *Histogram) Merge(o *Histogram) {
	for b, n := range o.Buckets {
		if h.Buckets == nil {
			h.Buckets = map[int]int{}
		}
		h.Buckets[b] += n
	}
	h.Count += o.Count
}

// Median is the median duration in seconds (the middle of its bucket),
// nil for an empty histogram.
func (h *Histogram) Median() *float64 {
	if h == nil || h.Count == 0 {
		return nil
	}
	keys := make([]int, 0, len(h.Buckets))
	for k := range h.Buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	seen := 0
	for _, k := range keys {
		if seen += h.Buckets[k]; 2*seen >= h.Count {
			v := 0.0
			if k > 0 {
				v = math.Pow(histBase, float64(k)-0.5)
			}
			return &v
		}
	}
	return nil
}

// treeRecord is a run tree's spend and the pull requests it produced:
// its cost is split evenly over them.
type treeRecord struct {
	Factory string   `json:"f"`
	Cost    Dollars  `json:"cost"`
	Costed  bool     `json:"costed,omitempty"`
	PRs     []string `json:"prs,omitempty"`
	Source  string   `json:"source,omitempty"`
	Creator string   `json:"creator,omitempty"`
}

// PullRequestRecord is a pull request the factory's runs produced, as the
// metrics API's pull request record shows it.
type PullRequestRecord struct {
	ID        string     `json:"id"`
	Factory   string     `json:"factory_uid"`
	URL       string     `json:"url"`
	Provider  string     `json:"provider"`
	Repo      string     `json:"repo_full_name"`
	Number    int        `json:"pr_number"`
	Title     string     `json:"title,omitempty"`
	Branch    string     `json:"branch,omitempty"`
	State     string     `json:"state"`
	FirstSeen time.Time  `json:"first_seen_at"`
	MergedAt  *time.Time `json:"merged_at"`
	ClosedAt  *time.Time `json:"closed_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	KickoffAt time.Time  `json:"kickoff_at"`
	Runs      []PRRun    `json:"runs"`
	Cost      Dollars    `json:"cost"`
	Costed    bool       `json:"costed"`
	// Of the run that kicked the pull request off.
	Creator, CreatorName, Source, Model string
}

// PRRun is a run that produced a pull request.
type PRRun struct {
	RunID     string    `json:"run_id"`
	RootRunID string    `json:"root_run_id"`
	CreatedAt time.Time `json:"created_at"`
}

// day is the UTC day of a time, as the rollups key it.
func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// folder holds the records a fold batch changes, written at its end.
type folder struct {
	s     *Store
	b     *Batch
	days  map[string]*DayRollup // by "<factory>/<day>"
	trees map[string]*treeRecord
	prs   map[string]*PullRequestRecord // by "<factory>/<id>"
	// prKeys are the records' keys as read (first seen, cost key).
	prKeys map[string][2]string
	agents map[string]string // "<factory>/<agent>" → agent type
}

func newFolder(s *Store) *folder {
	return &folder{s: s, b: s.NewLogBatch(), days: map[string]*DayRollup{}, trees: map[string]*treeRecord{},
		prs: map[string]*PullRequestRecord{}, prKeys: map[string][2]string{}, agents: map[string]string{}}
}

func (f *folder) day(factoryUID, d string) (*DayRollup, error) {
	key := factoryUID + "/" + d
	if r := f.days[key]; r != nil {
		return r, nil
	}
	r := &DayRollup{}
	if err := f.s.getJSON(metricsDayPrefix+key, r); err != nil && !IsNotFound(err) {
		return nil, err
	}
	f.days[key] = r
	return r, nil
}

// apply folds one journal entry: the run's counts move from its old
// facts to its new ones; its spend's change goes to its day, its tree and
// the tree's pull requests; pull requests new to it or changed are
// recorded.
func (f *folder) apply(e *journalEntry) error {
	for _, side := range []struct {
		facts *runFacts
		sign  int
	}{{e.Prev, -1}, {e.Now, 1}} {
		if side.facts != nil {
			if err := f.count(side.facts, side.sign); err != nil {
				return err
			}
		}
	}
	if err := f.spend(e); err != nil {
		return err
	}
	if e.Now == nil {
		return nil
	}
	for url, pr := range e.Now.PRs {
		var was *prFact
		if e.Prev != nil {
			if p, ok := e.Prev.PRs[url]; ok {
				was = &p
			}
		}
		if err := f.pullRequest(e, url, pr, was); err != nil {
			return err
		}
	}
	return nil
}

// count moves a run's counts by sign.
func (f *folder) count(r *runFacts, sign int) error {
	d, err := f.day(r.Factory, r.Day)
	if err != nil {
		return err
	}
	d.Runs += sign
	level := "SUBRUN"
	if r.Root {
		d.Roots += sign
		level = "ROOT"
		d.group("source", r.Source, sign)
	}
	d.group("root_vs_subrun", level, sign)
	d.group("status", r.State, sign)
	d.group("agent_type", f.agentType(r), sign)
	d.group("model", orUnknown(r.Model), sign)
	d.group("harness", orUnknown(r.Harness), sign)
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// group moves a run's count in a dimension's group.
func (d *DayRollup) group(dim, key string, sign int) {
	if d.Groups == nil {
		d.Groups = map[string]map[string]int{}
	}
	if d.Groups[dim] == nil {
		d.Groups[dim] = map[string]int{}
	}
	if d.Groups[dim][key] += sign; d.Groups[dim][key] == 0 {
		delete(d.Groups[dim], key)
	}
}

// agentType is a run's agent type: the kind of run for judges, trials and
// self-improvement, else its agent's agentType (CUSTOM by default; none
// for a run of no agent).
func (f *folder) agentType(r *runFacts) string {
	switch r.Source {
	case factory.SourceScorer:
		return "SCORER"
	case factory.SourceBenchmarkTrial:
		return "BENCHMARK"
	case factory.SourceSelfImprovement:
		return "SELF_IMPROVEMENT"
	}
	if r.Agent == "" {
		return "NONE"
	}
	key := r.Factory + "/" + r.Agent
	if t, ok := f.agents[key]; ok {
		return t
	}
	t := factory.AgentCustom
	if name, err := f.s.factoryName(r.Factory); err == nil {
		if res, err := f.s.Resource(name, factory.ResourceAgent, r.Agent); err == nil {
			var sp factory.AgentSpec
			if json.Unmarshal(res.Spec, &sp) == nil && sp.AgentType != "" {
				t = strings.Replace(sp.AgentType, factory.AgentMain, factory.AgentForeman, 1)
			}
		}
	}
	f.agents[key] = t
	return t
}

// factoryName is the name of the factory of a UID.
func (s *Store) factoryName(uid string) (string, error) {
	fs, err := s.Factories()
	if err != nil {
		return "", err
	}
	for _, f := range fs {
		if f.UID == uid {
			return f.Name, nil
		}
	}
	return "", ErrNotFound
}

func (f *folder) commit() error {
	for key, d := range f.days {
		f.b.putJSON(metricsDayPrefix+key, d)
	}
	for root, t := range f.trees {
		f.b.putJSON(metricsTreePrefix+root, t)
	}
	for key, pr := range f.prs {
		old := f.prKeys[key]
		first := fmt.Sprintf("%020d", pr.FirstSeen.UnixNano())
		if old[0] != "" && old[0] != first {
			f.b.delete(metricsPRPrefix + pr.Factory + "/" + old[0] + "/" + pr.ID)
		}
		f.b.putJSON(metricsPRPrefix+pr.Factory+"/"+first+"/"+pr.ID, pr)
		f.b.putRaw(metricsPRIDPrefix+pr.Factory+"/"+pr.ID, []byte(first))
		costKey := prCostKey(pr)
		if old[1] != "" && old[1] != costKey {
			f.b.delete(old[1])
		}
		f.b.putRaw(costKey, nil)
	}
	return f.b.Commit()
}

// prCostKey orders a factory's pull requests of a day by cost, highest
// first.
func prCostKey(pr *PullRequestRecord) string {
	micro := int64(math.Round(pr.Cost.Total() * 1e6))
	return fmt.Sprintf("%s%s/%s/%020d/%s", metricsPRCostPrefix, pr.Factory, day(pr.FirstSeen), math.MaxInt64-max(micro, 0), pr.ID)
}
