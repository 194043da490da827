package store

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// FormatVersion is the store format this binary writes: the layout of its
// keys and records. It is stamped into a store when the store is created
// and checked at every open (docs/operations.md):
//
//   - 1: stores made before the stamp existed (they carry none).
//   - 2: the stamp; identity marks only in day buckets; the run list index
//     at version 2.
//
// A change of layout that an older binary would misread adds a version and
// a migration to migrations.
const FormatVersion = 2

// The stamp: meta/store_format holds the format, meta/store_format_by the
// binary that wrote it.
const (
	formatMeta   = "store_format"
	formatByMeta = "store_format_by"
)

// ErrNewerFormat says a store was written by a newer binary, in a format
// this one cannot read. The *FormatError that wraps it names both formats.
var ErrNewerFormat = errors.New("the store's format is newer than this binary's")

// FormatError is the refusal to open a store of a newer format.
type FormatError struct {
	Dir       string
	Found     int    // the store's format
	WrittenBy string // the binary that stamped it, when known
	Supported int    // the newest format this binary reads (FormatVersion)
}

func (e *FormatError) Error() string {
	by := ""
	if e.WrittenBy != "" {
		by = " (written by factory " + e.WrittenBy + ")"
	}
	return fmt.Sprintf("open store %s: the store is in format %d%s; this binary reads formats up to %d: "+
		"run a factory binary that reads format %d, or restore a backup of format %d or older into a new directory "+
		"(factory restore; docs/operations.md)", e.Dir, e.Found, by, e.Supported, e.Found, e.Supported)
}

func (e *FormatError) Unwrap() error { return ErrNewerFormat }

// Migration is one registered step of the store format, from From to
// From+1.
type Migration struct {
	From int
	// Name says what the step changes, for the log.
	Name string
	// apply adds the step's writes to b, which commits them together with
	// the new stamp, synced: a store is in one format or the next, never
	// between. A step too large for one batch writes idempotent chunks
	// first (a crash before the stamp runs the step again from the start,
	// with the same result) and its last writes to b.
	apply func(s *Store, b *Batch, now time.Time) error
}

// migrations are the steps from each format to the next, in order:
// migrations[i] goes from format i+1.
var migrations = []Migration{
	{From: 1, Name: "the run list index to version 2; identity marks into day buckets", apply: migrateFrom1},
}

// Format reads the store's format stamp: 1 for a store without one.
func (s *Store) Format() (int, error) {
	v, err := s.Meta(formatMeta)
	if err != nil || v == "" {
		return 1, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("the store's format stamp %q is damaged", v)
	}
	return n, nil
}

// checkFormat stamps a new store, refuses one of a newer format, and
// migrates one of an older format forward, step by step, logging each.
func (s *Store) checkFormat(o Options) error {
	empty, err := s.isEmpty()
	if err != nil {
		return err
	}
	if empty {
		if o.readOnly {
			return nil
		}
		b := s.NewBatch()
		b.PutMeta("run_index", runIndexVersion)
		b.PutMeta(metricsMeta, "1") // a new store journals from its first run
		return s.stamp(FormatVersion, o.Version, b)
	}
	v, err := s.Format()
	if err != nil {
		return err
	}
	if v > FormatVersion {
		by, _ := s.Meta(formatByMeta)
		return &FormatError{Dir: s.dir, Found: v, WrittenBy: by, Supported: FormatVersion}
	}
	if v == FormatVersion || o.readOnly {
		return nil
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for ; v < FormatVersion; v++ {
		m := migrations[v-1]
		start := time.Now()
		log.Info("migrating the store", "dir", s.dir, "from", v, "to", v+1, "step", m.Name)
		b := s.NewBatch()
		if err := m.apply(s, b, start); err != nil {
			b.Abort()
			return fmt.Errorf("migrating the store from format %d to %d (%s): %w", v, v+1, m.Name, err)
		}
		if err := s.stamp(v+1, o.Version, b); err != nil {
			return fmt.Errorf("migrating the store from format %d to %d: %w", v, v+1, err)
		}
		log.Info("migrated the store", "dir", s.dir, "format", v+1, "took", time.Since(start).Round(time.Millisecond))
		s.migrated = append(s.migrated, m)
	}
	return nil
}

// stamp writes the format (in b, when given, which it commits), synced.
func (s *Store) stamp(v int, by string, b *Batch) error {
	if b == nil {
		b = s.NewBatch()
	}
	b.PutMeta(formatMeta, strconv.Itoa(v))
	if by != "" {
		b.PutMeta(formatByMeta, by)
	} else {
		b.delete(metaPrefix + formatByMeta)
	}
	return b.Commit()
}

// Migrated lists the migrations this open applied, oldest first.
func (s *Store) Migrated() []Migration { return s.migrated }

// isEmpty reports whether the store holds no key at all: a new store.
func (s *Store) isEmpty() (bool, error) {
	found, err := s.hasKeyIn(nil, nil)
	return !found, err
}

// legacyMarkPrefix holds identity marks as stores of format 1 made before
// day buckets kept them: dlvkey/<webhook uid>/<source>:<sha256> →
// identityMark. migrateFrom1 moves them into day buckets.
const legacyMarkPrefix = "dlvkey/"

// migrateFrom1 brings a store of format 1 to format 2: the run list index
// gets the entries of version 2 (the title and agent orders, the fields of
// the platform API's filters) where it is older, and identity marks in the
// layout before day buckets move into their day (marks older than the
// delivery log's window, which no lookup would find, are dropped).
func migrateFrom1(s *Store, b *Batch, now time.Time) error {
	if err := s.upgradeRunIndex(); err != nil {
		return fmt.Errorf("rebuilding the run list index: %w", err)
	}
	b.PutMeta("run_index", runIndexVersion)
	cutoff := now.Add(-markWindow)
	err := s.scan(legacyMarkPrefix, func(key string, v []byte) error {
		_, t, ok := parseMark(v)
		if !ok || t.Before(cutoff) {
			return nil
		}
		b.putRaw(markPrefix+markDay(t)+"/"+key[len(legacyMarkPrefix):], v)
		return nil
	})
	if err != nil {
		return err
	}
	if b.err == nil {
		b.err = b.b.DeleteRange([]byte(legacyMarkPrefix), prefixEnd(legacyMarkPrefix), nil)
	}
	return nil
}
