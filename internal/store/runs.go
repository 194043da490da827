package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"factory"

	"github.com/cockroachdb/pebble"
)

// Key layout of runs.
const (
	runPrefix        = "run/"   // run/<run id> → Run
	runCreatedPrefix = "runc/"  // runc/<created ns, 20 digits>/<run id> → nothing: creation order
	runEventPrefix   = "runev/" // runev/<run id>/<seq, 10 digits> → RunEvent
	runFollowPrefix  = "runfu/" // runfu/<run id>/<seq, 10 digits> → a pending follow-up message
)

func nanos(t time.Time) string { return fmt.Sprintf("%020d", t.UnixNano()) }

// PutRun writes a run and keeps its list indexes: prev is the run as it
// was (nil for a new run). An updated_at entry the run no longer has is
// not deleted but marked superseded (at the new updated_at), so that a
// listing begun before the change still sees the run where it stood; the
// sweeper removes superseded entries later.
func (b *Batch) PutRun(r *factory.Run, prev *factory.Run) {
	b.putJSON(runPrefix+r.ID, r)
	if prev == nil {
		b.putRaw(runCreatedPrefix+nanos(r.CreatedAt)+"/"+r.ID, nil)
	}
	now := map[string]bool{}
	for _, k := range runIndexKeys(r) {
		now[k] = true
	}
	if prev != nil {
		at := nanos(r.UpdatedAt)
		for _, k := range runIndexKeys(prev) {
			switch {
			case now[k]:
			case isUpdatedKey(k):
				b.putRaw(k, []byte(at))
				b.putRaw(runSupersededPrefix+at+"/"+k, nil)
			default:
				b.delete(k)
			}
		}
	}
	for k := range now {
		b.putRaw(k, nil)
	}
	if b.s.onRun != nil {
		b.s.onRun(b, r, prev)
	}
	b.journalRun(r, prev)
}

// AddRunEvent appends to a run's timeline; r.Events numbers it.
func (b *Batch) AddRunEvent(r *factory.Run, e factory.RunEvent) {
	b.putJSON(fmt.Sprintf("%s%s/%010d", runEventPrefix, r.ID, r.Events), e)
	r.Events++
}

// QueueFollowUp stores a follow-up message to send as the run's next turn.
func (b *Batch) QueueFollowUp(runID string, seq int, message string) {
	b.putRaw(fmt.Sprintf("%s%s/%010d", runFollowPrefix, runID, seq), []byte(message))
}

// DropFollowUp removes a follow-up once its turn has started.
func (b *Batch) DropFollowUp(key string) { b.delete(key) }

// ErrNoChange, returned by an update function, ends UpdateRun without
// writing anything.
var ErrNoChange = errors.New("no change")

// UpdateRun reads a run, lets update change it and add writes of its own
// to the batch (timeline events, follow-ups), and writes the run with its
// indexes, if its change of state (if any) went through the table of
// states (factory.Run.MoveTo; else factory.ErrTransition, and nothing is
// written): one read-modify-write, serialised with every other UpdateRun of
// the same run. durable waits for the disk; a status message need not. It
// returns the run as written, or as it was when update returned
// ErrNoChange; any other error of update is returned and nothing is
// written.
func (s *Store) UpdateRun(id string, durable bool, update func(*factory.Run, *Batch) error) (*factory.Run, error) {
	h := fnv.New32a()
	h.Write([]byte(id))
	mu := &s.runLocks[h.Sum32()%uint32(len(s.runLocks))]
	mu.Lock()
	defer mu.Unlock()
	r, err := s.Run(id)
	if err != nil {
		return nil, err
	}
	// prev keeps what the update may change in place (an artifact's
	// status, the usage): the metrics' journal compares the two.
	prev := *r
	prev.Artifacts = slices.Clone(r.Artifacts)
	if r.Usage != nil {
		u := *r.Usage
		prev.Usage = &u
	}
	b := s.NewLogBatch()
	if err := update(r, b); err != nil {
		b.Abort()
		if errors.Is(err, ErrNoChange) {
			return &prev, nil
		}
		return nil, err
	}
	// The one table of states (factory.MoveTo): a change it does not
	// have is refused, and nothing of the update is written.
	if err := r.CheckSteps(prev.State); err != nil {
		b.Abort()
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	r.ForgetSteps()
	b.PutRun(r, &prev)
	if durable {
		err = b.Commit()
	} else {
		err = b.CommitNoSync()
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Run reads one run.
func (s *Store) Run(id string) (*factory.Run, error) {
	r := &factory.Run{}
	return r, s.getJSON(runPrefix+id, r)
}

// RunEvents reads a run's timeline, oldest first.
func (s *Store) RunEvents(id string) ([]*factory.RunEvent, error) {
	return scanJSON[factory.RunEvent](s, runEventPrefix+id+"/")
}

// RunEventsPage reads at most limit of a run's timeline entries, oldest
// first, from position from (an entry's place among the run's events): a
// reader holds one page, never the whole of a long timeline.
func (s *Store) RunEventsPage(id string, from, limit int) ([]*factory.RunEvent, error) {
	prefix := runEventPrefix + id + "/"
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte(fmt.Sprintf("%s%010d", prefix, max(from, 0))), UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*factory.RunEvent
	for it.First(); it.Valid() && len(out) < limit; it.Next() {
		e := &factory.RunEvent{}
		if err := json.Unmarshal(it.Value(), e); err != nil {
			return nil, fmt.Errorf("decode %s: %w", it.Key(), err)
		}
		out = append(out, e)
	}
	return out, it.Error()
}

// PendingFollowUp is a queued follow-up: its key (to drop it) and message.
type PendingFollowUp struct {
	Key, Message string
}

// FollowUps lists a run's pending follow-ups in the order they came.
func (s *Store) FollowUps(id string) ([]PendingFollowUp, error) {
	var out []PendingFollowUp
	err := s.scan(runFollowPrefix+id+"/", func(key string, v []byte) error {
		out = append(out, PendingFollowUp{Key: key, Message: string(v)})
		return nil
	})
	return out, err
}

// RunsInState lists the runs in one of the states, oldest first (by
// creation). Used at start-up: it walks each state's entries of the run
// list index, so it reads the runs in those states and no other (a
// million finished runs cost nothing).
func (s *Store) RunsInState(states ...factory.RunState) ([]*factory.Run, error) {
	var found []string // "<created nanos>/<run id>"
	for _, st := range slices.Compact(slices.Sorted(slices.Values(states))) {
		prefix := runIndexPrefix + "state=" + escapeIndexValue(string(st)) + "/c/"
		err := s.scan(prefix, func(key string, _ []byte) error {
			found = append(found, key[len(prefix):])
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(found) // the nanoseconds have a fixed width
	out := make([]*factory.Run, 0, len(found))
	for _, k := range found {
		_, id, _ := strings.Cut(k, "/")
		r, err := s.Run(id)
		if err != nil {
			return nil, err
		}
		if slices.Contains(states, r.State) { // the index and the record are written together
			out = append(out, r)
		}
	}
	return out, nil
}

const idempotencyPrefix = "idem/" // idem/<hash of key and caller> → idempotent

type idempotent struct {
	BodyHash string          `json:"body_hash"`
	Response json.RawMessage `json:"response"`
	Time     time.Time       `json:"time"`
}

// Idempotent looks up an Idempotency-Key: found with the same body, the
// first response; found with another body, ok and a nil response.
func (s *Store) Idempotent(key, bodyHash string, window time.Duration) ([]byte, bool, error) {
	var v idempotent
	err := s.getJSON(idempotencyPrefix+key, &v)
	if errors.Is(err, ErrNotFound) || err == nil && time.Since(v.Time) > window {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if v.BodyHash != bodyHash {
		return nil, true, nil
	}
	return v.Response, true, nil
}

// RememberIdempotent stores the response of an Idempotency-Key.
func (s *Store) RememberIdempotent(key, bodyHash string, response []byte) error {
	b := s.NewLogBatch()
	b.putJSON(idempotencyPrefix+key, idempotent{BodyHash: bodyHash, Response: response, Time: time.Now().UTC()})
	return b.Commit()
}

const runAttachmentPrefix = "runatt/" // runatt/<run id>/<file name> → the bytes

// PutRunAttachment stores an attachment's bytes with the run, in the
// batch that creates it.
func (b *Batch) PutRunAttachment(runID, name string, data []byte) {
	b.putRaw(runAttachmentPrefix+runID+"/"+name, data)
}

// RunAttachment reads an attachment's bytes.
func (s *Store) RunAttachment(runID, name string) ([]byte, error) {
	return s.get(runAttachmentPrefix + runID + "/" + name)
}

// DetachRuns is for a store restored from a backup. A run queued or in
// progress at the backup's instant holds handles on what a backup does
// not hold: the agent's process on the machine the backup came from, the
// turn a worker held through the workers' queue (<data>/nats). They are
// dropped, so that the server's start-up takes the run as after a crash
// (a run in progress ends ERROR, retryable; a queued run is queued again)
// rather than wait for a worker that will never report, or kill a process
// that is not its own. The turn's record stays, so that the run ends under
// its attempt. It returns how many runs were in progress and how many
// queued.
func (s *Store) DetachRuns() (inProgress, queued int, err error) {
	live, err := s.RunsInState(factory.StateQueued, factory.StateClaimed, factory.StateInProgress, factory.StateBlocked)
	if err != nil {
		return 0, 0, err
	}
	for _, r := range live {
		if r.State == factory.StateBlocked && !r.Approving() {
			continue // between turns
		}
		if r.State == factory.StateQueued {
			queued++
		} else {
			inProgress++
		}
		if _, err := s.UpdateRun(r.ID, true, detach); err != nil {
			return inProgress, queued, err
		}
	}
	return inProgress, queued, nil
}

// detach drops a live run's handles on its process and its worker.
func detach(r *factory.Run, _ *Batch) error {
	changed := r.Process != nil || r.RemoteTurn != "" || r.ClaimedTurn != ""
	r.Process, r.RemoteTurn, r.ClaimedTurn = nil, "", ""
	if r.State != factory.StateQueued && r.Current != nil && r.Current.Remote {
		// A queued run's offer is made again at start-up anyway.
		turn := *r.Current
		turn.Remote, r.Current, changed = false, &turn, true
	}
	if !changed {
		return ErrNoChange
	}
	return nil
}

// Key layout of work items (docs/spec/codehosts.md, Work items).
const (
	workItemPrefix     = "wi/"     // wi/<factory uid>/<key> → the root run's ID
	followUpOncePrefix = "runfuk/" // runfuk/<run id>/<key> → nothing: a follow-up sent once
)

// PutWorkItem records a work item's root run, in the batch that creates
// it, unless the work item has one.
func (b *Batch) PutWorkItem(factoryUID, key, runID string) {
	b.putRaw(workItemPrefix+factoryUID+"/"+key, []byte(runID))
}

// WorkItem is the root run of a factory's work item.
func (s *Store) WorkItem(factoryUID, key string) (string, error) {
	v, err := s.get(workItemPrefix + factoryUID + "/" + key)
	return string(v), err
}

// MarkFollowUp notes, in the batch that queues it, that a follow-up of
// this key was sent to a run.
func (b *Batch) MarkFollowUp(runID, key string) {
	b.putRaw(followUpOncePrefix+runID+"/"+key, nil)
}

// SentFollowUp reports whether a follow-up of this key was sent to a run.
func (s *Store) SentFollowUp(runID, key string) (bool, error) {
	_, err := s.get(followUpOncePrefix + runID + "/" + key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
