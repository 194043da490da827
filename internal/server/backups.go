package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"factory/internal/backup"
)

// backups are the server's backups: one at a time (a checkpoint holds
// files the store would otherwise delete), through the API or on the
// configuration's schedule, each counted, and the last one's time and size
// exposed (docs/operations.md).
type backups struct {
	mu sync.Mutex

	total       *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	lastBytes   prometheus.Gauge
	lastSeconds prometheus.Gauge
}

func newBackups(reg *prometheus.Registry) *backups {
	b := &backups{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factory_backups_total",
			Help: "Backups of the store this server made (through the API or on schedule), by outcome: ok or error.",
		}, []string{"outcome"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "factory_backup_last_success_timestamp_seconds",
			Help: "The instant of the last backup that succeeded (Unix time; 0: none yet).",
		}),
		lastBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "factory_backup_last_size_bytes",
			Help: "The size of the last backup that succeeded.",
		}),
		lastSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "factory_backup_last_duration_seconds",
			Help: "How long the last backup that succeeded took.",
		}),
	}
	reg.MustRegister(b.total, b.lastSuccess, b.lastBytes, b.lastSeconds)
	b.total.WithLabelValues("ok")
	b.total.WithLabelValues("error")
	return b
}

// observe counts a backup, and shows the last one that succeeded.
func (b *backups) observe(r backup.Record, err error) {
	if err != nil {
		b.total.WithLabelValues("error").Inc()
		return
	}
	b.total.WithLabelValues("ok").Inc()
	b.show(r)
}

func (b *backups) show(r backup.Record) {
	b.lastSuccess.Set(float64(r.At.UnixNano()) / 1e9)
	b.lastBytes.Set(float64(r.Bytes))
	b.lastSeconds.Set(r.Seconds)
}

// takeBackup writes a backup of the store to w, one at a time.
func (s *Server) takeBackup(w io.Writer) (*backup.Result, error) {
	s.backups.mu.Lock()
	defer s.backups.mu.Unlock()
	key := ""
	if s.applier.Keyring != nil {
		key = s.applier.Keyring.Fingerprint()
	}
	return backup.Take(s.store, w, backup.Options{Binary: s.cfg.Version, SecretsKey: key, CPUShare: backupCPUShare})
}

// backupCPUShare is the share of one core a backup's hashing and
// compressing take while the server serves: with it, ingress under a
// flood keeps at least 0.8 of its rate during a backup (BENCHMARKS.md,
// "Backups"); a backup of a large store takes longer.
const backupCPUShare = 0.25

// streamBackup serves POST /v1/admin/backups: the archive, streamed as it
// is made. An error before the first byte is a problem; after it, the
// connection is cut, so that the client sees a truncated archive (which
// its reader refuses) rather than a short one it might keep.
func (s *Server) streamBackup(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", `attachment; filename="`+backup.FileName(time.Now())+`"`)
	cw := &firstByte{w: w}
	res, err := s.takeBackup(cw)
	if err != nil {
		s.remember(backup.Record{At: time.Now().UTC()}, err)
		if !cw.wrote {
			w.Header().Del("Content-Disposition")
			return err
		}
		s.log.Error("backup through the API failed mid-stream", "err", err)
		panic(http.ErrAbortHandler)
	}
	s.remember(res.Record(""), nil)
	s.log.Info("backed up the store through the API", "instant", res.Manifest.CreatedAt, "bytes", res.Bytes,
		"took", res.Took.Round(time.Millisecond), "caller", callerName(r))
	return nil
}

// remember records a backup in the store and the metrics.
func (s *Server) remember(r backup.Record, err error) {
	if rerr := backup.Remember(s.store, r, err); rerr != nil {
		s.log.Error("recording the backup", "err", rerr)
	}
	s.backups.observe(r, err)
}

// backupStatus serves GET /v1/admin/backups: the last backup that
// succeeded, the last that failed, and the schedule.
func (s *Server) backupStatus(w http.ResponseWriter, r *http.Request) error {
	rec, err := backup.LastRecords(s.store)
	if err != nil {
		return err
	}
	out := map[string]any{"last": rec.Last, "last_failure": rec.LastFailure, "schedule": nil}
	if sc := s.cfg.Backups; sc != nil {
		out["schedule"] = map[string]any{"every": sc.Every.String(), "keep": sc.Keep, "dir": sc.Dir}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// scheduleBackups makes the configuration's scheduled backups until ctx
// ends.
func (s *Server) scheduleBackups(ctx context.Context, log *slog.Logger) {
	sc := &backup.Scheduler{Schedule: *s.cfg.Backups, Take: s.takeBackup, Store: s.store, Log: log, Done: s.backups.observe}
	log.Info("scheduled backups", "every", sc.Every, "keep", sc.Keep, "dir", sc.Dir)
	sc.Run(ctx)
}

// firstByte notes whether anything was written.
type firstByte struct {
	w     io.Writer
	wrote bool
}

func (f *firstByte) Write(p []byte) (int, error) {
	f.wrote = f.wrote || len(p) > 0
	return f.w.Write(p)
}

func callerName(r *http.Request) string {
	if k := callerKey(r); k != nil {
		return k.Name
	}
	return ""
}
