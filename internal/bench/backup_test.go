package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"factory/internal/backup"
	"factory/internal/store"
	"factory/internal/store/storetest"
	"factory/internal/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeTemplates()
	os.Exit(code)
}

// templates are filled stores, by size, made once per process and cloned
// (store.Checkpoint: hard links) for each run of a benchmark.
var templates struct {
	sync.Mutex
	stores map[int]*store.Store
	dirs   []string
}

// filledStore clones a store of n finished runs, compacted, into dir/data.
func filledStore(b *testing.B, n int, dir string) {
	templates.Lock()
	defer templates.Unlock()
	s := templates.stores[n]
	if s == nil {
		tdir, err := os.MkdirTemp("", "factory-bench-runs-")
		if err != nil {
			b.Fatal(err)
		}
		templates.dirs = append(templates.dirs, tdir)
		if s, err = store.Open(tdir); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		storetest.FillRuns(b, s, n, time.Now().Add(-time.Duration(n)*storetest.RunSpacing), "")
		filled := time.Since(start)
		if err := s.Compact(); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "filled a store with %d runs in %v, compacted it in %v\n", n, filled.Round(time.Second), (time.Since(start) - filled).Round(time.Second))
		if templates.stores == nil {
			templates.stores = map[int]*store.Store{}
		}
		templates.stores[n] = s
	}
	if err := s.Checkpoint(filepath.Join(dir, "data")); err != nil {
		b.Fatal(err)
	}
}

func removeTemplates() {
	for _, s := range templates.stores {
		s.Close()
	}
	for _, d := range templates.dirs {
		os.RemoveAll(d)
	}
}

// BenchmarkBackupWhileServing backs up a served store of 1,000,000 runs
// (BENCH_BACKUP_RUNS changes it) through the API while wrk loads the
// ingress with durable deliveries (64 connections, as
// BenchmarkIngressVsBareHandler), and compares the ingress's throughput
// during the backup with its throughput without one, measured just before
// and just after, in the same run. It reports the backup's time and size
// and the ratio. Target: at least 0.8.
func BenchmarkBackupWhileServing(b *testing.B) {
	if _, err := exec.LookPath("wrk"); err != nil {
		b.Skip("wrk is not installed (apt-get install wrk; make bench does it)")
	}
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_BACKUP_RUNS")); err == nil {
		n = v
	}
	bin := testbin.Factory(b)
	pad := strings.Repeat("x", 1024-len(`{"event":"build.failed","pad":""}`))
	script := strings.Replace(wrkScript, "PAD", pad, 1)
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		filledStore(b, n, dir)
		base, stop := serveBinary(b, bin, dir)
		url := base + "/webhooks/w/" + benchUID
		runWrk(b, url, script, time.Second) // warm-up
		before := wrkSlices(b, url, script, 6*time.Second)
		res := make(chan backupRun, 1)
		go func() { res <- takeBackup(base, filepath.Join(dir, "backup.tar.gz")) }()
		during, bk := wrkUntil(b, url, script, res)
		after := wrkSlices(b, url, script, 6*time.Second)
		without := append(append([]wrkResult(nil), before...), after...)
		stop()
		if bk.err != nil {
			b.Fatal(bk.err)
		}
		m := verifyBackup(b, filepath.Join(dir, "backup.tar.gz"))
		if m.Counts.Runs != n {
			b.Fatalf("the backup holds %d runs, not %d", m.Counts.Runs, n)
		}
		if len(during) == 0 {
			b.Fatalf("the backup took %v, less than one slice of load: nothing was measured", bk.took)
		}
		ratio := meanRPS(during) / meanRPS(without)
		b.ReportMetric(bk.took.Seconds(), "backup-s")
		b.ReportMetric(float64(bk.bytes)/(1<<20), "backup-MiB")
		b.ReportMetric(float64(m.TotalBytes)/(1<<20), "store-MiB")
		b.ReportMetric(meanRPS(without), "ingress-req/s")
		b.ReportMetric(meanRPS(during), "during-backup-req/s")
		b.ReportMetric(ratio, "throughput-ratio")
		fmt.Fprintf(os.Stderr, "backup of %d runs: %v, %.0f MiB (store %.0f MiB); ingress %.0f req/s during it, %.0f without (%.0f before, %.0f after; ratio %.2f)\n",
			n, bk.took.Round(100*time.Millisecond), float64(bk.bytes)/(1<<20), float64(m.TotalBytes)/(1<<20), meanRPS(during), meanRPS(without),
			meanRPS(before), meanRPS(after), ratio)
		fmt.Fprintf(os.Stderr, "  slices (req/s): before %v, during %v, after %v\n", rates(before), rates(during), rates(after))
	}
}

// wrkSlices drives the ingress for d in one-second slices.
func wrkSlices(b *testing.B, url, script string, d time.Duration) []wrkResult {
	var out []wrkResult
	for t := time.Duration(0); t < d; t += time.Second {
		out = append(out, checked(b, runWrk(b, url, script, time.Second)))
	}
	return out
}

// wrkUntil drives the ingress in one-second slices until the backup ends;
// it keeps the slices that ended before it did.
func wrkUntil(b *testing.B, url, script string, res <-chan backupRun) ([]wrkResult, backupRun) {
	var out []wrkResult
	for {
		r := checked(b, runWrk(b, url, script, time.Second))
		select {
		case bk := <-res:
			return out, bk
		default:
			out = append(out, r)
		}
	}
}

func rates(rs []wrkResult) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = int(r.rps)
	}
	return out
}

func checked(b *testing.B, r wrkResult) wrkResult {
	if r.non2xx > 0 {
		b.Fatalf("%d deliveries were not accepted", r.non2xx)
	}
	return r
}

type backupRun struct {
	took  time.Duration
	bytes int64
	err   error
}

// takeBackup asks the server for a backup and writes it to path.
func takeBackup(base, path string) backupRun {
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/admin/backups", nil)
	req.Header.Set("Authorization", "Bearer "+adminKeyOf(base))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return backupRun{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(resp.Body)
		return backupRun{err: fmt.Errorf("backup: %d %s", resp.StatusCode, msg)}
	}
	f, err := os.Create(path)
	if err != nil {
		return backupRun{err: err}
	}
	defer f.Close()
	n, err := io.Copy(f, resp.Body)
	return backupRun{took: time.Since(start), bytes: n, err: err}
}

func verifyBackup(b *testing.B, path string) *backup.Manifest {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	m, err := backup.Verify(f, backup.DefaultLimits)
	if err != nil {
		b.Fatal(err)
	}
	return m
}
