package backup

import (
	"encoding/json"
	"time"

	"factory/internal/store"
)

// Record is a backup as the store remembers it, for status and metrics: the
// last that succeeded, and the last that failed.
type Record struct {
	// At is the backup's instant (for a failure, when it was tried).
	At time.Time `json:"at"`
	// Bytes is the archive's size.
	Bytes int64 `json:"size_bytes,omitempty"`
	// Path is the file written; empty for a backup streamed to a client.
	Path string `json:"path,omitempty"`
	// Seconds is how long it took.
	Seconds float64 `json:"seconds,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// Records are the last backup that succeeded and the last that failed.
type Records struct {
	Last        *Record `json:"last,omitempty"`
	LastFailure *Record `json:"last_failure,omitempty"`
}

const (
	lastMeta        = "last_backup"
	lastFailureMeta = "last_backup_failure"
)

// LastRecords reads what the store remembers of its backups.
func LastRecords(s *store.Store) (Records, error) {
	var out Records
	for _, m := range []struct {
		name string
		dst  **Record
	}{{lastMeta, &out.Last}, {lastFailureMeta, &out.LastFailure}} {
		v, err := s.Meta(m.name)
		if err != nil {
			return out, err
		}
		if v == "" {
			continue
		}
		r := &Record{}
		if json.Unmarshal([]byte(v), r) == nil {
			*m.dst = r
		}
	}
	return out, nil
}

// Remember records a backup that succeeded (err nil) or failed. It is a
// log write: caches of the state need not notice.
func Remember(s *store.Store, r Record, err error) error {
	name := lastMeta
	if err != nil {
		name, r.Error = lastFailureMeta, err.Error()
	}
	b, _ := json.Marshal(r)
	batch := s.NewLogBatch()
	batch.PutMeta(name, string(b))
	return batch.Commit()
}

// Record is what the store remembers of a backup made (written to path, or
// "" for a stream).
func (r *Result) Record(path string) Record {
	return Record{At: r.Manifest.CreatedAt, Bytes: r.Bytes, Path: path, Seconds: r.Took.Seconds()}
}
