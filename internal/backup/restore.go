package backup

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"factory/internal/store"
)

// RestoreOptions change a restore.
type RestoreOptions struct {
	Limits Limits // zero: DefaultLimits
	// Log hears the format migrations of an older backup's store.
	Log *slog.Logger
	// Binary is the version of the binary restoring (stamped with a
	// migrated store's format).
	Binary string
}

// Restored is what a restore put in place.
type Restored struct {
	Manifest *Manifest
	// Migrated are the format migrations a backup of an older format went
	// through.
	Migrated []store.Migration
	// InProgress and Queued count the runs that were live at the instant
	// (store.DetachRuns): the server's start-up ends the first as after a
	// crash and queues the second again.
	InProgress, Queued int
}

// ErrNotEmpty says the directory to restore into holds something.
var ErrNotEmpty = errors.New("not empty")

// Restore puts the store of a backup into dir, which must be missing or
// empty. Nothing is written to dir until the whole backup has been checked:
// the archive is read into a staging directory next to dir (the manifest
// against the limits first, then each file's size and SHA-256), the staged
// store is opened (migrated when its format is older) and its records are
// counted against the manifest's, and only then is it moved into place.
// On any error the staging directory goes and dir is as it was.
func Restore(r io.Reader, dir string, o RestoreOptions) (*Restored, error) {
	if o.Limits == (Limits{}) {
		o.Limits = DefaultLimits
	}
	if err := emptyOrMissing(dir); err != nil {
		return nil, err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, err
	}
	stage, err := os.MkdirTemp(parent, "."+filepath.Base(filepath.Clean(dir))+".restore-")
	if err != nil {
		return nil, fmt.Errorf("staging the restore: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(stage)
		}
	}()
	m, err := read(r, o.Limits, dirSink{dir: stage})
	if err != nil {
		return nil, err
	}
	res := &Restored{Manifest: m}
	if err := checkStaged(stage, res, o); err != nil {
		return nil, err
	}
	if err := moveInto(stage, dir); err != nil {
		return nil, err
	}
	done = true
	return res, nil
}

// emptyOrMissing refuses a directory that holds anything (a restore never
// mixes with, or replaces, a store).
func emptyOrMissing(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s is %w (it holds %s): restore only into an empty or missing directory", dir, ErrNotEmpty, entries[0].Name())
	}
	return nil
}

// checkStaged opens the staged store (which checks its format and migrates
// an older one), compares its records with the manifest's counts, and
// detaches the runs that were live at the instant.
func checkStaged(stage string, res *Restored, o RestoreOptions) error {
	s, err := store.OpenWith(stage, store.Options{Log: o.Log, Version: o.Binary})
	if err != nil {
		return fmt.Errorf("the backup's store does not open: %w", err)
	}
	defer s.Close()
	got, err := s.Counts()
	if err != nil {
		return err
	}
	if want := res.Manifest.Counts; got != want {
		return fmt.Errorf("the backup's store holds %s, its manifest says %s: the backup is damaged or was changed", countsText(got), countsText(want))
	}
	res.Migrated = s.Migrated()
	if res.InProgress, res.Queued, err = s.DetachRuns(); err != nil {
		return fmt.Errorf("detaching the runs that were live: %w", err)
	}
	return nil
}

// moveInto renames the staged store into place: the staging directory
// itself when dir is missing, its db/ into dir when dir is an empty
// directory (made private).
func moveInto(stage, dir string) error {
	if err := emptyOrMissing(dir); err != nil {
		return err // something appeared while the backup was read
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(stage, dir); err != nil {
			return err
		}
		return syncDir(filepath.Dir(dir))
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(stage, "db"), filepath.Join(dir, "db")); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	return os.RemoveAll(stage)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// countsText writes counts as "1 factory, 3 runs, ..." (kinds with none
// left out).
func countsText(c store.Counts) string {
	var parts []string
	for _, k := range []struct {
		n            int
		one, several string
	}{
		{c.Factories, "factory", "factories"}, {c.Webhooks, "webhook", "webhooks"}, {c.Automations, "automation", "automations"},
		{c.Runs, "run", "runs"}, {c.Deliveries, "delivery", "deliveries"}, {c.Secrets, "secret", "secrets"},
		{c.APIKeys, "API key", "API keys"}, {c.Workers, "worker", "workers"}, {c.Schedules, "schedule", "schedules"},
	} {
		switch {
		case k.n == 1:
			parts = append(parts, "1 "+k.one)
		case k.n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", k.n, k.several))
		}
	}
	if len(parts) == 0 {
		return "no records"
	}
	return strings.Join(parts, ", ")
}

// CountsText writes a backup's counts for a person.
func CountsText(c store.Counts) string { return countsText(c) }
