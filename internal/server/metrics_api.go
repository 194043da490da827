package server

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"factory"
	"factory/internal/measure"
	"factory/internal/store"
)

// The metrics API (docs/measure-and-improve.md, the 7 endpoints of the
// product's metrics-api page): figures of a factory over a range of UTC
// days, from the store's day rollups.

func (s *Server) metricsRoutes(mux *routes) {
	read := func(h handler) http.Handler { return s.auth(h, factory.ScopeRuns, factory.ScopeRead) }
	mux.Handle("GET /v1/factory/{uid}/metrics", read(s.productivity))
	mux.Handle("GET /v1/factory/{uid}/metrics/run-breakdown", read(s.runBreakdown))
	mux.Handle("GET /v1/factory/{uid}/costs/breakdown", read(s.costBreakdown))
	mux.Handle("GET /v1/factory/{uid}/costs/per-pr", read(s.costPerPR))
	mux.Handle("GET /v1/factory/{uid}/costs/per-pr/by-size", read(s.costPerPRBySize))
	mux.Handle("GET /v1/factory/{uid}/costs/per-pr/top", read(s.topPRs))
	mux.Handle("GET /v1/factory/{uid}/pull-requests", read(s.pullRequests))
}

// foldMetrics folds the metrics journal every few seconds, so that a
// query seldom finds much pending.
func (s *Server) foldMetrics(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		if err := s.store.FoldMetrics(); err != nil {
			s.log.Error("folding the metrics", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// metricsQuery reads a metrics call's factory and range, and starts its
// answer with what every answer carries.
func (s *Server) metricsQuery(r *http.Request) (*factory.Factory, *measure.Rollups, map[string]any, error) {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return nil, nil, nil, err
	}
	v := r.URL.Query()
	rg, err := measure.ParseRange(v.Get("start_date"), v.Get("end_date"), v.Get("group_by_period"), time.Now().UTC())
	if err != nil {
		return nil, nil, nil, err
	}
	ro, err := measure.ReadRollups(s.store, f.UID, rg)
	if err != nil {
		return nil, nil, nil, err
	}
	team, err := s.teamUID()
	if err != nil {
		return nil, nil, nil, err
	}
	out := map[string]any{"as_of": time.Now().UTC(), "team_uid": team, "factory_uid": f.UID, "start_date": rg.Start, "end_date": rg.End}
	if ro.Labels != nil {
		out["period_list"] = ro.Labels
	}
	return f, ro, out, nil
}

// figure is a metric, with its series when the answer is bucketed.
func figure(out map[string]any, ro *measure.Rollups, name string, of func(*store.DayRollup) float64) float64 {
	total, series := ro.Series(of)
	out[name] = int(total)
	if series != nil {
		out[name+"_series"] = intSeries(series)
	}
	return total
}

func intSeries(s []float64) []int {
	out := make([]int, len(s))
	for i, v := range s {
		out[i] = int(v)
	}
	return out
}

// productivity is GET /v1/factory/{uid}/metrics.
func (s *Server) productivity(w http.ResponseWriter, r *http.Request) error {
	f, ro, out, err := s.metricsQuery(r)
	if err != nil {
		return err
	}
	figure(out, ro, "run_count", func(d *store.DayRollup) float64 { return float64(d.Runs) })
	figure(out, ro, "pr_count", func(d *store.DayRollup) float64 { return float64(d.PRs) })
	figure(out, ro, "merged_pr_count", func(d *store.DayRollup) float64 { return float64(d.MergedCohort) })
	merged, _ := ro.Series(func(d *store.DayRollup) float64 { return float64(d.Merged) })
	repos := []string{}
	for _, rp := range f.Settings.Repositories {
		repos = append(repos, rp.Owner+"/"+rp.Name)
	}
	out["average_human_interactions_per_pr"] = nil
	out["autonomy_funnel"] = map[string]any{"total_merged": int(merged), "factory_merged": int(merged), "factory_merged_observed": 0,
		"merged_without_human_code_change": 0, "repos": repos}
	out["impact"] = map[string]any{"additions": 0, "deletions": 0, "merged_pr_count": int(merged), "measured_pr_count": 0}
	stage := func(name string) map[string]any {
		m, n := ro.Median(name)
		return map[string]any{"median_seconds": m, "measured_pr_count": n}
	}
	unmeasured := map[string]any{"median_seconds": nil, "measured_pr_count": 0}
	out["pr_latency"] = map[string]any{"merged_pr_count": int(merged), "kickoff_to_pr": stage("kickoff_to_pr"),
		"pr_to_first_review": unmeasured, "first_review_to_merge": unmeasured, "kickoff_to_merge": stage("kickoff_to_merge")}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// runBreakdown is GET /v1/factory/{uid}/metrics/run-breakdown?group_by=.
func (s *Server) runBreakdown(w http.ResponseWriter, r *http.Request) error {
	dim := r.URL.Query().Get("group_by")
	if !slices.Contains([]string{"agent_type", "status", "source", "root_vs_subrun", "model", "harness"}, dim) {
		return errorf(CodeInvalidRequest, "group_by: required, one of agent_type, status, source, root_vs_subrun, model, harness")
	}
	_, ro, out, err := s.metricsQuery(r)
	if err != nil {
		return err
	}
	figure(out, ro, "root_run_count", func(d *store.DayRollup) float64 { return float64(d.Roots) })
	counted := func(d *store.DayRollup) float64 { return float64(d.Runs) }
	if dim == "source" { // top-level runs only
		counted = func(d *store.DayRollup) float64 { return float64(d.Roots) }
	}
	figure(out, ro, "total", counted)
	groups := []map[string]any{}
	for _, g := range ro.Groups(dim) {
		o := map[string]any{"key": g.Key, "label": groupLabel(dim, g.Key), "total": int(g.Total)}
		if g.Series != nil {
			o["series"] = intSeries(g.Series)
		}
		groups = append(groups, o)
	}
	out["group_by"], out["groups"] = dim, groups
	writeJSON(w, http.StatusOK, out)
	return nil
}

// groupLabel is a group key's display name, where the key is not one.
func groupLabel(dim, key string) string {
	switch dim {
	case "root_vs_subrun":
		return map[string]string{"ROOT": "Top-level runs", "SUBRUN": "Subruns"}[key]
	case "status":
		return map[string]string{"SUCCEEDED": "Succeeded", "FAILED": "Failed", "ERROR": "Error", "CANCELLED": "Cancelled",
			"INPROGRESS": "In progress", "QUEUED": "Queued", "BLOCKED": "Blocked", "CLAIMED": "Claimed", "PENDING": "Pending"}[key]
	}
	return key
}

// costBreakdown is GET /v1/factory/{uid}/costs/breakdown?group_by=.
func (s *Server) costBreakdown(w http.ResponseWriter, r *http.Request) error {
	dim := r.URL.Query().Get("group_by")
	if !slices.Contains([]string{"source", "user", "agent", "model"}, dim) {
		return errorf(CodeInvalidRequest, "group_by: required, one of source, user, agent, model")
	}
	_, ro, out, err := s.metricsQuery(r)
	if err != nil {
		return err
	}
	costed, _ := ro.Series(func(d *store.DayRollup) float64 { return float64(d.Costed) })
	total, series := ro.DollarSeries(func(d *store.DayRollup) store.Dollars { return d.Cost })
	out["total"] = measure.DollarsObject(total, costed > 0)
	if series != nil {
		out["total_series"] = dollarSeries(series, costed > 0)
	}
	groups := []map[string]any{}
	for _, g := range costGroups(ro, dim) {
		o := map[string]any{"key": g.key, "label": g.label, "deleted": false, "photo_url": nil, "dollars": measure.DollarsObject(g.total, true)}
		if g.series != nil {
			o["series"] = dollarSeries(g.series, true)
		}
		groups = append(groups, o)
	}
	out["group_by"], out["groups"] = dim, groups
	writeJSON(w, http.StatusOK, out)
	return nil
}

// costGroup is a group's spend, in all and by bucket.
type costGroup struct {
	key, label string
	total      store.Dollars
	series     []store.Dollars
}

// costGroups sums the spend of a dimension by key over the range's days,
// costliest first; keys without spend are left out.
func costGroups(ro *measure.Rollups, dim string) []*costGroup {
	byKey := map[string]*costGroup{}
	labels := map[string]string{}
	for _, d := range ro.Days {
		for k, v := range d.R.CostGroups[dim] {
			g := byKey[k]
			if g == nil {
				g = &costGroup{key: k, label: k}
				if ro.Labels != nil {
					g.series = make([]store.Dollars, len(ro.Labels))
				}
				byKey[k] = g
			}
			g.total = addDollars(g.total, v)
			if g.series != nil {
				g.series[d.Bucket] = addDollars(g.series[d.Bucket], v)
			}
		}
		maps.Copy(labels, d.R.Labels)
	}
	out := make([]*costGroup, 0, len(byKey))
	for k, g := range byKey {
		if g.total.Total() != 0 {
			if labels[k] != "" {
				g.label = labels[k]
			}
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b *costGroup) int {
		if c := compareFloat(b.total.Total(), a.total.Total()); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	return out
}

func addDollars(a, b store.Dollars) store.Dollars {
	return store.Dollars{Inference: a.Inference + b.Inference, Compute: a.Compute + b.Compute, Platform: a.Platform + b.Platform}
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func dollarSeries(series []store.Dollars, known bool) []any {
	out := make([]any, len(series))
	for i, d := range series {
		out[i] = measure.DollarsObject(d, known)
	}
	return out
}

// costPerPR is GET /v1/factory/{uid}/costs/per-pr: the pull requests first
// seen in the range, what they cost, and the mean.
func (s *Server) costPerPR(w http.ResponseWriter, r *http.Request) error {
	_, ro, out, err := s.metricsQuery(r)
	if err != nil {
		return err
	}
	prs := figure(out, ro, "pr_count", func(d *store.DayRollup) float64 { return float64(d.PRs) })
	costed, _ := ro.Series(func(d *store.DayRollup) float64 { return float64(d.PRCosted) })
	total, series := ro.DollarSeries(func(d *store.DayRollup) store.Dollars { return d.PRCost })
	out["dollars"] = measure.DollarsObject(total, costed > 0)
	out["mean"] = nil
	if costed > 0 && prs > 0 {
		out["mean"] = total.Total() / prs
	}
	if series != nil {
		counts, _ := seriesOf(ro, func(d *store.DayRollup) float64 { return float64(d.PRs) })
		per := make([]map[string]any, len(series))
		for i, d := range series {
			p := map[string]any{"period": ro.Labels[i], "pr_count": int(counts[i]), "dollars": measure.DollarsObject(d, costed > 0),
				"mean": nil, "inference_mean": nil, "compute_mean": nil, "platform_mean": nil}
			if costed > 0 && counts[i] > 0 {
				n := counts[i]
				p["mean"], p["inference_mean"], p["compute_mean"], p["platform_mean"] = d.Total()/n, d.Inference/n, d.Compute/n, d.Platform/n
			}
			per[i] = p
		}
		out["series"] = per
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func seriesOf(ro *measure.Rollups, of func(*store.DayRollup) float64) ([]float64, float64) {
	total, series := ro.Series(of)
	return series, total
}

// costPerPRBySize is GET .../costs/per-pr/by-size. Sizes come from the
// code host's line counts, which this server does not collect yet: every
// pull request is unsized.
func (s *Server) costPerPRBySize(w http.ResponseWriter, r *http.Request) error {
	_, ro, out, err := s.metricsQuery(r)
	if err != nil {
		return err
	}
	figure(out, ro, "pr_count", func(d *store.DayRollup) float64 { return float64(d.PRs) })
	out["sized_pr_count"] = 0
	buckets := []map[string]any{}
	for _, size := range []string{"S", "M", "L", "XL"} {
		buckets = append(buckets, map[string]any{"size": size, "pr_count": 0, "mean": nil})
	}
	out["buckets"] = buckets
	writeJSON(w, http.StatusOK, out)
	return nil
}

// topPRs is GET .../costs/per-pr/top?limit= (default 20, at most 50).
func (s *Server) topPRs(w http.ResponseWriter, r *http.Request) error {
	limit := 20
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 50 {
			return errorf(CodeInvalidRequest, "limit: a whole number from 1 to 50")
		}
		limit = n
	}
	f, _, out, err := s.metricsQuery(r)
	if err != nil {
		return err
	}
	delete(out, "period_list")
	days := measure.Range{Start: out["start_date"].(time.Time), End: out["end_date"].(time.Time)}.Days()
	data := []map[string]any{}
	if len(days) > 0 {
		prs, err := s.store.CostliestPullRequests(f.UID, days[0], days[len(days)-1], limit)
		if err != nil {
			return err
		}
		team, _ := s.teamUID()
		for _, pr := range prs {
			o := prObject(pr, team)
			o["dollars"] = measure.DollarsObject(pr.Cost, pr.Costed)
			o["models"] = []any{}
			if pr.Model != "" && pr.Costed {
				o["models"] = []map[string]any{{"model_id": pr.Model, "share": 1.0}}
			}
			o["creator"] = map[string]any{"uid": pr.Creator, "display_name": pr.CreatorName}
			o["source"], o["requested_model_id"] = pr.Source, pr.Model
			data = append(data, o)
		}
	}
	out["data"] = data
	writeJSON(w, http.StatusOK, out)
	return nil
}
