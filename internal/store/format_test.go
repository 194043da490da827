package store

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"factory"
)

// TestNewStoreIsStamped: a new store carries the format this binary writes,
// and the binary that stamped it.
func TestNewStoreIsStamped(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenWith(dir, Options{Version: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Format(); err != nil || v != FormatVersion {
		t.Fatalf("format %d (%v), want %d", v, err, FormatVersion)
	}
	if by, _ := s.Meta(formatByMeta); by != "v1.2.3" {
		t.Errorf("stamped by %q", by)
	}
	if len(s.Migrated()) != 0 {
		t.Errorf("a new store was migrated: %v", s.Migrated())
	}
}

// format1Store writes a store as the binary before the format stamp left
// it: no stamp, a run list index of version 1 (no title or agent orders,
// no metadata fields), identity marks in the layout before day buckets
// (one recent, one older than the window), and the other records as they
// are. It returns the recent mark's delivery ID.
func format1Store(t *testing.T, dir string, now time.Time) string {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	b.PutFactory(&factory.Factory{Name: "acme", UID: "fc_old"})
	b.PutWebhook(&factory.Webhook{Factory: "acme", Key: "hook", UID: "wh_old"})
	for _, title := range []string{"b", "a"} {
		b.PutRun(&factory.Run{ID: "run_" + title, Title: title, State: factory.StateSucceeded, CreatedAt: now, UpdatedAt: now,
			Metadata: map[string]string{"k": title}}, nil)
	}
	recent := "dlv_recent"
	b.putRaw(legacyMarkPrefix+"wh_old/header:recent", identityMark(recent, now.Add(-time.Hour)))
	b.putRaw(legacyMarkPrefix+"wh_old/header:old", identityMark("dlv_old", now.Add(-markWindow-time.Hour)))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b = s.NewBatch()
	err = s.scan(runIndexPrefix, func(key string, _ []byte) error {
		if strings.Contains(key, "/t/") || strings.Contains(key, "/a/") || strings.HasPrefix(key, runIndexPrefix+"md:") {
			b.delete(key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b.delete(metaPrefix + "run_index")
	b.delete(metaPrefix + formatMeta)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	return recent
}

// TestFormatMigration: a store of the format before the stamp opens, is
// migrated in one logged step, and reads as a new store would: runs list
// by title and metadata, a recent identity is still a duplicate, an
// expired one is gone, nothing is left in the old layout. The next open
// migrates nothing.
func TestFormatMigration(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	recent := format1Store(t, dir, now)

	var log bytes.Buffer
	s, err := OpenWith(dir, Options{Log: slog.New(slog.NewTextHandler(&log, nil)), Version: "v2.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Format(); v != FormatVersion {
		t.Errorf("format after the migration: %d", v)
	}
	if m := s.Migrated(); len(m) != 1 || m[0].From != 1 {
		t.Errorf("migrations applied: %+v", m)
	}
	for _, want := range []string{`msg="migrating the store"`, "from=1 to=2", `msg="migrated the store"`, "format=2"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log.String())
		}
	}
	page, err := s.ListRuns(RunQuery{SortBy: "title", Asc: true, Limit: 10, Equal: map[string]string{MetadataField("k"): "a"}})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].Title != "a" {
		t.Errorf("runs by title and metadata after the migration: %v %+v", err, page)
	}
	if id, ok, err := s.SeenIdentity("wh_old", "header:recent", now.Add(-markWindow), now); err != nil || !ok || id != recent {
		t.Errorf("a recent identity of the old layout: %q %v %v", id, ok, err)
	}
	var keys []string
	s.IdentityKeys(func(k string) { keys = append(keys, k) })
	if fmt.Sprint(keys) != "[wh_old/header:recent]" {
		t.Errorf("identity keys after the migration: %v", keys)
	}
	if left, _ := s.hasKeyIn([]byte(legacyMarkPrefix), prefixEnd(legacyMarkPrefix)); left {
		t.Error("marks are left in the old layout")
	}
	if w, err := s.WebhookByUID("wh_old"); err != nil || w.Key != "hook" {
		t.Errorf("the webhook: %v %v", w, err)
	}
	s.Close()

	log.Reset()
	s, err = OpenWith(dir, Options{Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Migrated()) != 0 || log.Len() != 0 {
		t.Errorf("the second open migrated again: %v\n%s", s.Migrated(), log.String())
	}
}

// TestNewerFormatRefused: a store stamped by a newer binary is refused by
// both opens, with both formats and what to do in the message, and is left
// as it was.
func TestNewerFormatRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.stamp(FormatVersion+1, "v9.0.0", nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for name, open := range map[string]func(string) (*Store, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
		s, err := open(dir)
		if err == nil {
			s.Close()
			t.Fatalf("%s opened a store of format %d", name, FormatVersion+1)
		}
		var fe *FormatError
		if !errors.As(err, &fe) || !errors.Is(err, ErrNewerFormat) {
			t.Fatalf("%s: %v", name, err)
		}
		want := fmt.Sprintf("open store %s: the store is in format %d (written by factory v9.0.0); this binary reads formats up to %d: "+
			"run a factory binary that reads format %d, or restore a backup of format %d or older into a new directory", dir, FormatVersion+1, FormatVersion, FormatVersion+1, FormatVersion)
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %s\nwant %s...", name, err, want)
		}
	}
	if v := rawFormat(t, dir); v != FormatVersion+1 {
		t.Errorf("the refused store's stamp is now %d", v)
	}
}

// rawFormat reads a store's stamp without the format check.
func rawFormat(t *testing.T, dir string) int {
	t.Helper()
	opts := readOnlyOptions()
	defer opts.Cache.Unref()
	db, err := openPebble(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{db: db, dir: dir}
	defer s.Close()
	v, err := s.Format()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFailedMigrationLeavesTheFormat: a step that fails after writing part
// of its work leaves the store in the old format, and the next open runs
// the step again from the start.
func TestFailedMigrationLeavesTheFormat(t *testing.T) {
	dir := t.TempDir()
	format1Store(t, dir, time.Now())
	saved := migrations
	defer func() { migrations = saved }()
	migrations = []Migration{{From: 1, Name: "fails half way", apply: func(s *Store, b *Batch, now time.Time) error {
		if err := s.upgradeRunIndex(); err != nil { // a chunk of its own, committed
			return err
		}
		b.PutMeta("half", "way")
		return errors.New("the disk is full")
	}}}
	if s, err := Open(dir); err == nil || !strings.Contains(err.Error(), "migrating the store from format 1 to 2 (fails half way): the disk is full") {
		if err == nil {
			s.Close()
		}
		t.Fatalf("open: %v", err)
	}
	if v := rawFormat(t, dir); v != 1 {
		t.Fatalf("after a failed step the store is in format %d", v)
	}
	migrations = saved
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, _ := s.Format(); v != FormatVersion {
		t.Errorf("format %d", v)
	}
	if v, _ := s.Meta("half"); v != "" {
		t.Error("the failed step's batch was committed")
	}
}

// TestMigrationsAreComplete: there is one step from every format before
// this binary's.
func TestMigrationsAreComplete(t *testing.T) {
	if len(migrations) != FormatVersion-1 {
		t.Fatalf("%d migrations for format %d", len(migrations), FormatVersion)
	}
	for i, m := range migrations {
		if m.From != i+1 || m.apply == nil || m.Name == "" {
			t.Errorf("migrations[%d] = %+v", i, m)
		}
	}
}
