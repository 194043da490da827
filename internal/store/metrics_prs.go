package store

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"factory"

	"github.com/cockroachdb/pebble"
)

// tree reads (or starts) a run's tree record: its root's source and
// creator, which the tree's spend is attributed to.
func (f *folder) tree(r *runFacts) (*treeRecord, error) {
	if t := f.trees[r.RootID]; t != nil {
		return t, nil
	}
	t := &treeRecord{}
	err := f.s.getJSON(metricsTreePrefix+r.RootID, t)
	switch {
	case err == nil:
	case !IsNotFound(err):
		return nil, err
	case r.Root:
		t = &treeRecord{Factory: r.Factory, Source: r.Source, Creator: r.Creator}
	default:
		t = &treeRecord{Factory: r.Factory, Source: "unknown", Creator: "unknown"}
		if root, err := f.s.Run(r.RootID); err == nil {
			t.Source = factory.SourceName(root.Source)
			if root.Creator != nil {
				t.Creator = root.Creator.UID
			}
		}
	}
	f.trees[r.RootID] = t
	return t, nil
}

// spend folds the change of a run's spend into its day (by source and
// user of its tree's root, by its agent and model), its tree, and the
// tree's pull requests (split evenly).
func (f *folder) spend(e *journalEntry) error {
	facts := e.Now
	if facts == nil {
		facts = e.Prev
	}
	var prev, now Dollars
	prevKnown, nowKnown := e.Prev != nil && e.Prev.Cost != nil, e.Now != nil && e.Now.Cost != nil
	if !prevKnown && !nowKnown {
		return nil
	}
	if prevKnown {
		prev = *e.Prev.Cost
	}
	if nowKnown {
		now = *e.Now.Cost
	}
	delta := now.plus(prev, -1)
	d, err := f.day(facts.Factory, facts.Day)
	if err != nil {
		return err
	}
	t, err := f.tree(facts)
	if err != nil {
		return err
	}
	d.Cost = d.Cost.plus(delta, 1)
	if nowKnown != prevKnown {
		d.Costed += map[bool]int{true: 1, false: -1}[nowKnown]
	}
	d.costGroup("source", orUnknown(t.Source), delta)
	d.costGroup("user", orUnknown(t.Creator), delta)
	d.costGroup("agent", orUnknown(facts.Agent), delta)
	d.costGroup("model", orUnknown(facts.Model), delta)
	if facts.CreatorNm != "" && facts.Root {
		d.label(facts.Creator, facts.CreatorNm)
	}
	t.Cost, t.Costed = t.Cost.plus(delta, 1), true
	for _, id := range t.PRs {
		if err := f.addPRCost(t.Factory, id, delta.scaled(1/float64(len(t.PRs))), true); err != nil {
			return err
		}
	}
	return nil
}

func (d *DayRollup) costGroup(dim, key string, delta Dollars) {
	if d.CostGroups == nil {
		d.CostGroups = map[string]map[string]Dollars{}
	}
	if d.CostGroups[dim] == nil {
		d.CostGroups[dim] = map[string]Dollars{}
	}
	d.CostGroups[dim][key] = d.CostGroups[dim][key].plus(delta, 1)
}

func (d *DayRollup) label(key, name string) {
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	d.Labels[key] = name
}

// loadPR reads a factory's pull request record; nil when it has none.
func (f *folder) loadPR(factoryUID, id string) (*PullRequestRecord, error) {
	key := factoryUID + "/" + id
	if pr := f.prs[key]; pr != nil {
		return pr, nil
	}
	first, err := f.s.get(metricsPRIDPrefix + key)
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	pr := &PullRequestRecord{}
	if err := f.s.getJSON(metricsPRPrefix+factoryUID+"/"+string(first)+"/"+id, pr); err != nil {
		return nil, err
	}
	f.prs[key], f.prKeys[key] = pr, [2]string{string(first), prCostKey(pr)}
	return pr, nil
}

// addPRCost adds a share of spend to a pull request and to its first
// day's pull request spend.
func (f *folder) addPRCost(factoryUID, id string, share Dollars, known bool) error {
	pr, err := f.loadPR(factoryUID, id)
	if err != nil || pr == nil {
		return err
	}
	d, err := f.day(factoryUID, day(pr.FirstSeen))
	if err != nil {
		return err
	}
	if known && !pr.Costed {
		pr.Costed = true
		d.PRCosted++
	}
	pr.Cost, d.PRCost = pr.Cost.plus(share, 1), d.PRCost.plus(share, 1)
	return nil
}

// pullRequest folds a pull request a run reports: new to the factory, it
// is counted on the day it was first seen and joins its run's tree (whose
// spend is split again); a change of its status is recorded, and a merge
// counted with its cycle time.
func (f *folder) pullRequest(e *journalEntry, link string, now prFact, was *prFact) error {
	r := e.Now
	pr, err := f.loadPR(r.Factory, prID(link))
	if err != nil {
		return err
	}
	at := time.Unix(0, e.At).UTC()
	if pr == nil {
		if pr, err = f.newPR(r, link, now, at); err != nil {
			return err
		}
	}
	if !containsRun(pr.Runs, e.RunID) {
		created := time.Unix(0, r.Created).UTC()
		pr.Runs = append(pr.Runs, PRRun{RunID: e.RunID, RootRunID: r.RootID, CreatedAt: created})
		if created.Before(pr.KickoffAt) {
			pr.KickoffAt = created
		}
	}
	// "unknown" is a pull request the code host said nothing of yet: it
	// stays as it was (open when new).
	if now.Status == "" || now.Status == "unknown" || now.Status == pr.State || was != nil && was.Status == now.Status {
		return nil
	}
	pr.State, pr.UpdatedAt = now.Status, at
	switch {
	case now.Status == "merged" && pr.MergedAt == nil:
		pr.MergedAt = &at
		first, err := f.day(r.Factory, day(pr.FirstSeen))
		if err != nil {
			return err
		}
		first.MergedCohort++
		md, err := f.day(r.Factory, day(at))
		if err != nil {
			return err
		}
		md.Merged++
		md.latency("kickoff_to_merge", at.Sub(pr.KickoffAt))
		md.latency("kickoff_to_pr", pr.FirstSeen.Sub(pr.KickoffAt))
	case now.Status == "closed" && pr.ClosedAt == nil:
		pr.ClosedAt = &at
	}
	return nil
}

func containsRun(runs []PRRun, id string) bool {
	for _, r := range runs {
		if r.RunID == id {
			return true
		}
	}
	return false
}

func (d *DayRollup) latency(stage string, dur time.Duration) {
	if d.Latency == nil {
		d.Latency = map[string]*Histogram{}
	}
	if d.Latency[stage] == nil {
		d.Latency[stage] = &Histogram{}
	}
	d.Latency[stage].add(max(dur.Seconds(), 0), 1)
}

// newPR records a pull request first seen now, on its day, in its run's
// tree: the tree's spend is split over one more.
func (f *folder) newPR(r *runFacts, link string, fact prFact, at time.Time) (*PullRequestRecord, error) {
	created := time.Unix(0, r.Created).UTC()
	pr := &PullRequestRecord{ID: prID(link), Factory: r.Factory, URL: link, Branch: fact.Branch, Title: fact.Title, State: "open",
		FirstSeen: at, UpdatedAt: at, KickoffAt: created, Creator: r.Creator, CreatorName: r.CreatorNm, Source: r.Source, Model: r.Model}
	pr.Provider, pr.Repo, pr.Number = parsePRURL(link)
	f.prs[r.Factory+"/"+pr.ID] = pr
	d, err := f.day(r.Factory, day(at))
	if err != nil {
		return nil, err
	}
	d.PRs++
	t, err := f.tree(r)
	if err != nil {
		return nil, err
	}
	k := float64(len(t.PRs))
	if t.Costed && k > 0 {
		for _, id := range t.PRs { // each gives up a share to the newcomer
			if err := f.addPRCost(r.Factory, id, t.Cost.scaled(-1/(k*(k+1))), true); err != nil {
				return nil, err
			}
		}
	}
	t.PRs = append(t.PRs, pr.ID)
	if t.Costed {
		if err := f.addPRCost(r.Factory, pr.ID, t.Cost.scaled(1/(k+1)), true); err != nil {
			return nil, err
		}
	}
	return pr, nil
}

// parsePRURL reads a pull (merge) request's code host, repository and
// number from its URL: .../owner/repo/pull/N (GitHub) or
// .../group/project/-/merge_requests/N (GitLab).
func parsePRURL(link string) (provider, repo string, number int) {
	u, err := url.Parse(link)
	if err != nil {
		return "", "", 0
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	for i := len(parts) - 2; i >= 0; i-- {
		n, err := strconv.Atoi(parts[i+1])
		switch {
		case err != nil:
		case parts[i] == "pull" && i >= 2:
			return factory.ProviderGitHub, strings.Join(parts[i-2:i], "/"), n
		case parts[i] == "merge_requests" && i >= 2 && parts[i-1] == "-":
			return factory.ProviderGitLab, strings.Join(parts[:i-1], "/"), n
		}
	}
	return "", "", 0
}

// PullRequests lists a factory's pull request records in the order they
// were first seen, newest first, from before a position ("" from the
// newest), at most limit of those keep accepts.
func (s *Store) PullRequests(factoryUID, before string, limit int, keep func(*PullRequestRecord) bool) ([]*PullRequestRecord, string, bool, error) {
	if err := s.foldForQuery(); err != nil {
		return nil, "", false, err
	}
	prefix := metricsPRPrefix + factoryUID + "/"
	upper := prefixEnd(prefix)
	if before != "" {
		upper = []byte(prefix + before)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: upper})
	if err != nil {
		return nil, "", false, err
	}
	defer it.Close()
	var out []*PullRequestRecord
	last := ""
	for ok := it.Last(); ok; ok = it.Prev() {
		pr := &PullRequestRecord{}
		if err := json.Unmarshal(it.Value(), pr); err != nil {
			return nil, "", false, err
		}
		if keep != nil && !keep(pr) {
			continue
		}
		if len(out) == limit {
			return out, last, true, nil
		}
		out, last = append(out, pr), string(it.Key())[len(prefix):]
	}
	return out, last, false, it.Error()
}

// CostliestPullRequests are a factory's pull requests first seen from one
// day to another (inclusive), most expensive first, at most limit: the
// first limit of each day's cost index, merged.
func (s *Store) CostliestPullRequests(factoryUID string, from, to time.Time, limit int) ([]*PullRequestRecord, error) {
	if err := s.foldForQuery(); err != nil {
		return nil, err
	}
	type entry struct{ key, id string }
	var cands []entry
	for d := from.UTC().Truncate(24 * time.Hour); !d.After(to); d = d.Add(24 * time.Hour) {
		prefix := metricsPRCostPrefix + factoryUID + "/" + day(d) + "/"
		n := 0
		err := s.scan(prefix, func(key string, _ []byte) error {
			rest := key[len(prefix):]
			cands = append(cands, entry{rest, rest[strings.IndexByte(rest, '/')+1:]})
			if n++; n == limit {
				return errFoldDone
			}
			return nil
		})
		if err != nil && err != errFoldDone {
			return nil, err
		}
	}
	slices.SortFunc(cands, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	var out []*PullRequestRecord
	for _, c := range cands[:min(limit, len(cands))] {
		first, err := s.get(metricsPRIDPrefix + factoryUID + "/" + c.id)
		if err != nil {
			return nil, err
		}
		pr := &PullRequestRecord{}
		if err := s.getJSON(metricsPRPrefix+factoryUID+"/"+string(first)+"/"+c.id, pr); err != nil {
			return nil, err
		}
		out = append(out, pr)
	}
	return out, nil
}
