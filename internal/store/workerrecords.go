package store

import (
	"time"
)

// workerPrefix holds the workers of workers.md: worker/<name> → WorkerRecord.
const workerPrefix = "worker/"

// WorkerRecord is a worker's registration: its NATS password's SHA-256
// (the password itself is shown once, in its credentials file).
type WorkerRecord struct {
	Name         string     `json:"name"`
	PasswordHash []byte     `json:"password_sha256"`
	Nkey         string     `json:"nkey,omitempty"` // the public key of a worker that signs in with an nkey
	CreatedAt    time.Time  `json:"created_at"`
	RevokedAt    *time.Time `json:"revoked_at,omitempty"`
}

// PutWorker writes a worker's record.
func (b *Batch) PutWorker(w *WorkerRecord) { b.putJSON(workerPrefix+w.Name, w) }

// Worker reads one worker's record.
func (s *Store) Worker(name string) (*WorkerRecord, error) {
	w := &WorkerRecord{}
	return w, s.getJSON(workerPrefix+name, w)
}

// Workers lists the workers, by name.
func (s *Store) Workers() ([]*WorkerRecord, error) { return scanJSON[WorkerRecord](s, workerPrefix) }
