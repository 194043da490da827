package bench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
// while the backup works with its throughput while it does not, in the
// same run.
//
// This machine's speed drifts by a factor of two over tens of seconds,
// more than a backup takes, so "before" and "after" baselines do not
// bracket it fairly. The client reads the backup in alternating 2 s
// slices instead (which comes first alternates from pair to pair): while it reads, the server works on the backup; while
// it does not (its receive buffer is small), the server's write blocks and
// the backup waits; wrk measures each slice. The throughput ratio is the
// mean of the reading slices over the mean of the waiting ones. Then a
// second backup is read without pauses, under the same load, for its
// time and size (and, for reference, its ratio to the slices just before
// and after it). Target: a ratio of at least 0.8.
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

		working, waiting, gk := interleavedBackup(b, base, url, script, filepath.Join(dir, "gated.tar.gz"))
		ratio := meanRPS(working) / meanRPS(waiting)

		// Continuous: the backup's time and size under the same load.
		before := wrkSlices(b, url, script, 4*time.Second)
		cont := startBackup(base, filepath.Join(dir, "backup.tar.gz"))
		cont.reading.Store(true)
		var during []wrkResult
		for !cont.finished() {
			r := checked(b, runWrk(b, url, script, time.Second))
			if !cont.finished() {
				during = append(during, r)
			}
		}
		after := wrkSlices(b, url, script, 4*time.Second)
		stop()
		bk := cont.wait()
		if bk.err != nil {
			b.Fatal(bk.err)
		}
		m := verifyBackup(b, filepath.Join(dir, "backup.tar.gz"))
		if m.Counts.Runs != n {
			b.Fatalf("the backup holds %d runs, not %d", m.Counts.Runs, n)
		}
		verifyBackup(b, filepath.Join(dir, "gated.tar.gz"))
		around := meanRPS(append(append([]wrkResult(nil), before...), after...))
		b.ReportMetric(ratio, "throughput-ratio")
		b.ReportMetric(meanRPS(waiting), "ingress-req/s")
		b.ReportMetric(meanRPS(working), "while-backing-up-req/s")
		b.ReportMetric(bk.took.Seconds(), "backup-s")
		b.ReportMetric(float64(bk.bytes)/(1<<20), "backup-MiB")
		b.ReportMetric(float64(m.TotalBytes)/(1<<20), "store-MiB")
		fmt.Fprintf(os.Stderr, "backup of %d runs under load: interleaved, ingress %.0f req/s while it works, %.0f while it waits (ratio %.2f, %d pairs of 2 s; it read for %v in all)\n"+
			"  continuous: %v, %.0f MiB from a store of %.0f MiB; ingress %.0f req/s during it, %.0f in the 4 s before and after (%.2f)\n"+
			"  slices (req/s): working %v, waiting %v\n",
			n, meanRPS(working), meanRPS(waiting), ratio, len(working), gk.took-time.Duration(len(waiting))*2*time.Second,
			bk.took.Round(100*time.Millisecond), float64(bk.bytes)/(1<<20), float64(m.TotalBytes)/(1<<20), meanRPS(during), around, meanRPS(during)/around,
			rates(working), rates(waiting))
	}
}

// interleavedBackup reads a backup in alternating 2 s slices of reading
// and waiting while wrk drives the ingress, and returns the slices of each
// (pairs that both ran whole, while the backup lasted).
func interleavedBackup(b *testing.B, base, url, script, path string) (working, waiting []wrkResult, _ backupRun) {
	gated := startBackup(base, path)
	for pair := 0; !gated.finished(); pair++ {
		// Which comes first alternates, so that neither side is always
		// the one after the other.
		var on, off wrkResult
		if pair%2 == 1 {
			off = checked(b, runWrk(b, url, script, 2*time.Second))
		}
		gated.reading.Store(true)
		on = checked(b, runWrk(b, url, script, 2*time.Second))
		gated.reading.Store(false)
		if gated.finished() {
			break // it ended in this slice: not a whole slice of work
		}
		if pair%2 == 0 {
			off = checked(b, runWrk(b, url, script, 2*time.Second))
		}
		working, waiting = append(working, on), append(waiting, off)
	}
	gk := gated.wait()
	if gk.err != nil {
		b.Fatal(gk.err)
	}
	if len(working) == 0 {
		b.Fatalf("the backup took %v, less than one slice of load: nothing was measured", gk.took)
	}
	return working, waiting, gk
}

// wrkSlices drives the ingress for d in one-second slices.
func wrkSlices(b *testing.B, url, script string, d time.Duration) []wrkResult {
	var out []wrkResult
	for t := time.Duration(0); t < d; t += time.Second {
		out = append(out, checked(b, runWrk(b, url, script, time.Second)))
	}
	return out
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

// streamedBackup is a backup the server streams to this client, which
// reads it only while reading is set: while it is not, the server's
// writes block (the client's receive buffer is small) and the backup
// waits.
type streamedBackup struct {
	reading atomic.Bool
	done    chan backupRun
	ended   atomic.Bool
}

// startBackup asks the server for a backup and writes it to path.
func startBackup(base, path string) *streamedBackup {
	sb := &streamedBackup{done: make(chan backupRun, 1)}
	go func() {
		r := sb.read(base, path)
		sb.ended.Store(true)
		sb.done <- r
	}()
	return sb
}

func (sb *streamedBackup) finished() bool { return sb.ended.Load() }

func (sb *streamedBackup) wait() backupRun { return <-sb.done }

func (sb *streamedBackup) read(base, path string) backupRun {
	start := time.Now()
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 32<<10) })
	}}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/admin/backups", nil)
	req.Header.Set("Authorization", "Bearer "+adminKeyOf(base))
	resp, err := hc.Do(req)
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
	var n int64
	buf := make([]byte, 16<<10)
	for {
		if !sb.reading.Load() {
			time.Sleep(time.Millisecond)
			continue
		}
		k, err := resp.Body.Read(buf)
		f.Write(buf[:k])
		n += int64(k)
		if err == io.EOF {
			return backupRun{took: time.Since(start), bytes: n}
		}
		if err != nil {
			return backupRun{err: err}
		}
	}
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
