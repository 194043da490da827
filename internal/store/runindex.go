package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
// first: a query with several walks the index of the first. Metadata
// pairs (md:<key>) come before all of them.
var RunFilterFields = []string{"conversation", "ancestor", "automation_id", "schedule_id", "factory_uid", "creator", "skill", "name", "model_id",
	"environment_id", "artifact_type", "in_factory", "source", "state"}

// metadataField is the index field of a metadata key.
func metadataField(key string) string { return "md:" + key }

// MetadataField is the query field of a metadata key.
func MetadataField(key string) string { return metadataField(key) }

// runFieldValues are a run's values of each filterable field; a field may
// have several (ancestors, artifact types).
func runFieldValues(r *factory.Run) map[string][]string {
	var cfg struct {
		Name  string `json:"name"`
		Model string `json:"model_id"`
	}
	if len(r.Config) > 0 {
		_ = json.Unmarshal(r.Config, &cfg)
	}
	one := func(v string) []string {
		if v == "" {
			return nil
		}
		return []string{v}
	}
	vals := map[string][]string{"automation_id": one(r.AutomationID), "factory_uid": one(r.FactoryUID), "name": one(cfg.Name),
		"model_id": one(cfg.Model), "environment_id": one(r.Environment), "source": one(r.Source), "state": one(string(r.State)),
		"skill": one(r.Skill), "ancestor": r.Ancestors, "conversation": one(r.Conversation())}
	if r.Creator != nil {
		vals["creator"] = one(r.Creator.UID)
	}
	if r.FactoryUID != "" {
		vals["in_factory"] = []string{"true"}
	}
	if r.Schedule != nil {
		vals["schedule_id"] = one(r.Schedule.ScheduleID)
	}
	for _, a := range r.Artifacts {
		if !slices.Contains(vals["artifact_type"], string(a.Type)) {
			vals["artifact_type"] = append(vals["artifact_type"], string(a.Type))
		}
	}
	for k, v := range r.Metadata {
		vals[metadataField(k)] = []string{v}
	}
	return vals
}

// runSortValues are a run's positions in each order: c created_at, u
// updated_at, t title (case folded), a agent (the skill; runs without one
// after every skill).
func runSortValues(r *factory.Run) map[string]string {
	agent := "\xff"
	if r.Skill != "" {
		agent = textSortValue(r.Skill)
	}
	return map[string]string{"c": nanos(r.CreatedAt), "u": nanos(r.UpdatedAt), "t": textSortValue(r.Title), "a": agent}
}

// maxSortText bounds the part of a title or skill that orders it.
const maxSortText = 200

// textSortValue orders text case-insensitively: folded, cut, escaped so
// that it holds no "/", and ended with \x01 so that a text sorts before
// the texts it begins (bytes below \x02 are escaped).
func textSortValue(s string) string {
	s = strings.ToLower(s)
	if len(s) > maxSortText {
		s = strings.ToValidUTF8(s[:maxSortText], "")
	}
	return sortTextEscaper.Replace(s) + "\x01"
}

var sortTextEscaper = strings.NewReplacer("%", "%25", "/", "%2F", "\x00", "%00", "\x01", "%01")

func runIndexKeys(r *factory.Run) []string {
	sorts := runSortValues(r)
	keys := make([]string, 0, 32)
	for sk, sv := range sorts {
		keys = append(keys, runIndexPrefix+sk+"/"+sv+"/"+r.ID)
	}
	for f, vs := range runFieldValues(r) {
		for _, v := range vs {
			v = escapeIndexValue(v)
			for sk, sv := range sorts {
				keys = append(keys, runIndexPrefix+f+"="+v+"/"+sk+"/"+sv+"/"+r.ID)
			}
		}
	}
	return keys
}

// escapeIndexValue keeps a value from reaching into the next key part.
func escapeIndexValue(v string) string {
	if !strings.ContainsAny(v, "%/") {
		return v // most values: no copy, no replacer
	}
	return indexValueEscaper.Replace(v)
}

var indexValueEscaper = strings.NewReplacer("%", "%25", "/", "%2F")

// RunQuery is a list query. Equality filters are ANDed; several states are
// ORed. Times bound the sort key's range when they are on it.
type RunQuery struct {
	Equal map[string]string // field → value (not state)
	// Alternatives are more values that also match a field of Equal (the
	// older spellings of a value).
	Alternatives map[string][]string
	States       []factory.RunState
	SortBy       string // "created_at", "updated_at", "title" or "agent"
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
	// ID, when set, is the one run the query can find (a run ID searched
	// for): it is read directly, and the other filters checked on it.
	ID string
	// Search matches runs whose title, skill or prompt (its first 64 KiB)
	// holds it, ignoring case.
	Search string
	// None says the query matches no run (a filter on a value no run here
	// can have): the answer is an empty page, without a walk.
	None bool
}

// And adds a filter checked run by run.
func (q *RunQuery) And(f func(*factory.Run) bool) {
	if prev := q.Matches; prev != nil {
		q.Matches = func(r *factory.Run) bool { return prev(r) && f(r) }
		return
	}
	q.Matches = f
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
	if q.None {
		return &RunPage{}, nil
	}
	if q.ID != "" {
		return s.listOneRun(q)
	}
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
		id := pos[strings.LastIndexByte(pos, '/')+1:]
		r, err := s.candidateRun(id, q.Search)
		if errors.Is(err, ErrNotFound) || err == nil && r == nil {
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

// listOneRun answers a query for one run ID: that run, if it matches the
// rest of the query, on a page of its own.
func (s *Store) listOneRun(q RunQuery) (*RunPage, error) {
	r, err := s.Run(q.ID)
	if errors.Is(err, ErrNotFound) || q.After != "" {
		return &RunPage{}, nil
	}
	if err != nil {
		return nil, err
	}
	if !runMatches(r, q, "", false) {
		return &RunPage{}, nil
	}
	return &RunPage{Runs: []*factory.Run{r}}, nil
}

// indexPrefixes picks the index a query walks: the most selective field it
// filters on (field), else one prefix per state it lists, else the global
// index; sortKey is c (created_at) or u (updated_at).
func (q *RunQuery) indexPrefixes() (field, sortKey string, prefixes []string) {
	sortKey = map[string]string{"created_at": "c", "title": "t", "agent": "a"}[q.SortBy]
	if sortKey == "" {
		sortKey = "u"
	}
	var mdFields []string
	for f := range q.Equal {
		if strings.HasPrefix(f, "md:") {
			mdFields = append(mdFields, f)
		}
	}
	slices.Sort(mdFields)
	for _, f := range append(mdFields, RunFilterFields...) {
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
		found := false
		for _, have := range vals[f] {
			found = found || have == v || slices.Contains(q.Alternatives[f], have)
		}
		if !found {
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
	if q.Search != "" && !searchMatches(r, q.Search) {
		return false
	}
	return q.Matches == nil || q.Matches(r)
}

// candidateRun reads a run on a list's walk; nil when a search cannot
// match it. The search is tried on the stored bytes first: when its text
// is ASCII that JSON writes as it is, a record without it (in any case)
// holds no field with it, and is skipped without being decoded, which is
// most of the cost of a search (BENCHMARKS.md).
func (s *Store) candidateRun(id, search string) (*factory.Run, error) {
	raw, err := s.get(runPrefix + id)
	if err != nil {
		return nil, err
	}
	if search != "" && plainASCII(search) && !containsFoldASCII(raw, search) {
		return nil, nil
	}
	r := &factory.Run{}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("read %s%s: %w", runPrefix, id, err)
	}
	return r, nil
}

// plainASCII reports whether JSON writes text byte for byte: printable
// ASCII without the characters it escapes.
func plainASCII(text string) bool {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c < 0x20 || c >= 0x7f || strings.IndexByte(`"\<>&`, c) >= 0 {
			return false
		}
	}
	return true
}

// containsFoldASCII reports whether b holds the ASCII text, ignoring case.
func containsFoldASCII(b []byte, text string) bool {
	n := len(text)
	if n == 0 {
		return true
	}
	lo, up := lowerASCII(text[0]), upperASCII(text[0])
	for i := 0; i+n <= len(b); i++ {
		if (b[i] == lo || b[i] == up) && strings.EqualFold(string(b[i:i+n]), text) {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func upperASCII(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// maxSearchedPrompt is how much of a prompt a search reads.
const maxSearchedPrompt = 64 << 10

// searchMatches reports whether a run's title, skill or prompt holds
// text, ignoring case.
func searchMatches(r *factory.Run, text string) bool {
	prompt := r.Prompt
	if len(prompt) > maxSearchedPrompt {
		prompt = prompt[:maxSearchedPrompt]
	}
	return containsFold(r.Title, text) || containsFold(r.Skill, text) || containsFold(prompt, text)
}

// containsFold reports whether s holds sub, ignoring case, without
// folding all of s when it is ASCII.
func containsFold(s, sub string) bool {
	if len(sub) == 0 {
		return true
	}
	for i := 0; i < len(sub); i++ {
		if sub[i] >= utf8.RuneSelf {
			return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
		}
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
		}
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
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

// runIndexVersion is the version of the run list index's layout: a store
// written with an older one gets the entries it lacks at its first open
// (version 2 added the title and agent orders, and the fields of the
// platform API's filters; version 3 the conversation, which the API's
// conversation paths find runs by).
const runIndexVersion = "3"

// upgradeRunIndex adds the entries an older index lacks: every run's
// current entries are written again (entries already there are the same
// keys), in batches. It is idempotent; the format migration that calls it
// records the index's version with its stamp.
func (s *Store) upgradeRunIndex() error {
	v, err := s.Meta("run_index")
	if err != nil || v == runIndexVersion {
		return err
	}
	b := s.NewBatch()
	n := 0
	err = s.scan(runPrefix, func(_ string, val []byte) error {
		r := &factory.Run{}
		if err := json.Unmarshal(val, r); err != nil {
			return err
		}
		for _, k := range runIndexKeys(r) {
			if _, closer, err := s.db.Get([]byte(k)); err == nil {
				closer.Close()
				continue // kept as it is: it may be marked superseded
			}
			b.putRaw(k, nil)
		}
		if n++; n%1000 == 0 {
			if err := b.CommitNoSync(); err != nil {
				return err
			}
			b = s.NewBatch()
		}
		return nil
	})
	if err != nil {
		b.Abort()
		return err
	}
	return b.CommitNoSync()
}
