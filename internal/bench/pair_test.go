package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkIngressPair compares the ingress of this tree (B) with that of
// an earlier revision (A, BENCH_BASE_REV) measured at the same moment: both
// servers run at once, each with its own store and its own wrk (one
// thread, 32 connections, the same 1 KB durable deliveries), for 5 s after
// a 1 s warm-up, BENCH_PAIRS times (default 5). Sequential runs cannot see
// a 5% change on this machine; simultaneous ones see the same machine.
// It reports the median B/A throughput ratio (A against itself gives
// 0.97-1.03). Skipped unless BENCH_BASE_REV is set.
func BenchmarkIngressPair(b *testing.B) {
	rev := os.Getenv("BENCH_BASE_REV")
	if rev == "" {
		b.Skip("set BENCH_BASE_REV to the revision to compare with")
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		b.Skip("wrk is not installed (apt-get install wrk; make bench does it)")
	}
	pairs := 5
	if v := os.Getenv("BENCH_PAIRS"); v != "" {
		pairs, _ = strconv.Atoi(v)
	}
	dir := b.TempDir()
	oldBin := buildRevision(b, rev, dir)
	newBin := filepath.Join(dir, "factory-new")
	if out, err := exec.Command("go", "build", "-o", newBin, "../../cmd/factory").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	pad := strings.Repeat("x", 1024-len(`{"event":"build.failed","pad":""}`))
	script := strings.Replace(wrkScript, "PAD", pad, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var ratios []float64
		for p := 0; p < pairs; p++ {
			a, bb := onePair(b, oldBin, newBin, filepath.Join(dir, fmt.Sprint("pair-", i, "-", p)), script)
			ratios = append(ratios, bb/a)
			fmt.Fprintf(os.Stderr, "pair %d: A %.0f req/s, B %.0f req/s, B/A %.3f\n", p+1, a, bb, bb/a)
		}
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "B/A-median")
		b.ReportMetric(ratios[0], "B/A-min")
		b.ReportMetric(ratios[len(ratios)-1], "B/A-max")
	}
}

// buildRevision builds cmd/factory of a git revision, from a temporary
// worktree.
func buildRevision(b *testing.B, rev, dir string) string {
	tree := filepath.Join(dir, "base-tree")
	if out, err := exec.Command("git", "worktree", "add", "--detach", tree, rev).CombinedOutput(); err != nil {
		b.Fatalf("git worktree add %s: %v\n%s", rev, err, out)
	}
	defer exec.Command("git", "worktree", "remove", "--force", tree).Run()
	bin := filepath.Join(dir, "factory-old")
	build := exec.Command("go", "build", "-o", bin, "./cmd/factory")
	build.Dir = tree
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build %s: %v\n%s", rev, err, out)
	}
	return bin
}

// onePair starts both servers on fresh stores and drives them at once.
func onePair(b *testing.B, oldBin, newBin, dir, script string) (oldRPS, newRPS float64) {
	oldURL, stopOld := serveBinary(b, oldBin, filepath.Join(dir, "a"))
	defer stopOld()
	newURL, stopNew := serveBinary(b, newBin, filepath.Join(dir, "b"))
	defer stopNew()
	var results [2]wrkResult
	drive := func(d time.Duration) {
		var wg sync.WaitGroup
		for k, url := range []string{oldURL, newURL} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[k] = runWrkWith(b, url+"/webhooks/w/"+benchUID, script, d, "-t1", "-c32")
			}()
		}
		wg.Wait()
	}
	drive(time.Second) // warm-up
	drive(5 * time.Second)
	for k, url := range []string{oldURL, newURL} {
		if results[k].non2xx > 0 || duplicates(b, url) > 0 {
			b.Fatalf("server %d: %d deliveries not accepted, or duplicates", k, results[k].non2xx)
		}
	}
	return results[0].rps, results[1].rps
}
