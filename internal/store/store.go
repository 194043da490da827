// Package store is the state store: the factories, webhooks, automations,
// managed secrets and API keys the service knows, kept in pebble. It is the
// only package that imports pebble; the rest of the service sees typed
// records and batches that commit all or nothing.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/vfs"

	"factory"
)

// ErrLocked says another process holds the store open.
var ErrLocked = errors.New("the store is in use by another process")

// ErrNotFound says a record does not exist.
var ErrNotFound = errors.New("not found")

// Store is an open state store. Only one process can hold it open.
type Store struct {
	db          *pebble.DB
	dir         string
	writes      atomic.Uint64
	stateWrites atomic.Uint64
	// migrated are the format migrations the open applied.
	migrated []Migration
	// runLocks serialise the read-modify-writes of a run (UpdateRun),
	// striped by run ID so that different runs do not wait for each other.
	runLocks [64]sync.Mutex
	// onRun, when set, adds its writes to the batch of every run's write
	// (the run-status outbox; OnRunWrite).
	onRun func(b *Batch, r, prev *factory.Run)
	// measure serialises the read-modify-writes of scores and benchmark
	// runs (measure.go).
	measure measureLocks
	// foldMu serialises the batches of the metrics' fold, the only writer
	// of the rollups (metrics.go).
	foldMu sync.Mutex
}

// OnRunWrite sets a function that adds writes of its own to the batch
// that writes a run (prev nil for a new run), so that they are durable with
// the run's change: the run-status webhooks' outbox. Call it before the
// store is used.
func (s *Store) OnRunWrite(f func(b *Batch, r, prev *factory.Run)) { s.onRun = f }

// Options change how a store is opened.
type Options struct {
	// Log hears the format migrations the open applies (docs/operations.md).
	Log *slog.Logger
	// Version names the binary; it is recorded with the format it stamps,
	// so that an older binary can say which one wrote a newer store.
	Version string

	readOnly bool
}

// Open opens (creating if needed) the store in dir/db. Files are created
// with mode 0600 and directories with 0700: the store holds sealed secrets
// and the state of every factory.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith opens the store as Open does. A new store is stamped with
// FormatVersion; a store of an older format is migrated forward, one
// durable step per format, each logged; a store of a newer format is
// refused with a *FormatError.
func OpenWith(dir string, o Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", dir, err)
	}
	return open(dir, o, storeOptions(256<<20))
}

// OpenReadOnly opens an existing store without writing to it: no stamp,
// no migration (a store of a newer format is still refused). For reading
// a checkpoint.
func OpenReadOnly(dir string) (*Store, error) {
	return open(dir, Options{readOnly: true}, readOnlyOptions())
}

func open(dir string, o Options, opts *pebble.Options) (*Store, error) {
	defer opts.Cache.Unref()
	db, err := openPebble(dir, opts)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, dir: dir}
	if err := s.checkFormat(o); err != nil {
		db.Close()
		var fe *FormatError
		if errors.As(err, &fe) {
			return nil, err
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if !o.readOnly {
		if err := s.BackfillMetrics(); err != nil {
			db.Close()
			return nil, fmt.Errorf("open store %s: the metrics' journal: %w", dir, err)
		}
	}
	return s, nil
}

func openPebble(dir string, opts *pebble.Options) (*pebble.DB, error) {
	db, err := pebble.Open(filepath.Join(dir, "db"), opts)
	if err != nil {
		if strings.Contains(err.Error(), "lock") || strings.Contains(err.Error(), "temporarily unavailable") {
			return nil, fmt.Errorf("open store %s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	return db, nil
}

func readOnlyOptions() *pebble.Options {
	opts := storeOptions(16 << 20)
	opts.ReadOnly = true
	return opts
}

// storeOptions are pebble's options for the store, with a block cache of
// cacheBytes (the caller unrefs it).
func storeOptions(cacheBytes int64) *pebble.Options {
	opts := &pebble.Options{
		FS:                 privateFS{vfs.Default},
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             quietLogger{},
		// Deliveries write a few small keys each: a larger memtable
		// flushes (and compacts) less often.
		MemTableSize: 64 << 20,
		Cache:        pebble.NewCache(cacheBytes),
		// Never stall writers on L0 files while a compaction catches up
		// (as CockroachDB runs pebble): a burst of deliveries must not wait.
		L0StopWritesThreshold:       1000,
		MemTableStopWritesThreshold: 4,
		// Let a WAL sync wait until a millisecond after the previous one,
		// so that more concurrent synced writes share it (pebble suggests
		// this for workloads of many small synced batches). Each sync
		// costs a flush to the device and wakes the waiting writers: under
		// a flood of deliveries, fewer and larger groups free CPU for
		// serving (BENCHMARKS.md, ingress). A lone write waits at most 1 ms.
		WALMinSyncInterval: func() time.Duration { return time.Millisecond },
	}
	// Ingress looks up every new delivery's identity, and a new identity
	// is a miss: bloom filters answer most misses without reading a block.
	opts.Levels = make([]pebble.LevelOptions, 7)
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	return opts
}

// Dir is the data directory the store lives in.
func (s *Store) Dir() string { return s.dir }

// Close flushes and closes the store.
func (s *Store) Close() error { return s.db.Close() }

// get reads a value (a copy of it), or ErrNotFound.
func (s *Store) get(key string) ([]byte, error) {
	v, closer, err := s.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

func (s *Store) getJSON(key string, v any) error {
	b, err := s.get(key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}

// hasKeyIn reports whether a key lies in [lower, upper).
func (s *Store) hasKeyIn(lower, upper []byte) (bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return false, err
	}
	found := it.First()
	return found, it.Close()
}

// scan calls fn with every value whose key starts with prefix, in key order.
func (s *Store) scan(prefix string, fn func(key string, value []byte) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := fn(string(it.Key()), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

func scanJSON[T any](s *Store, prefix string) ([]*T, error) {
	var out []*T
	err := s.scan(prefix, func(key string, b []byte) error {
		v := new(T)
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("decode %s: %w", key, err)
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

func prefixEnd(p string) []byte {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return b[:i+1]
		}
	}
	return nil
}

// Writes counts the batches committed since the store was opened.
func (s *Store) Writes() uint64 { return s.writes.Load() }

// StateWrites counts the committed batches that changed state (factories,
// webhooks, secrets, keys), not logs. The process holding the store makes
// every write, so an unchanged count means an unchanged state: caches of
// the state are valid while it stays the same.
func (s *Store) StateWrites() uint64 { return s.stateWrites.Load() }

// Batch collects writes that commit together, durably, or not at all.
type Batch struct {
	s   *Store
	b   *pebble.Batch
	err error
	log bool
}

// NewBatch starts a batch of state writes.
func (s *Store) NewBatch() *Batch { return &Batch{s: s, b: s.db.NewBatch()} }

// NewLogBatch starts a batch of log writes (deliveries), which caches of
// the state need not notice.
func (s *Store) NewLogBatch() *Batch { return &Batch{s: s, b: s.db.NewBatch(), log: true} }

func (b *Batch) putJSON(key string, v any) {
	if b.err != nil {
		return
	}
	val, err := json.Marshal(v)
	if err != nil {
		b.err = fmt.Errorf("encode %s: %w", key, err)
		return
	}
	b.err = b.b.Set([]byte(key), val, nil)
}

func (b *Batch) delete(key string) {
	if b.err == nil {
		b.err = b.b.Delete([]byte(key), nil)
	}
}

// Commit writes the batch and syncs it to disk before returning.
func (b *Batch) Commit() error { return b.commit(pebble.Sync) }

// CommitNoSync writes the batch without waiting for the disk: for records
// whose loss in a crash is acceptable (rejected deliveries).
func (b *Batch) CommitNoSync() error { return b.commit(pebble.NoSync) }

func (b *Batch) commit(opts *pebble.WriteOptions) error {
	defer b.b.Close()
	if b.err != nil {
		return b.err
	}
	if err := b.b.Commit(opts); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	b.counted()
	return nil
}

func (b *Batch) counted() {
	b.s.writes.Add(1)
	if !b.log {
		b.s.stateWrites.Add(1)
	}
}

// Empty reports whether the batch holds no writes.
func (b *Batch) Empty() bool { return b.b.Empty() }

// Abort drops the batch.
func (b *Batch) Abort() { b.b.Close() }

// privateFS creates every store file 0600 and directory 0700, whatever the
// umask: secrets are sealed, but the state is still nobody else's business.
type privateFS struct{ vfs.FS }

func (fs privateFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	if err == nil {
		_ = os.Chmod(name, 0o600)
	}
	return f, err
}

func (fs privateFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname)
	if err == nil {
		_ = os.Chmod(newname, 0o600)
	}
	return f, err
}

func (fs privateFS) MkdirAll(dir string, _ os.FileMode) error {
	return fs.FS.MkdirAll(dir, 0o700)
}

func (fs privateFS) Lock(name string) (io.Closer, error) {
	l, err := fs.FS.Lock(name)
	if err == nil {
		_ = os.Chmod(name, 0o600)
	}
	return l, err
}

// quietLogger keeps pebble's informational chatter out of the command's
// output; fatal errors still stop the process.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{}) {}
func (quietLogger) Errorf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "store: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "store: "+format+"\n", args...)
	os.Exit(1)
}

func itoa(i int) string { return fmt.Sprintf("%010d", i) }

// Compact compacts the whole store now. Benchmarks call it after a bulk
// load, to measure reads of a settled store rather than a compaction
// backlog.
func (s *Store) Compact() error { return s.db.Compact([]byte{0}, []byte{0xff}, true) }
