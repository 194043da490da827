package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"factory/internal/testfactory"
)

// BenchmarkDryRunProcess runs `factory reconcile --dry-run` on a generated
// factory of 20 webhooks and 1,000 automations as a whole process, and
// `factory version` as the baseline, alternating them so that drift of the
// machine hits both alike. It reports the median of each and their ratio.
func BenchmarkDryRunProcess(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "factory")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	repo := filepath.Join(dir, "repo")
	testfactory.Generate(b, repo, 20, 1000)
	run := func(args ...string) time.Duration {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "FACTORY_DATA="+filepath.Join(dir, "no-store"))
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", args, err, out)
		}
		return time.Since(start)
	}
	var version, dryRun []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		version = append(version, run("version"))
		dryRun = append(dryRun, run("reconcile", "--dry-run", "--source", repo))
	}
	v, d := median(version), median(dryRun)
	b.ReportMetric(float64(v.Microseconds())/1000, "version-ms")
	b.ReportMetric(float64(d.Microseconds())/1000, "dryrun-ms")
	b.ReportMetric(float64(d)/float64(v), "dryrun/version")
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
