package backup

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"factory/internal/store"
)

// Schedule is the server configuration's backups: one every Every into
// Dir, the newest Keep kept.
type Schedule struct {
	Every time.Duration
	Keep  int
	Dir   string
}

// DefaultKeep is how many scheduled backups are kept when the
// configuration does not say.
const DefaultKeep = 24

// fileTime is the instant in a scheduled backup's file name, which sorts
// as the instants do.
const fileTime = "20060102T150405.000Z"

var scheduledName = regexp.MustCompile(`^factory-backup-\d{8}T\d{6}\.\d{3}Z\.tar\.gz$`)

// FileName is the name of a backup made at an instant.
func FileName(at time.Time) string {
	return "factory-backup-" + at.UTC().Format(fileTime) + ".tar.gz"
}

// Scheduler makes the scheduled backups.
type Scheduler struct {
	Schedule
	// Take writes one backup (the server's: it serialises backups and
	// knows the keyring).
	Take  func(w io.Writer) (*Result, error)
	Store *store.Store
	Log   *slog.Logger
	// Done hears each backup's outcome (the server's metrics).
	Done func(Record, error)
}

// Run makes a backup every Every until ctx ends. The first comes one
// interval after the newest backup in Dir (at once when that is past), or
// one interval after start when there is none. A failure is logged,
// counted and remembered; the next interval tries again.
func (sc *Scheduler) Run(ctx context.Context) {
	sc.cleanTemporary()
	wait := sc.Every
	if last, ok := sc.newest(); ok {
		wait = max(time.Until(last.Add(sc.Every)), 0)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		_, _ = sc.Once()
		timer.Reset(sc.Every)
	}
}

// Once makes one backup into Dir (written under a temporary name, synced,
// then renamed) and prunes the oldest beyond Keep.
func (sc *Scheduler) Once() (Record, error) {
	start := time.Now()
	rec, err := sc.write()
	if err != nil {
		rec = Record{At: start.UTC(), Seconds: time.Since(start).Seconds()}
		sc.Log.Error("scheduled backup failed; the next is in one interval", "dir", sc.Dir, "err", err)
	} else {
		sc.Log.Info("backed up the store", "file", rec.Path, "bytes", rec.Bytes, "took", time.Duration(rec.Seconds*float64(time.Second)).Round(time.Millisecond))
		if perr := sc.prune(); perr != nil {
			sc.Log.Error("pruning old backups", "dir", sc.Dir, "err", perr)
		}
	}
	if merr := Remember(sc.Store, rec, err); merr != nil {
		sc.Log.Error("recording the backup", "err", merr)
	}
	if sc.Done != nil {
		sc.Done(rec, err)
	}
	return rec, err
}

func (sc *Scheduler) write() (Record, error) {
	if err := os.MkdirAll(sc.Dir, 0o700); err != nil {
		return Record{}, err
	}
	f, err := os.CreateTemp(sc.Dir, ".factory-backup-*.tmp")
	if err != nil {
		return Record{}, err
	}
	tmp := f.Name()
	res, err := sc.Take(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return Record{}, err
	}
	path := filepath.Join(sc.Dir, FileName(res.Manifest.CreatedAt))
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return Record{}, err
	}
	if err := syncDir(sc.Dir); err != nil {
		return Record{}, err
	}
	return res.Record(path), nil
}

// scheduled lists the scheduled backups in Dir, oldest first.
func (sc *Scheduler) scheduled() ([]string, error) {
	entries, err := os.ReadDir(sc.Dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && scheduledName.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// prune removes the oldest scheduled backups beyond Keep (files of other
// names are never touched).
func (sc *Scheduler) prune() error {
	names, err := sc.scheduled()
	if err != nil {
		return err
	}
	for len(names) > sc.Keep {
		if err := os.Remove(filepath.Join(sc.Dir, names[0])); err != nil {
			return fmt.Errorf("prune %s: %w", names[0], err)
		}
		names = names[1:]
	}
	return nil
}

// newest is the instant of the newest scheduled backup in Dir.
func (sc *Scheduler) newest() (time.Time, bool) {
	names, err := sc.scheduled()
	if err != nil || len(names) == 0 {
		return time.Time{}, false
	}
	n := names[len(names)-1]
	t, err := time.Parse(fileTime, strings.TrimSuffix(strings.TrimPrefix(n, "factory-backup-"), ".tar.gz"))
	return t, err == nil
}

// cleanTemporary removes the temporary files of backups a dead process
// was writing.
func (sc *Scheduler) cleanTemporary() {
	matches, _ := filepath.Glob(filepath.Join(sc.Dir, ".factory-backup-*.tmp"))
	for _, m := range matches {
		os.Remove(m)
	}
}
