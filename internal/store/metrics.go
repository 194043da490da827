package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"factory"

	"github.com/cockroachdb/pebble"
)

// The metrics of factories (docs/measure-and-improve.md, the metrics API)
// are rollups by factory and UTC day, so that a query reads one record per
// day of its range, whatever the number of runs: a million runs cost what
// ten thousand do. Every write of a factory's run adds a journal entry
// (the run's facts before and after) in the run's own batch; FoldMetrics,
// the only writer of rollups, adds the entries' differences into the day
// records, the pull requests and the run trees, and deletes the entries,
// in one batch. A query folds what is pending first.
const (
	metricsJournalPrefix = "mxj/"   // mxj/<ns>/<run id> → journalEntry
	metricsDayPrefix     = "mxd/"   // mxd/<factory uid>/<YYYY-MM-DD> → DayRollup
	metricsTreePrefix    = "mxt/"   // mxt/<root run id> → treeRecord
	metricsPRPrefix      = "mxpr/"  // mxpr/<factory uid>/<first seen ns>/<pr id> → PullRequestRecord
	metricsPRIDPrefix    = "mxpri/" // mxpri/<factory uid>/<pr id> → <first seen ns>
	metricsPRCostPrefix  = "mxprc/" // mxprc/<factory uid>/<day>/<inverted micro-dollars>/<pr id> → nothing
)

// Dollars is spend in US dollars by category.
type Dollars struct {
	Inference float64 `json:"inference"`
	Compute   float64 `json:"compute"`
	Platform  float64 `json:"platform"`
}

// Total is the sum of the categories.
func (d Dollars) Total() float64 { return d.Inference + d.Compute + d.Platform }

func (d Dollars) plus(o Dollars, sign float64) Dollars {
	return Dollars{d.Inference + sign*o.Inference, d.Compute + sign*o.Compute, d.Platform + sign*o.Platform}
}

func (d Dollars) scaled(f float64) Dollars {
	return Dollars{d.Inference * f, d.Compute * f, d.Platform * f}
}

// runFacts are what the metrics count of a run.
type runFacts struct {
	Factory   string            `json:"f"`
	Day       string            `json:"d"`
	Created   int64             `json:"t"`
	RootID    string            `json:"r"`
	Root      bool              `json:"root,omitempty"`
	State     string            `json:"s"`
	Source    string            `json:"so,omitempty"`
	Agent     string            `json:"a,omitempty"`
	Model     string            `json:"m,omitempty"`
	Harness   string            `json:"h,omitempty"`
	Creator   string            `json:"c,omitempty"`
	CreatorNm string            `json:"cn,omitempty"`
	Cost      *Dollars          `json:"$,omitempty"`
	PRs       map[string]prFact `json:"pr,omitempty"`
}

// prFact is a pull request a run produced, as its artifact says it.
type prFact struct {
	Status string `json:"s,omitempty"`
	Branch string `json:"b,omitempty"`
	Title  string `json:"t,omitempty"`
}

// journalEntry is a run's facts before and after a write.
type journalEntry struct {
	RunID string    `json:"id"`
	Prev  *runFacts `json:"p,omitempty"`
	Now   *runFacts `json:"n,omitempty"`
	At    int64     `json:"at"`
}

var journalSeq atomic.Int64

// factsOf are a run's facts; nil for a run of no factory.
func factsOf(r *factory.Run) *runFacts {
	if r == nil || r.FactoryUID == "" {
		return nil
	}
	f := &runFacts{Factory: r.FactoryUID, Day: r.CreatedAt.UTC().Format(time.DateOnly), Created: r.CreatedAt.UnixNano(), RootID: r.RootRunID(),
		Root: r.ParentRunID == "", State: string(r.State), Source: factory.SourceName(r.Source)}
	if r.Setup != nil {
		f.Agent = r.Setup.Agent
		if h := r.Setup.Harness; h != nil {
			f.Harness, f.Model = h.Type, h.Model
		}
	}
	var cfg struct {
		Model string `json:"model_id"`
	}
	if json.Unmarshal(r.Config, &cfg) == nil && cfg.Model != "" {
		f.Model = cfg.Model
	}
	if r.Creator != nil {
		f.Creator, f.CreatorNm = r.Creator.UID, r.Creator.DisplayName
	}
	if u := r.Usage; u != nil && (u.InferenceCostUSD != nil || u.ComputeCostUSD != nil || u.PlatformCostUSD != nil) {
		f.Cost = &Dollars{deref(u.InferenceCostUSD), deref(u.ComputeCostUSD), deref(u.PlatformCostUSD)}
	}
	for _, a := range r.Artifacts {
		if a.Type == factory.ArtifactPullRequest && a.Data.URL != "" {
			if f.PRs == nil {
				f.PRs = map[string]prFact{}
			}
			f.PRs[a.Data.URL] = prFact{Status: a.Data.Status, Branch: a.Data.Branch, Title: a.Data.Title}
		}
	}
	return f
}

func deref(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}

// journalRun adds a run's write to the metrics journal, when the facts
// the metrics count changed.
func (b *Batch) journalRun(r, prev *factory.Run) {
	now, was := factsOf(r), factsOf(prev)
	if now == nil && was == nil {
		return
	}
	if a, err1 := json.Marshal(now); err1 == nil {
		if c, err2 := json.Marshal(was); err2 == nil && string(a) == string(c) {
			return
		}
	}
	at := time.Now().UnixNano()
	for {
		last := journalSeq.Load()
		seq := max(at, last+1)
		if journalSeq.CompareAndSwap(last, seq) {
			at = seq
			break
		}
	}
	b.putJSON(fmt.Sprintf("%s%020d/%s", metricsJournalPrefix, at, r.ID), journalEntry{RunID: r.ID, Prev: was, Now: now, At: at})
}

// prID is a pull request's ID in the metrics: a digest of its URL.
func prID(url string) string {
	h := sha256.Sum256([]byte(url))
	return hex.EncodeToString(h[:10])
}

// errFoldDone stops a scan that has what it needs.
var errFoldDone = errors.New("fold done")

// maxFold bounds the journal entries one fold batch takes.
const maxFold = 5000

// FoldMetrics adds the pending journal entries into the rollups, a batch
// at a time, until none is left. Each batch holds the fold's lock alone,
// so that a query waits for one batch at most.
func (s *Store) FoldMetrics() error {
	for {
		s.foldMu.Lock()
		n, err := s.foldBatch()
		s.foldMu.Unlock()
		if err != nil || n < maxFold {
			return err
		}
	}
}

// foldForQuery folds one batch of what is pending before a query: what
// was written just before it counts, and a long backlog (a store of an
// older binary, journaled at its open) is left to the server's fold loop,
// the answer lagging meanwhile, rather than holding the query.
func (s *Store) foldForQuery() error {
	if pending, err := s.hasPendingMetrics(); err != nil || !pending {
		return err
	}
	s.foldMu.Lock()
	defer s.foldMu.Unlock()
	_, err := s.foldBatch()
	return err
}

// foldBatch folds up to maxFold entries in one batch.
func (s *Store) foldBatch() (int, error) {
	f := newFolder(s)
	n := 0
	err := s.scan(metricsJournalPrefix, func(key string, v []byte) error {
		var e journalEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("decode %s: %w", key, err)
		}
		if err := f.apply(&e); err != nil {
			return err
		}
		f.b.delete(key)
		if n++; n == maxFold {
			return errFoldDone
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFoldDone) {
		f.b.Abort()
		return 0, err
	}
	if n == 0 {
		f.b.Abort()
		return 0, nil
	}
	return n, f.commit()
}

// hasPendingMetrics reports whether the journal holds entries.
func (s *Store) hasPendingMetrics() (bool, error) {
	return s.hasKeyIn([]byte(metricsJournalPrefix), prefixEnd(metricsJournalPrefix))
}

// DayRollups reads a factory's day records from one day to another
// (inclusive), folding a batch of what is pending first; days without
// runs are absent.
func (s *Store) DayRollups(factoryUID string, from, to time.Time) (map[string]*DayRollup, error) {
	if err := s.foldForQuery(); err != nil {
		return nil, err
	}
	out := map[string]*DayRollup{}
	prefix := metricsDayPrefix + factoryUID + "/"
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix + from.UTC().Format(time.DateOnly)),
		UpperBound: []byte(prefix + to.UTC().Format(time.DateOnly) + "\xff")})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		d := &DayRollup{}
		if err := json.Unmarshal(it.Value(), d); err != nil {
			return nil, fmt.Errorf("decode %s: %w", it.Key(), err)
		}
		out[strings.TrimPrefix(string(it.Key()), prefix)] = d
	}
	return out, it.Error()
}

// metricsMeta records that every run of the store is in the metrics
// journal (or its rollups): a new store is stamped with it at creation.
const metricsMeta = "metrics_journal"

// BackfillMetrics journals, once, every run of a factory written before
// the journal existed (a store of an older binary), so that the rollups
// count them. The store's open calls it, before anything writes runs.
func (s *Store) BackfillMetrics() error {
	v, err := s.Meta(metricsMeta)
	if err != nil || v == "1" {
		return err
	}
	rollups, err := s.hasKeyIn([]byte(metricsDayPrefix), prefixEnd(metricsDayPrefix))
	if err != nil {
		return err
	}
	pending, err := s.hasPendingMetrics()
	if err != nil {
		return err
	}
	if rollups || pending { // this store journals already
		b := s.NewBatch()
		b.PutMeta(metricsMeta, "1")
		return b.Commit()
	}
	b := s.NewLogBatch()
	n := 0
	err = s.scan(runPrefix, func(_ string, val []byte) error {
		r := &factory.Run{}
		if err := json.Unmarshal(val, r); err != nil {
			return err
		}
		b.journalRun(r, nil)
		if n++; n%1000 == 0 {
			if err := b.CommitNoSync(); err != nil {
				return err
			}
			b = s.NewLogBatch()
		}
		return nil
	})
	if err != nil {
		b.Abort()
		return err
	}
	b.PutMeta(metricsMeta, "1")
	return b.Commit()
}
