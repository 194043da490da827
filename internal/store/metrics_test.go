package store

import (
	"fmt"
	"math"
	"testing"
	"time"

	"factory"
)

func usd(v float64) *float64 { return &v }

// dayOf reads one factory's rollup of a day.
func dayOf(t *testing.T, s *Store, fac string, d time.Time) *DayRollup {
	t.Helper()
	m, err := s.DayRollups(fac, d, d)
	if err != nil {
		t.Fatal(err)
	}
	if r := m[d.Format(time.DateOnly)]; r != nil {
		return r
	}
	return &DayRollup{}
}

// TestMetricsFold: a run's writes move its counts (a state change leaves
// one run counted, in its new state), its spend's changes add up, the
// spend of a tree is split over the pull requests it produced (a second
// pull request takes half of the first's), and a merge is counted once
// with its cycle time; folding twice changes nothing.
func TestMetricsFold(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	created := time.Now().UTC().Add(-time.Hour)
	r := &factory.Run{ID: "run_a", FactoryUID: "fa_1", State: factory.StateQueued, CreatedAt: created, UpdatedAt: created, Source: factory.SourceAPI}
	b := s.NewBatch()
	b.PutRun(r, nil)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	pr := func(url, status string) factory.Artifact {
		return factory.Artifact{Type: factory.ArtifactPullRequest, Data: factory.ArtifactData{URL: url, Status: status}}
	}
	steps := []func(r *factory.Run){
		func(r *factory.Run) { r.MoveTo(factory.StateClaimed) },
		func(r *factory.Run) {
			r.Usage = &factory.RequestUsage{InferenceCostUSD: usd(1)}
			r.Artifacts = append(r.Artifacts, pr("https://github.com/o/r/pull/1", "unknown"))
		},
		func(r *factory.Run) {
			r.Usage.InferenceCostUSD = usd(3)
			r.Artifacts = append(r.Artifacts, pr("https://gitlab.com/g/sub/p/-/merge_requests/7", "open"))
		},
		func(r *factory.Run) {
			r.MoveTo(factory.StateInProgress)
			r.MoveTo(factory.StateSucceeded)
			r.Artifacts[0].Data.Status = "merged"
		},
		func(r *factory.Run) { r.Artifacts[0].Data.Status = "closed"; r.Artifacts[0].Data.Status = "merged" },
	}
	for i, step := range steps {
		if _, err := s.UpdateRun(r.ID, true, func(r *factory.Run, _ *Batch) error { step(r); return nil }); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if i == 1 { // fold between writes as well as at the end
			if err := s.FoldMetrics(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 2 {
		checkFolded(t, s, created)
		if err := s.FoldMetrics(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkFolded: what TestMetricsFold's run counts for.
func checkFolded(t *testing.T, s *Store, created time.Time) {
	t.Helper()
	d := dayOf(t, s, "fa_1", created)
	today := dayOf(t, s, "fa_1", time.Now().UTC())
	if d.Runs != 1 || d.Roots != 1 || len(d.Groups["status"]) != 1 || d.Groups["status"]["SUCCEEDED"] != 1 || d.Costed != 1 || d.Cost.Inference != 3 {
		t.Fatalf("the run's day: %+v", d)
	}
	if today.PRs != 2 || today.Merged != 1 || today.Latency["kickoff_to_merge"].Count != 1 || today.PRCosted != 2 || today.PRCost.Inference != 3 {
		t.Fatalf("the pull requests' day: %+v", today)
	}
	checkFoldedPRs(t, s, created)
}

// checkFoldedPRs: TestMetricsFold's pull requests, their state and what
// each cost.
func checkFoldedPRs(t *testing.T, s *Store, created time.Time) {
	t.Helper()
	prs, _, _, err := s.PullRequests("fa_1", "", 10, nil)
	if err != nil || len(prs) != 2 {
		t.Fatalf("pull requests: %v %v", prs, err)
	}
	byRepo := map[string]*PullRequestRecord{}
	for _, p := range prs {
		byRepo[p.Repo] = p
	}
	gh, gl := byRepo["o/r"], byRepo["g/sub/p"]
	if gh == nil || gl == nil || gh.State != "merged" || gh.MergedAt == nil || gl.State != "open" || gl.Number != 7 || gl.Provider != factory.ProviderGitLab {
		t.Fatalf("pull requests: %+v %+v", gh, gl)
	}
	if math.Abs(gh.Cost.Inference-1.5) > 1e-9 || math.Abs(gl.Cost.Inference-1.5) > 1e-9 {
		t.Fatalf("the tree's $3 split: %v and %v", gh.Cost, gl.Cost)
	}
	top, err := s.CostliestPullRequests("fa_1", created, time.Now().UTC(), 1)
	if err != nil || len(top) != 1 {
		t.Fatalf("costliest: %v %v", top, err)
	}
}

// TestMetricsBackfill: the runs of a store written before the journal
// existed are journaled once, at its next open; a new store is not
// backfilled (its runs are journaled as they are written). A query folds
// one batch of a backlog (the rest lags until the fold loop's turn).
func TestMetricsBackfill(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	const n = maxFold + 7
	b := s.NewBatch()
	for i := range n {
		b.PutRun(&factory.Run{ID: fmt.Sprintf("run_%d", i), FactoryUID: "fa_1", State: factory.StateSucceeded, CreatedAt: now, UpdatedAt: now}, nil)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if d := dayOf(t, s, "fa_1", now); d.Runs != maxFold {
		t.Fatalf("runs counted by a query's fold: %d", d.Runs)
	}
	if err := s.FoldMetrics(); err != nil {
		t.Fatal(err)
	}
	if d := dayOf(t, s, "fa_1", now); d.Runs != n {
		t.Fatalf("runs counted: %d", d.Runs)
	}
	// Make it a store of an older binary: no journal, no rollups, no mark.
	b = s.NewBatch()
	for _, p := range []string{metricsJournalPrefix, metricsDayPrefix, metricsTreePrefix, metricsPRPrefix, metricsPRIDPrefix, metricsPRCostPrefix} {
		if err := s.scan(p, func(key string, _ []byte) error { b.delete(key); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	b.delete(metaPrefix + metricsMeta)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second open backfills nothing
		s.Close()
		if s, err = Open(dir); err != nil {
			t.Fatal(err)
		}
		if err := s.FoldMetrics(); err != nil {
			t.Fatal(err)
		}
		if d := dayOf(t, s, "fa_1", now); d.Runs != n {
			t.Fatalf("runs counted after the backfill: %d", d.Runs)
		}
	}
	s.Close()
}
