package server

import (
	"fmt"
	"time"

	"factory/internal/measure"
	"factory/internal/store"
)

// overviewMetrics are a factory's figures of the last 30 days on the
// dashboard's overview: what GET /v1/factory/{uid}/metrics and
// .../costs/per-pr answer for the same range (docs/measure.md), with a
// chart of the runs created each day.
type overviewMetrics struct {
	Runs, PRs, Merged int
	// MedianToMerge is the median kickoff-to-merge time of the pull
	// requests merged in the range; "" when none merged.
	MedianToMerge string
	// Spend is what the runs cost, "" when none reported a cost.
	Spend string
	Bars  []chartBar
}

// chartBar is one day's bar: its place and height in a 30×40 chart.
type chartBar struct {
	X, Y, H int
	Day     string
	N       int
}

// chartHeight is the chart's height in its own units.
const chartHeight = 40

// factoryMetrics reads a factory's last 30 days from the rollups.
func (s *Server) factoryMetrics(uid string, now time.Time) (*overviewMetrics, error) {
	rg, err := measure.ParseRange("", "", "day", now)
	if err != nil {
		return nil, err
	}
	ro, err := measure.ReadRollups(s.store, uid, rg)
	if err != nil {
		return nil, err
	}
	runs, series := ro.Series(func(d *store.DayRollup) float64 { return float64(d.Runs) })
	prs, _ := ro.Series(func(d *store.DayRollup) float64 { return float64(d.PRs) })
	merged, _ := ro.Series(func(d *store.DayRollup) float64 { return float64(d.Merged) })
	costed, _ := ro.Series(func(d *store.DayRollup) float64 { return float64(d.Costed) })
	spend, _ := ro.DollarSeries(func(d *store.DayRollup) store.Dollars { return d.Cost })
	m := &overviewMetrics{Runs: int(runs), PRs: int(prs), Merged: int(merged)}
	if med, n := ro.Median("kickoff_to_merge"); n > 0 && med != nil {
		m.MedianToMerge = (time.Duration(*med) * time.Second).Round(time.Minute).String()
	}
	if costed > 0 {
		m.Spend = fmt.Sprintf("$%.2f", spend.Total())
	}
	peak := 1.0
	for _, v := range series {
		peak = max(peak, v)
	}
	for i, v := range series {
		h := int(v / peak * chartHeight)
		m.Bars = append(m.Bars, chartBar{X: i * 8, Y: chartHeight - h, H: h, Day: ro.Labels[i], N: int(v)})
	}
	return m, nil
}
