package store

import (
	"fmt"
	"path/filepath"

	"github.com/cockroachdb/pebble"
)

// Checkpoint writes a consistent copy of the whole store, as it is at the
// call, into dir/db (dir/db must not exist): a store of its own that
// OpenReadOnly or Open can read. Writes go on meanwhile. Every write
// committed before the call is in it, synced or not. Table files are hard
// links to the store's own (immutable) files where the file system
// allows, so the copy costs little disk: the log and the manifest are
// copied.
func (s *Store) Checkpoint(dir string) error {
	if err := s.db.Checkpoint(filepath.Join(dir, "db"), pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("checkpoint of the store %s: %w", s.dir, err)
	}
	return nil
}

// LockFile is the name of the lock file inside a store's db directory: not
// part of its state (a checkpoint opened to read it gets one).
const LockFile = "LOCK"

// Counts are how many records of each kind a store holds (a backup's
// manifest lists them).
type Counts struct {
	Factories   int `json:"factories"`
	Webhooks    int `json:"webhooks"`
	Automations int `json:"automations"`
	Runs        int `json:"runs"`
	Deliveries  int `json:"deliveries"`
	Secrets     int `json:"secrets"`
	APIKeys     int `json:"api_keys"`
	Workers     int `json:"workers"`
	Schedules   int `json:"schedules"`
}

// Counts counts the records of each kind. It walks keys (runs by their
// creation index, whose entries hold no value), a million runs in well
// under a second.
func (s *Store) Counts() (Counts, error) {
	var c Counts
	for _, k := range []struct {
		prefix string
		n      *int
	}{
		{factoryPrefix, &c.Factories}, {webhookPrefix, &c.Webhooks}, {automationPrefix, &c.Automations},
		{runCreatedPrefix, &c.Runs}, {deliveryPrefix, &c.Deliveries}, {secretPrefix, &c.Secrets},
		{apiKeyPrefix, &c.APIKeys}, {workerPrefix, &c.Workers}, {agentSchedulePrefix, &c.Schedules},
	} {
		n, _, err := s.countKeys([]byte(k.prefix), prefixEnd(k.prefix), -1)
		if err != nil {
			return c, fmt.Errorf("count %s: %w", k.prefix, err)
		}
		*k.n = n
	}
	return c, nil
}
