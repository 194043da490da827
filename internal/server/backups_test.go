package server_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"factory"

	"factory/client"
	"factory/internal/backup"
	"factory/internal/server"
)

// gauge reads an unlabelled sample, or a labelled one, from /metrics.
func (h *harness) gauge(sample string) float64 {
	h.t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(h.metrics())
	if m == nil {
		h.t.Fatalf("no sample %s in /metrics", sample)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestBackupThroughTheAPI: an admin key gets the archive, which verifies
// and counts the records; any other key is refused; the backup shows in
// the metrics and in GET /v1/admin/backups.
func TestBackupThroughTheAPI(t *testing.T) {
	h := start(t)
	b := h.store.NewBatch()
	b.PutAPIKey("fk_reader", &factory.APIKey{Name: "reader", Scope: factory.ScopeRead, CreatedAt: time.Now()})
	b.Commit()
	if _, err := client.New(h.url, "fk_reader").Backup(context.Background()); client.StatusOf(err) != http.StatusForbidden {
		t.Fatalf("a read key: %v", err)
	}
	r, err := h.c.Backup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m, err := backup.Verify(r, backup.DefaultLimits)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if m.Counts.APIKeys != 2 || m.SecretsKey == "" {
		t.Errorf("manifest: %+v", m)
	}
	if h.gauge(`factory_backups_total{outcome="ok"}`) != 1 || h.gauge("factory_backup_last_size_bytes") == 0 ||
		h.gauge("factory_backup_last_success_timestamp_seconds") != float64(m.CreatedAt.UnixNano())/1e9 {
		t.Errorf("metrics:\n%s", grep(h.metrics(), "factory_backup"))
	}
	var st struct {
		Last     *backup.Record `json:"last"`
		Schedule any            `json:"schedule"`
	}
	if err := h.c.Do(context.Background(), "GET", "/v1/admin/backups", nil, &st); err != nil || st.Last == nil || !st.Last.At.Equal(m.CreatedAt) || st.Schedule != nil {
		t.Errorf("backup status: %+v %v", st, err)
	}
}

// TestScheduledBackups: the server backs up on its schedule and keeps the
// newest; a schedule that cannot write is logged, counted and remembered,
// and the server goes on.
func TestScheduledBackups(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "backups")
	h := startConfigured(t, func(c *server.Config) {
		c.Backups = &backup.Schedule{Every: 100 * time.Millisecond, Keep: 2, Dir: dir}
	}, nil)
	for deadline := time.Now().Add(10 * time.Second); h.gauge(`factory_backups_total{outcome="ok"}`) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 3 scheduled backups in 10s:\n%s", grep(h.metrics(), "factory_backup"))
		}
	}
	entries, _ := os.ReadDir(dir)
	var kept []string
	for _, e := range entries {
		kept = append(kept, e.Name())
	}
	if len(kept) < 2 || len(kept) > 3 { // a third may be between its write and the prune
		t.Errorf("kept %v", kept)
	}
	if h.gauge("factory_backup_last_success_timestamp_seconds") == 0 {
		t.Error("no last success in the metrics")
	}

	blocked := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(blocked, nil, 0o600)
	h = startConfigured(t, func(c *server.Config) {
		c.Backups = &backup.Schedule{Every: 100 * time.Millisecond, Keep: 2, Dir: blocked}
	}, nil)
	for deadline := time.Now().Add(10 * time.Second); h.gauge(`factory_backups_total{outcome="error"}`) < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a failing schedule was not counted")
		}
	}
	rec, err := backup.LastRecords(h.store)
	if err != nil || rec.LastFailure == nil || !strings.Contains(rec.LastFailure.Error, "a-file") {
		t.Errorf("the failure is not remembered: %+v %v", rec.LastFailure, err)
	}
}

func grep(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
