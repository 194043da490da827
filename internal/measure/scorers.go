package measure

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"factory"
	"factory/internal/store"
)

// Scorer is a factory's scorer as scoring uses it: scorers/<name>/scorer.md
// with the factory's scorerDefaults filled in (docs/spec/v1alpha1.md), or a
// benchmark's built-in correctness scorer.
type Scorer struct {
	UID  string
	ID   int64
	Name string
	// Rubric is what the judge checks for: the scorer's body.
	Rubric    string
	Model     string
	Agents    []string // none: every agent of the factory
	Labels    []factory.ScoreLabel
	Threshold float64
	// Rate is the percentage of eligible runs scored automatically.
	Rate            float64
	SelfImprovement bool
	Kind            string // user, or benchmark_task_correctness
	Factory         *factory.Factory
	Description     string
}

// Scorer kinds (the SDK's scorer_kind).
const (
	KindUser        = "user"
	KindCorrectness = "benchmark_task_correctness"
)

// DefaultSamplingRate is a scorer's samplingRate when neither it nor
// scorerDefaults.sampleRate says one (docs/spec/v1alpha1.md).
const DefaultSamplingRate = 25

// scorerSpec is what scorers/<name>/scorer.md says.
type scorerSpec struct {
	Name            string               `json:"name"`
	Description     string               `json:"description"`
	Agents          []string             `json:"agents"`
	Labels          []factory.ScoreLabel `json:"labels"`
	PassingScore    float64              `json:"passingScore"`
	SamplingRate    *float64             `json:"samplingRate"`
	Model           string               `json:"model"`
	SelfImprovement bool                 `json:"selfImprovement"`
}

// ScorerOf reads an applied scorer of a factory.
func ScorerOf(f *factory.Factory, res *factory.Resource) (*Scorer, error) {
	var sp scorerSpec
	if err := json.Unmarshal(res.Spec, &sp); err != nil {
		return nil, fmt.Errorf("scorer %s: %w", res.Key, err)
	}
	sc := &Scorer{UID: res.UID, ID: NumericID(res.UID), Name: sp.Name, Rubric: res.Body, Model: sp.Model, Agents: sp.Agents,
		Labels: sp.Labels, Threshold: sp.PassingScore, Rate: DefaultSamplingRate, SelfImprovement: sp.SelfImprovement,
		Kind: KindUser, Factory: f, Description: sp.Description}
	if sc.Name == "" {
		sc.Name = res.Key
	}
	if d := f.Settings.ScorerDefaults; d != nil {
		if sc.Model == "" {
			sc.Model = d.Model
		}
		if d.SampleRate != nil {
			sc.Rate = *d.SampleRate * 100
		}
	}
	if sp.SamplingRate != nil {
		sc.Rate = *sp.SamplingRate
	}
	return sc, nil
}

// Scorers reads a factory's scorers, by name.
func Scorers(st *store.Store, f *factory.Factory) ([]*Scorer, error) {
	res, err := st.Resources(f.Name, factory.ResourceScorer)
	if err != nil {
		return nil, err
	}
	out := make([]*Scorer, 0, len(res))
	for _, r := range res {
		sc, err := ScorerOf(f, r)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	slices.SortFunc(out, func(a, b *Scorer) int { return cmpString(a.Name, b.Name) })
	return out, nil
}

// FindScorer finds a scorer of any factory by its UID or numeric ID.
func FindScorer(st *store.Store, id string) (*Scorer, error) {
	fs, err := st.Factories()
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		scs, err := Scorers(st, f)
		if err != nil {
			return nil, err
		}
		for _, sc := range scs {
			if sc.UID == id || strconv.FormatInt(sc.ID, 10) == id {
				return sc, nil
			}
		}
	}
	return nil, factory.Errorf(factory.ENOTFOUND, "no scorer %s", id)
}

// Applies reports whether the scorer judges runs of an agent ("" for a
// run of no agent: only scorers of every agent do).
func (sc *Scorer) Applies(agent string) bool {
	return len(sc.Agents) == 0 || agent != "" && slices.Contains(sc.Agents, agent)
}

// LabelNames are the scorer's labels.
func (sc *Scorer) LabelNames() []string {
	out := make([]string, len(sc.Labels))
	for i, l := range sc.Labels {
		out[i] = l.Value
	}
	return out
}

// NumericID is the integer ID the SDKs give a scorer or a task, derived
// from its UID (the same at every read; 48 bits, so that a JavaScript
// number holds it).
func NumericID(uid string) int64 {
	h := factory.DerivedID("", "scorer-id", uid)
	b, _ := factory.IDEncoding.DecodeString(h)
	var buf [8]byte
	copy(buf[2:], b[:6])
	return int64(binary.BigEndian.Uint64(buf[:]))
}

// Sampled says whether a scorer at a sampling rate (a percentage) scores
// a run automatically: decided by the scorer and the run alone (the SDK:
// "runs are chosen deterministically per (scorer, run)"), so that the
// same run is decided the same way every time it is asked, and a lower
// rate scores a subset of the runs a higher one does.
func Sampled(scorerUID, runID string, percent float64) bool {
	if percent <= 0 {
		return false
	}
	if percent >= 100 {
		return true
	}
	h := sha256.Sum256([]byte("sample\x00" + scorerUID + "\x00" + runID))
	u := float64(binary.BigEndian.Uint64(h[:8])>>11) / (1 << 53) // uniform in [0, 1)
	return u*100 < percent
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
