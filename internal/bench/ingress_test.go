// Package bench holds benchmarks of whole processes under an external load
// generator. They need wrk (Debian's package; `make bench` installs it).
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const benchUID = "wh_0000000000000000bench1"
const benchToken = "bench-token-0123456789abcdefghijklmnopqr"

// wrkScript posts 1 KB JSON deliveries with a token and a unique
// X-Service-Delivery-Id, so that every one is accepted and stored. RUN is
// replaced by a nonce per wrk run: Lua's math.random is not seeded, so IDs
// made from it would repeat in every run (and be answered as duplicates).
const wrkScript = `
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer ` + benchToken + `"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"event":"build.failed","pad":"` + "PAD" + `"}'
local n = 0
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", "RUN-" .. threads)
end
function request()
  n = n + 1
  wrk.headers["X-Service-Delivery-Id"] = tid .. "-" .. n
  return wrk.format(nil, nil, nil, nil)
end
`

type wrkResult struct {
	rps    float64
	p99    time.Duration
	non2xx int
}

// runWrk drives a URL for a duration at 64 connections, with delivery IDs
// no earlier run used.
func runWrk(b *testing.B, url, template string, d time.Duration) wrkResult {
	return runWrkWith(b, url, template, d, "-t2", "-c64")
}

// runWrkWith drives a URL with wrk's thread and connection flags.
func runWrkWith(b *testing.B, url, template string, d time.Duration, threads, conns string) wrkResult {
	b.Helper()
	script := filepath.Join(b.TempDir(), "post.lua")
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := os.WriteFile(script, []byte(strings.Replace(template, "RUN", nonce, 1)), 0o644); err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command("wrk", threads, conns, "-d"+d.String(), "--latency", "-s", script, url).CombinedOutput()
	if err != nil {
		b.Fatalf("wrk: %v\n%s", err, out)
	}
	var r wrkResult
	if m := regexp.MustCompile(`Requests/sec:\s+([\d.]+)`).FindSubmatch(out); m != nil {
		r.rps, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := regexp.MustCompile(`\s99%\s+([\d.]+)(us|ms|s)`).FindSubmatch(out); m != nil {
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[string(m[2])]
		r.p99 = time.Duration(v * float64(unit))
	}
	if m := regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`).FindSubmatch(out); m != nil {
		r.non2xx, _ = strconv.Atoi(string(m[1]))
	}
	if r.rps == 0 || r.p99 == 0 {
		b.Fatalf("cannot read wrk's output:\n%s", out)
	}
	return r
}

// BenchmarkIngressVsBareHandler compares the real server (a `factory serve`
// process, durable writes, rate limit off) with a bare net/http handler
// answering 202, under the same wrk load: 64 connections, 1 KB token-mode
// deliveries, each side for 10 s (BENCH_SECONDS) in alternating 2 s
// slices. It reports both throughputs, their ratio and both p99s (the
// median of the slices'). Targets: ratio at least 0.45, p99 at most 3x
// the bare handler's.
func BenchmarkIngressVsBareHandler(b *testing.B) {
	if _, err := exec.LookPath("wrk"); err != nil {
		b.Skip("wrk is not installed (apt-get install wrk; make bench does it)")
	}
	dir := b.TempDir()
	pad := strings.Repeat("x", 1024-len(`{"event":"build.failed","pad":""}`))
	script := strings.Replace(wrkScript, "PAD", pad, 1)
	duration := 10 * time.Second // per side, in slices
	if v := os.Getenv("BENCH_SECONDS"); v != "" {
		s, _ := strconv.Atoi(v)
		duration = time.Duration(s) * time.Second
	}

	bareAddr, stopBare := startBare(b)
	defer stopBare()
	base, stopReal := startServer(b, dir)
	defer stopReal()

	syscall.Sync() // the build and set-up wrote files: write them back before measuring
	b.ResetTimer()
	bareURL, realURL := "http://"+bareAddr+"/webhooks/w/"+benchUID, base+"/webhooks/w/"+benchUID
	for i := 0; i < b.N; i++ {
		runWrk(b, bareURL, script, time.Second) // warm-ups
		runWrk(b, realURL, script, time.Second)
		// Alternate short slices, so that both sides see the same machine:
		// its speed drifts by a factor of two over tens of seconds.
		var bareR, realR []wrkResult
		for slice := time.Duration(0); slice < duration; slice += sliceLength {
			bareR = append(bareR, runWrk(b, bareURL, script, sliceLength))
			realR = append(realR, runWrk(b, realURL, script, sliceLength))
		}
		bareRPS, realRPS := meanRPS(bareR), meanRPS(realR)
		bareP99, realP99 := medianP99(bareR), medianP99(realR)
		for _, r := range realR {
			if r.non2xx > 0 {
				b.Fatalf("%d deliveries were not accepted", r.non2xx)
			}
		}
		if dups := duplicates(b, base); dups > 0 {
			b.Fatalf("%d deliveries were answered as duplicates: the load must be all new deliveries", dups)
		}
		b.ReportMetric(bareRPS, "bare-req/s")
		b.ReportMetric(realRPS, "ingress-req/s")
		b.ReportMetric(realRPS/bareRPS, "throughput-ratio")
		b.ReportMetric(float64(bareP99.Microseconds())/1000, "bare-p99-ms")
		b.ReportMetric(float64(realP99.Microseconds())/1000, "ingress-p99-ms")
		b.ReportMetric(float64(realP99)/float64(bareP99), "p99-ratio")
		fmt.Fprintf(os.Stderr, "ingress %.0f req/s vs bare %.0f req/s (ratio %.2f); p99 %v vs %v (ratio %.2f)\n",
			realRPS, bareRPS, realRPS/bareRPS, realP99, bareP99, float64(realP99)/float64(bareP99))
	}
}

// startBare starts the bare handler: read the body, answer 202.
func startBare(b *testing.B) (addr string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	bare := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, io.LimitReader(r.Body, 256<<10+1))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"delivery_id":"dlv_bare"}` + "\n"))
	})}
	go bare.Serve(ln)
	return ln.Addr().String(), func() { bare.Close() }
}

// startServer builds the real server and starts it as a user runs it: one
// token webhook with a known UID, the rate limit off. It returns the
// server's base URL once it is ready.
func startServer(b *testing.B, dir string) (base string, stop func()) {
	bin := filepath.Join(dir, "factory")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/factory").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	return serveBinary(b, bin, dir)
}

// serveBinary starts a built server with its own store under dir.
func serveBinary(b *testing.B, bin, dir string) (base string, stop func()) {
	data, repo := filepath.Join(dir, "data"), filepath.Join(dir, "repo")
	os.MkdirAll(filepath.Join(repo, "webhooks"), 0o755)
	os.WriteFile(filepath.Join(repo, "webhooks", "hook.yaml"), []byte("authMode: token\nsecretName: tok\n"), 0o644)
	run := func(stdin string, args ...string) {
		cmd := exec.Command(bin, append([]string{"--data", data}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	run(benchToken, "secrets", "create", "tok", "--from-stdin")
	run("", "webhooks", "import", "bench/hook", "--uid", benchUID)
	srv := exec.Command(bin, "--data", data, "serve", "--source", repo, "--name", "bench", "--listen", "127.0.0.1:0", "--nats-listen", "off", "--ingress-rate-limit", "-1")
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	stop = func() { srv.Process.Signal(os.Interrupt); srv.Wait() }
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var info struct{ URL string }
		if raw, err := os.ReadFile(filepath.Join(data, "server.json")); err == nil && json.Unmarshal(raw, &info) == nil {
			if resp, err := http.Get(info.URL + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					key, _ := os.ReadFile(filepath.Join(data, "admin-api-key"))
					adminKeys.Store(info.URL, strings.TrimSpace(string(key)))
					return info.URL, stop
				}
			}
		}
	}
	stop()
	b.Fatal("the server did not start")
	return "", nil
}

// sliceLength is how long each side is driven before the other's turn.
const sliceLength = 2 * time.Second

// meanRPS is the throughput over slices of equal length.
func meanRPS(rs []wrkResult) float64 {
	sum := 0.0
	for _, r := range rs {
		sum += r.rps
	}
	return sum / float64(len(rs))
}

// medianP99 is the median of the slices' 99th percentiles.
func medianP99(rs []wrkResult) time.Duration {
	p := make([]time.Duration, len(rs))
	for i, r := range rs {
		p[i] = r.p99
	}
	slices.Sort(p)
	return p[len(p)/2]
}

// adminKeys holds the admin API key of each server started, by base URL.
var adminKeys sync.Map

func adminKeyOf(base string) string {
	k, _ := adminKeys.Load(base)
	s, _ := k.(string)
	return s
}

// duplicates reads how many deliveries the server logged as duplicates.
func duplicates(b *testing.B, base string) int {
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminKeyOf(base))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`factory_deliveries_total\{label="Duplicate",webhook="[^"]*"[^}]*\} (\d+)`).FindSubmatch(raw)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
