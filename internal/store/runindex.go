package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"factory"

	"github.com/cockroachdb/pebble"
)

// Run list indexes. Every run has an entry per sort key in the global
// index and in one index per filterable field, so that any list query walks
// an index in order and never scans all runs:
//
//	ri/<sort>/<sort key>/<run id>                  (sort: c created_at, u updated_at)
//	ri/<field>=<value>/<sort>/<sort key>/<run id>
const runIndexPrefix = "ri/"

// RunListWindow is how long a listing sorted by updated_at can go on: the
// superseded entries its walk may need are kept that long.
const RunListWindow = time.Hour

// runSupersededPrefix orders superseded updated_at entries by the time they
// were superseded, for the sweeper: rsup/<nanos>/<index key>.
const runSupersededPrefix = "rsup/"

// isUpdatedKey reports whether an index key orders by updated_at.
func isUpdatedKey(k string) bool {
	return strings.HasPrefix(k, runIndexPrefix+"u/") || strings.Contains(k, "/u/")
}

// RunFilterFields are the fields runs can be listed by, most selective
// first: a query with several walks the index of the first.
var RunFilterFields = []string{"automation_id", "factory_uid", "creator", "name", "model_id", "environment_id", "source", "state"}

func runFieldValues(r *factory.Run) map[string]string {
	var cfg struct {
		Name  string `json:"name"`
		Model string `json:"model_id"`
	}
	if len(r.Config) > 0 {
		_ = json.Unmarshal(r.Config, &cfg)
	}
	creator := ""
	if r.Creator != nil {
		creator = r.Creator.UID
	}
	return map[string]string{"automation_id": r.AutomationID, "factory_uid": r.FactoryUID, "creator": creator,
		"name": cfg.Name, "model_id": cfg.Model, "environment_id": r.Environment, "source": r.Source, "state": string(r.State)}
}

func runIndexKeys(r *factory.Run) []string {
	c, u := nanos(r.CreatedAt), nanos(r.UpdatedAt)
	keys := []string{runIndexPrefix + "c/" + c + "/" + r.ID, runIndexPrefix + "u/" + u + "/" + r.ID}
	for f, v := range runFieldValues(r) {
		if v == "" {
			continue
		}
		v = escapeIndexValue(v)
		keys = append(keys, runIndexPrefix+f+"="+v+"/c/"+c+"/"+r.ID, runIndexPrefix+f+"="+v+"/u/"+u+"/"+r.ID)
	}
	return keys
}

// escapeIndexValue keeps a value from reaching into the next key part.
func escapeIndexValue(v string) string {
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(v)
}

// RunQuery is a list query. Equality filters are ANDed; several states are
// ORed. Times bound the sort key's range when they are on it.
type RunQuery struct {
	Equal map[string]string // field → value (not state)
	// Alternatives are more values that also match a field of Equal (the
	// older spellings of a value).
	Alternatives map[string][]string
	States       []factory.RunState
	SortBy       string // "created_at" or "updated_at"
	Asc          bool
	After        string // the position of the last run of the previous page, from RunPage
	Limit        int
	Matches      func(*factory.Run) bool // filters checked per run (times, ...)
	MinNanos     int64                   // bounds on the sort key, 0 for none
	MaxNanos     int64
	// AsOf (unix nanoseconds), on an updated_at listing, walks the index
	// as it was at that moment: the listing's first page sets it, and its
	// later pages keep it, so runs changing meanwhile neither repeat nor
	// go missing. 0 walks the index as it is.
	AsOf int64
}

// RunPage is a page of runs and the position to continue from.
type RunPage struct {
	Runs []*factory.Run
	More bool
	Last string // position of the last run, for the next page's After
}

// ListRuns walks the most selective index of the query in sort order:
// one iterator per index prefix (several for several states), merged by
// position.
func (s *Store) ListRuns(q RunQuery) (*RunPage, error) {
	field, sortKey, prefixes := q.indexPrefixes()
	its, err := s.openRunCursors(q, prefixes)
	defer func() {
		for _, c := range its {
			c.it.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	page := &RunPage{}
	for {
		best := nextRunCursor(its, q.Asc)
		if best == nil {
			return page, nil
		}
		pos := best.pos()
		superseded := string(best.it.Value())
		if q.Asc {
			best.ok = best.it.Next()
		} else {
			best.ok = best.it.Prev()
		}
		if !validAt(pos, superseded, sortKey, q.AsOf) {
			continue
		}
		id := pos[strings.IndexByte(pos, '/')+1:]
		r, err := s.Run(id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !runMatches(r, q, field, sortKey == "u" && q.AsOf > 0) {
			continue
		}
		if len(page.Runs) == q.Limit {
			page.More = true
			return page, nil
		}
		page.Runs = append(page.Runs, r)
		page.Last = pos
	}
}

// indexPrefixes picks the index a query walks: the most selective field it
// filters on (field), else one prefix per state it lists, else the global
// index; sortKey is c (created_at) or u (updated_at).
func (q *RunQuery) indexPrefixes() (field, sortKey string, prefixes []string) {
	sortKey = "u"
	if q.SortBy == "created_at" {
		sortKey = "c"
	}
	for _, f := range RunFilterFields {
		if v, ok := q.Equal[f]; ok && f != "state" {
			for _, alt := range append([]string{v}, q.Alternatives[f]...) {
				prefixes = append(prefixes, runIndexPrefix+f+"="+escapeIndexValue(alt)+"/"+sortKey+"/")
			}
			return f, sortKey, prefixes
		}
	}
	for _, st := range q.States {
		prefixes = append(prefixes, runIndexPrefix+"state="+escapeIndexValue(string(st))+"/"+sortKey+"/")
	}
	if len(prefixes) == 0 {
		prefixes = []string{runIndexPrefix + sortKey + "/"}
	}
	return "", sortKey, prefixes
}

// runCursor is an iterator over one index prefix, at its next entry while
// ok.
type runCursor struct {
	it     *pebble.Iterator
	prefix string
	ok     bool
}

// pos is the entry's position: "<nanos>/<run id>".
func (c *runCursor) pos() string { return string(c.it.Key())[len(c.prefix):] }

// openRunCursors opens an iterator per prefix, bounded by the query's time
// range and its After position, at its first entry in walk order. The
// caller closes them, also on error.
func (s *Store) openRunCursors(q RunQuery, prefixes []string) ([]*runCursor, error) {
	var its []*runCursor
	for _, p := range prefixes {
		lower, upper := []byte(p), prefixEnd(p)
		if q.MinNanos > 0 {
			lower = []byte(p + fmt.Sprintf("%020d", q.MinNanos))
		}
		if q.MaxNanos > 0 {
			upper = []byte(p + fmt.Sprintf("%020d", q.MaxNanos+1))
		}
		if q.After != "" {
			if q.Asc {
				if a := []byte(p + q.After + "\x00"); string(a) > string(lower) {
					lower = a
				}
			} else if a := []byte(p + q.After); string(a) < string(upper) {
				upper = a
			}
		}
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return its, err
		}
		c := &runCursor{it: it, prefix: p}
		if q.Asc {
			c.ok = it.First()
		} else {
			c.ok = it.Last()
		}
		its = append(its, c)
	}
	return its, nil
}

// nextRunCursor is the cursor whose entry comes next in walk order, or nil
// when every cursor is done.
func nextRunCursor(its []*runCursor, asc bool) *runCursor {
	var best *runCursor
	var bp string
	for _, c := range its {
		if !c.ok {
			continue
		}
		if pos := c.pos(); best == nil || asc && pos < bp || !asc && pos > bp {
			best, bp = c, pos
		}
	}
	return best
}

// validAt says whether an index entry belongs to the walk: the current
// entries when there is no as-of time; else the entries that were current
// at that time (updated before it, and not superseded until after it).
func validAt(pos, superseded, sortKey string, asOf int64) bool {
	if sortKey != "u" || asOf == 0 {
		return superseded == ""
	}
	// Zero-padded decimal: parse base 10 (Sscan would read a leading 0 as octal).
	updated, _ := strconv.ParseInt(pos[:strings.IndexByte(pos, '/')], 10, 64)
	if updated > asOf {
		return false
	}
	if superseded == "" {
		return true
	}
	at, _ := strconv.ParseInt(superseded, 10, 64)
	return at > asOf
}

// runMatches checks the query's filters on a run's current record. On an
// as-of walk, the field of the index walked was checked as of that time,
// and is not checked again on the run as it is now.
func runMatches(r *factory.Run, q RunQuery, walked string, asOf bool) bool {
	vals := runFieldValues(r)
	for f, v := range q.Equal {
		if asOf && f == walked {
			continue
		}
		if vals[f] != v && !slices.Contains(q.Alternatives[f], vals[f]) {
			return false
		}
	}
	if len(q.States) > 0 && !(asOf && walked == "") {
		found := false
		for _, st := range q.States {
			found = found || r.State == st
		}
		if !found {
			return false
		}
	}
	return q.Matches == nil || q.Matches(r)
}

// SweepSupersededRunIndex removes updated_at index entries superseded
// before a time; listings begun before it can no longer continue.
func (s *Store) SweepSupersededRunIndex(before time.Time) (int, error) {
	b := s.NewLogBatch()
	n := 0
	end := runSupersededPrefix + nanos(before)
	err := s.scan(runSupersededPrefix, func(key string, _ []byte) error {
		if key >= end {
			return errStop
		}
		at := key[len(runSupersededPrefix) : len(runSupersededPrefix)+20]
		indexKey := key[len(runSupersededPrefix)+21:]
		// Delete the entry only if it is still the superseded one: the run
		// may have come back to the same position since.
		if v, closer, err := s.db.Get([]byte(indexKey)); err == nil {
			if string(v) == at {
				b.delete(indexKey)
			}
			closer.Close()
		}
		b.delete(key)
		n++
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		b.Abort()
		return 0, err
	}
	if n == 0 {
		b.Abort()
		return 0, nil
	}
	return n, b.CommitNoSync()
}
