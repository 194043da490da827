package backup_test

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory/internal/backup"
	"factory/internal/store"
)

// TestScheduledBackups: each backup is a file named for its instant; the
// oldest beyond Keep are pruned (other files are left alone); a failure
// is reported, remembered, and leaves no file behind.
func TestScheduledBackups(t *testing.T) {
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := filepath.Join(t.TempDir(), "backups")
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fail := false
	var outcomes []error
	sc := &backup.Scheduler{Schedule: backup.Schedule{Every: time.Hour, Keep: 2, Dir: dir}, Store: s,
		Log: slog.New(slog.DiscardHandler),
		Take: func(w io.Writer) (*backup.Result, error) {
			if fail {
				return nil, errors.New("the disk is full")
			}
			clock = clock.Add(time.Hour)
			return backup.Take(s, w, backup.Options{Now: func() time.Time { return clock }})
		},
		Done: func(_ backup.Record, err error) { outcomes = append(outcomes, err) }}
	for i := 0; i < 3; i++ {
		if _, err := sc.Once(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600)
		}
	}
	want := []string{"factory-backup-20260301T140000.000Z.tar.gz", "factory-backup-20260301T150000.000Z.tar.gz", "notes.txt"}
	if got := names(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("backups kept: %v, want %v", got, want)
	}
	f, err := os.Open(filepath.Join(dir, want[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m, err := backup.Verify(f, backup.DefaultLimits); err != nil || !m.CreatedAt.Equal(clock) {
		t.Fatalf("the newest backup: %v %v", m, err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("the backups' folder is %v", fi.Mode().Perm())
	}

	fail = true
	if _, err := sc.Once(); err == nil {
		t.Fatal("a failed backup reported no error")
	}
	if len(outcomes) != 4 || outcomes[3] == nil {
		t.Errorf("outcomes: %v", outcomes)
	}
	rec, err := backup.LastRecords(s)
	if err != nil || rec.Last == nil || rec.Last.Path != filepath.Join(dir, want[1]) || rec.Last.Bytes == 0 ||
		rec.LastFailure == nil || rec.LastFailure.Error != "the disk is full" {
		t.Fatalf("records: %+v %+v %v", rec.Last, rec.LastFailure, err)
	}
	if got := names(t, dir); len(got) != 3 {
		t.Errorf("after a failure the folder holds %v", got)
	}
}

func names(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
