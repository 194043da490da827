package measure

import (
	"slices"
	"time"

	"factory"
	"factory/internal/store"
)

// The metrics API (docs/measure-and-improve.md): each answer is computed
// from the store's day rollups of the factory (one record per UTC day of
// the range), so its cost grows with the range, not with the runs.

// MaxBuckets bounds a bucketed answer (the docs: at most 365 buckets).
const MaxBuckets = 365

// Range is a metrics query's range and buckets: whole UTC days from the
// one holding Start to the one before End (the day holding End too when
// End is not midnight), bucketed by Period (day, week from Sunday, month;
// "" for none).
type Range struct {
	Start, End time.Time
	Period     string
}

// Days are the range's days, first to last.
func (r Range) Days() []time.Time {
	var out []time.Time
	first := r.Start.UTC().Truncate(24 * time.Hour)
	for d := first; d.Before(r.End); d = d.Add(24 * time.Hour) {
		out = append(out, d)
	}
	return out
}

// Buckets are the range's period labels and each day's bucket; one
// bucket when it has no period.
func (r Range) Buckets() ([]string, func(time.Time) int, error) {
	if r.Period == "" {
		return nil, func(time.Time) int { return 0 }, nil
	}
	key := map[string]func(time.Time) time.Time{
		"day":   func(d time.Time) time.Time { return d },
		"week":  func(d time.Time) time.Time { return d.AddDate(0, 0, -int(d.Weekday())) },
		"month": func(d time.Time) time.Time { return time.Date(d.Year(), d.Month(), 1, 0, 0, 0, 0, time.UTC) },
	}[r.Period]
	if key == nil {
		return nil, nil, factory.Errorf(factory.EINVALID, "group_by_period: day, week or month")
	}
	var labels []string
	index := map[string]int{}
	for _, d := range r.Days() {
		l := key(d).Format(time.DateOnly)
		if _, ok := index[l]; !ok {
			index[l] = len(labels)
			labels = append(labels, l)
		}
	}
	if len(labels) > MaxBuckets {
		return nil, nil, factory.Errorf(factory.EINVALID, "the range has %d %ss: at most %d buckets", len(labels), r.Period, MaxBuckets)
	}
	return labels, func(d time.Time) int { return index[key(d).Format(time.DateOnly)] }, nil
}

// Rollups reads the range's day records, each with its bucket.
type Rollups struct {
	Labels []string
	Days   []DayOf
}

// DayOf is one day's record and its bucket.
type DayOf struct {
	Day    time.Time
	Bucket int
	R      *store.DayRollup
}

// ReadRollups reads a factory's records of a range.
func ReadRollups(st *store.Store, factoryUID string, r Range) (*Rollups, error) {
	labels, bucket, err := r.Buckets()
	if err != nil {
		return nil, err
	}
	days := r.Days()
	if len(days) == 0 {
		return &Rollups{Labels: labels}, nil
	}
	recs, err := st.DayRollups(factoryUID, days[0], days[len(days)-1])
	if err != nil {
		return nil, err
	}
	out := &Rollups{Labels: labels}
	for _, d := range days {
		if rec := recs[d.Format(time.DateOnly)]; rec != nil {
			out.Days = append(out.Days, DayOf{Day: d, Bucket: bucket(d), R: rec})
		}
	}
	return out, nil
}

// Series sums a figure of each day into the range's buckets (nil without
// buckets) and in all.
func (ro *Rollups) Series(of func(*store.DayRollup) float64) (total float64, series []float64) {
	if ro.Labels != nil {
		series = make([]float64, len(ro.Labels))
	}
	for _, d := range ro.Days {
		v := of(d.R)
		total += v
		if series != nil {
			series[d.Bucket] += v
		}
	}
	return total, series
}

// DollarSeries sums spend of each day, in all and into buckets.
func (ro *Rollups) DollarSeries(of func(*store.DayRollup) store.Dollars) (total store.Dollars, series []store.Dollars) {
	if ro.Labels != nil {
		series = make([]store.Dollars, len(ro.Labels))
	}
	for _, d := range ro.Days {
		v := of(d.R)
		total = addDollars(total, v)
		if series != nil {
			series[d.Bucket] = addDollars(series[d.Bucket], v)
		}
	}
	return total, series
}

func addDollars(a, b store.Dollars) store.Dollars {
	return store.Dollars{Inference: a.Inference + b.Inference, Compute: a.Compute + b.Compute, Platform: a.Platform + b.Platform}
}

// DollarsObject is spend as the API shows it: inference, compute,
// platform and total; null when no run of it has a known cost.
func DollarsObject(d store.Dollars, known bool) any {
	if !known {
		return nil
	}
	return map[string]float64{"inference": d.Inference, "compute": d.Compute, "platform": d.Platform, "total": d.Total()}
}

// Groups sums the runs of a dimension by key, in all and into buckets,
// keys in order of their totals (largest first).
func (ro *Rollups) Groups(dim string) []Group {
	byKey := map[string]*Group{}
	for _, d := range ro.Days {
		for k, n := range d.R.Groups[dim] {
			g := byKey[k]
			if g == nil {
				g = &Group{Key: k}
				if ro.Labels != nil {
					g.Series = make([]float64, len(ro.Labels))
				}
				byKey[k] = g
			}
			g.Total += float64(n)
			if g.Series != nil {
				g.Series[d.Bucket] += float64(n)
			}
		}
	}
	out := make([]Group, 0, len(byKey))
	for _, g := range byKey {
		if g.Total > 0 { // an agent whose type changed may leave a negative count behind
			out = append(out, *g)
		}
	}
	slices.SortFunc(out, func(a, b Group) int {
		if a.Total != b.Total {
			if a.Total > b.Total {
				return -1
			}
			return 1
		}
		return cmpString(a.Key, b.Key)
	})
	return out
}

// Group is a key's total (and series).
type Group struct {
	Key    string
	Total  float64
	Series []float64
}

// Median merges a latency stage's histograms of the range: the median in
// seconds and how many pull requests measured it.
func (ro *Rollups) Median(stage string) (median *float64, n int) {
	h := &store.Histogram{}
	for _, d := range ro.Days {
		if x := d.R.Latency[stage]; x != nil {
			h.Merge(x)
		}
	}
	return h.Median(), h.Count
}

// ParseRange reads start_date, end_date and group_by_period: end
// defaults to now, start to 30 days before end. A date is an RFC 3339
// time or a day (2026-09-01, its midnight UTC).
func ParseRange(start, end, period string, now time.Time) (Range, error) {
	r := Range{End: now, Period: period}
	var err error
	if end != "" {
		if r.End, err = parseTime(end); err != nil {
			return r, factory.Errorf(factory.EINVALID, "end_date: an RFC 3339 time (2026-10-01T00:00:00Z) or a day (2026-10-01)")
		}
	}
	r.Start = r.End.AddDate(0, 0, -30)
	if start != "" {
		if r.Start, err = parseTime(start); err != nil {
			return r, factory.Errorf(factory.EINVALID, "start_date: an RFC 3339 time (2026-09-01T00:00:00Z) or a day (2026-09-01)")
		}
	}
	if !r.Start.Before(r.End) {
		return r, factory.Errorf(factory.EINVALID, "start_date must be before end_date")
	}
	if days := r.End.Sub(r.Start) / (24 * time.Hour); days > 100*366 {
		return r, factory.Errorf(factory.EINVALID, "the range is %d days: at most a century", days)
	}
	return r, nil
}

func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	return t.UTC(), err
}

// SizeBucket is a pull request's size bucket by lines added plus removed.
func SizeBucket(lines int) string {
	switch {
	case lines < 100:
		return "S"
	case lines < 500:
		return "M"
	case lines < 1000:
		return "L"
	}
	return "XL"
}
