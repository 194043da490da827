package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble"
)

// Run list indexes. Every run has an entry per sort key in the global
// index and in one index per filterable field, so that any list query walks
// an index in order and never scans all runs:
//
//	ri/<sort>/<sort key>/<run id>                  (sort: c created_at, u updated_at)
//	ri/<field>=<value>/<sort>/<sort key>/<run id>
const runIndexPrefix = "ri/"

// RunFilterFields are the fields runs can be listed by, most selective
// first: a query with several walks the index of the first.
var RunFilterFields = []string{"automation_id", "factory_uid", "creator", "name", "model_id", "environment_id", "source", "state"}

func runFieldValues(r *Run) map[string]string {
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
		"name": cfg.Name, "model_id": cfg.Model, "environment_id": r.Environment, "source": r.Source, "state": r.State}
}

func runIndexKeys(r *Run) []string {
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
	Equal    map[string]string // field → value (not state)
	States   []string
	SortBy   string // "created_at" or "updated_at"
	Asc      bool
	After    string // the position of the last run of the previous page, from RunPage
	Limit    int
	Matches  func(*Run) bool // filters checked per run (times, ...)
	MinNanos int64           // bounds on the sort key, 0 for none
	MaxNanos int64
}

// RunPage is a page of runs and the position to continue from.
type RunPage struct {
	Runs []*Run
	More bool
	Last string // position of the last run, for the next page's After
}

// ListRuns walks the most selective index of the query in sort order.
func (s *Store) ListRuns(q RunQuery) (*RunPage, error) {
	sortKey := "u"
	if q.SortBy == "created_at" {
		sortKey = "c"
	}
	var prefixes []string
	field := ""
	for _, f := range RunFilterFields {
		if v, ok := q.Equal[f]; ok && f != "state" {
			field = f
			prefixes = []string{runIndexPrefix + f + "=" + escapeIndexValue(v) + "/" + sortKey + "/"}
			break
		}
	}
	if field == "" && len(q.States) > 0 {
		for _, st := range q.States {
			prefixes = append(prefixes, runIndexPrefix+"state="+escapeIndexValue(st)+"/"+sortKey+"/")
		}
	}
	if len(prefixes) == 0 {
		prefixes = []string{runIndexPrefix + sortKey + "/"}
	}
	// One iterator per prefix, merged by position ("<nanos>/<run id>").
	type cursor struct {
		it     *pebble.Iterator
		prefix string
		ok     bool
	}
	var its []*cursor
	defer func() {
		for _, c := range its {
			c.it.Close()
		}
	}()
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
			return nil, err
		}
		c := &cursor{it: it, prefix: p}
		if q.Asc {
			c.ok = it.First()
		} else {
			c.ok = it.Last()
		}
		its = append(its, c)
	}
	page := &RunPage{}
	for {
		var best *cursor
		for _, c := range its {
			if !c.ok {
				continue
			}
			pos := string(c.it.Key())[len(c.prefix):]
			if best == nil {
				best = c
				continue
			}
			bp := string(best.it.Key())[len(best.prefix):]
			if q.Asc && pos < bp || !q.Asc && pos > bp {
				best = c
			}
		}
		if best == nil {
			return page, nil
		}
		pos := string(best.it.Key())[len(best.prefix):]
		if q.Asc {
			best.ok = best.it.Next()
		} else {
			best.ok = best.it.Prev()
		}
		id := pos[strings.IndexByte(pos, '/')+1:]
		r, err := s.Run(id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !runMatches(r, q) {
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

func runMatches(r *Run, q RunQuery) bool {
	vals := runFieldValues(r)
	for f, v := range q.Equal {
		if vals[f] != v {
			return false
		}
	}
	if len(q.States) > 0 {
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
