package workers_test

import (
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"factory/client"
)

// BenchmarkWorkers (docs/spec/workers.md, Measured): the control plane and
// 1, then 3, worker processes (--max-runs 4 each) on this machine run 200
// exec runs of 1 s each; it reports runs per second and the claim latency
// the control plane logged (from publishing a run to hearing a worker took
// it), p50 and p99, of runs that found a free worker. Target: 3 workers at
// least 2.5x one; claim p99 at most 50 ms.
func BenchmarkWorkers(b *testing.B) {
	const runs = 200
	for i := 0; i < b.N; i++ {
		rate := map[int]float64{}
		for _, n := range []int{1, 3} {
			cl := controlPlane(b, 10*time.Second)
			var ws []*proc
			for w := range n {
				ws = append(ws, cl.worker(b, fmt.Sprintf("w%d", w+1), 4))
			}
			time.Sleep(500 * time.Millisecond) // connected
			began := time.Now()
			var ids []string
			for r := range runs {
				ids = append(ids, cl.create(b, fmt.Sprintf("bench %d", r)))
			}
			for _, id := range ids {
				cl.wait(b, id, 5*time.Minute, func(r *client.Run) bool { return r.State.Terminal() })
			}
			rate[n] = runs / time.Since(began).Seconds()
			b.ReportMetric(rate[n], fmt.Sprintf("runs/s-%dworkers", n))
			// Claim latency with a free worker: one run at a time.
			var claims []time.Duration
			for r := range 40 {
				id := cl.create(b, fmt.Sprintf("quick %d", r))
				cl.wait(b, id, time.Minute, func(r *client.Run) bool { return r.State.Terminal() })
			}
			claims = claimLatencies(b, cl, 40)
			slices.Sort(claims)
			b.ReportMetric(float64(claims[len(claims)/2].Microseconds())/1000, fmt.Sprintf("claim-p50-ms-%dworkers", n))
			b.ReportMetric(float64(claims[len(claims)*99/100].Microseconds())/1000, fmt.Sprintf("claim-p99-ms-%dworkers", n))
			for _, w := range ws {
				_ = w.cmd.Process.Kill()
			}
		}
		b.ReportMetric(rate[3]/rate[1], "speedup")
	}
}

// BenchmarkLocalWorker: what the default (the embedded NATS server and the
// in-process worker) costs a run on one machine, against --nats-listen off
// (every run in the server's process): runs of an agent that exits at
// once, one at a time, from creation to end as the server records them.
func BenchmarkLocalWorker(b *testing.B) {
	const runs = 40
	for i := 0; i < b.N; i++ {
		p50 := map[string]time.Duration{}
		for _, mode := range []string{"off", "local"} {
			extra := []string{"--nats-listen", "off"}
			if mode == "local" {
				extra = []string{"--no-local-worker=false"}
			}
			cl := controlPlane(b, 10*time.Second, extra...)
			var took []time.Duration
			for r := range runs {
				id := cl.create(b, fmt.Sprintf("instant %d", r))
				run := cl.wait(b, id, time.Minute, func(r *client.Run) bool { return r.State.Terminal() })
				took = append(took, run.FinishedAt.Sub(run.CreatedAt))
			}
			slices.Sort(took)
			p50[mode] = took[len(took)/2]
			b.ReportMetric(float64(p50[mode].Microseconds())/1000, "run-p50-ms-"+mode)
			b.ReportMetric(float64(took[len(took)*9/10].Microseconds())/1000, "run-p90-ms-"+mode)
		}
		b.ReportMetric(float64(p50["local"])/float64(p50["off"]), "local/off")
	}
}

var claimedAfter = regexp.MustCompile(`msg="run claimed" run=\S+ worker=\S+ after=(\S+)`)

// claimLatencies are the last n claim latencies the control plane logged.
func claimLatencies(b testing.TB, cl *cluster, n int) []time.Duration {
	var out []time.Duration
	for _, m := range claimedAfter.FindAllStringSubmatch(cl.proc.log(), -1) {
		d, err := time.ParseDuration(m[1])
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, d)
	}
	if len(out) < n {
		b.Fatalf("the control plane logged %d claims", len(out))
	}
	return out[len(out)-n:]
}
