package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"factory"

	"factory/internal/backup"
	"factory/internal/store"
)

const (
	crashUID   = "wh_0000000000000000back01"
	crashToken = "backup-test-token-0123456789abcdefghijk"
)

// TestRestoreABackupTakenUnderLoad backs up a server (a real `factory
// serve` process, its runs on a `factory worker` process through the
// embedded NATS server) while deliveries and runs are being written, kills
// both with SIGKILL, restores the backup into a new data directory and
// serves it.
// There, the webhook's UID and its secret (with the original key), every
// API key and the worker's credentials work; every delivery answered
// before the backup's instant is in the log with its payload, and sending
// one again within the duplicate window is a duplicate; every run that
// ended before the instant is as it ended; every run in progress at the
// instant reads ERROR, retryable, from the moment the server answers.
func TestRestoreABackupTakenUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess crash test")
	}
	if _, err := exec.LookPath("factory"); err != nil {
		t.Skip("the factory command is not on PATH (TestMain puts it there)")
	}
	work := t.TempDir()
	a, b := filepath.Join(work, "a"), filepath.Join(work, "b")
	runsKey, adminKey := crashSetUp(t, work, a)

	// Every run of the first server goes to a worker of its own: the runs
	// in progress at the instant are held by a worker of the machine that
	// is lost.
	srvA := startServe(t, work, a, "--no-local-worker")
	creds := factoryCmd(t, work, "", "--data", a, "workers", "create", "w1")
	writeFiles(t, work, map[string]string{"w1.creds": creds})
	workerA := startWorker(t, work, "worker-a", srvA, adminKey)

	l := &load{url: srvA.url, runsKey: runsKey, stop: make(chan struct{})}
	l.start()
	time.Sleep(700 * time.Millisecond)
	factoryCmd(t, work, "", "--data", a, "backup", "--output", "backup.tar.gz")
	time.Sleep(300 * time.Millisecond)
	srvA.kill()
	workerA.Process.Kill()
	workerA.Wait()
	l.finish()

	m := verifyFile(t, filepath.Join(work, "backup.tar.gz"))
	at := m.CreatedAt
	truth := readRuns(t, a, l.runIDs())
	before := l.acceptedBefore(at)
	if len(before) == 0 || len(truth) == 0 {
		t.Fatalf("%d deliveries and %d runs before the instant: nothing was tested", len(before), len(truth))
	}

	out := factoryCmd(t, work, "", "restore", "--input", "backup.tar.gz", "--data", b)
	if !strings.Contains(out, "Restored the backup of "+at.Format(time.RFC3339Nano)) {
		t.Fatalf("restore said:\n%s", out)
	}
	copyFile(t, filepath.Join(a, "secrets.key"), filepath.Join(b, "secrets.key"))
	copyFile(t, filepath.Join(a, AdminKeyFile), filepath.Join(b, AdminKeyFile))
	live, ended := checkRestoredStore(t, b, at, truth, before)
	if ended == 0 || len(live) == 0 {
		t.Fatalf("%d runs ended before the instant and %d were in progress: nothing was tested", ended, len(live))
	}

	srvB := startServe(t, work, b)
	defer srvB.stop(t)
	checkRestoredServer(t, srvB, live, before, runsKey, adminKey)
	checkWorkerSignsIn(t, work, srvB, adminKey)
	created := 0
	for _, r := range truth {
		if r.CreatedAt.Before(at) {
			created++
		}
	}
	t.Logf("backup at %s: %d deliveries answered before it; %d runs created before it, %d ended then, %d in progress",
		at.Format(time.RFC3339Nano), len(before), created, ended, len(live))
}

// crashSetUp writes the factory (a token webhook with a pinned UID, runs
// that sleep as long as their prompt says) and the serve configuration
// into work, and the webhook's secret and two API keys into the store of
// a (the admin key also in a's admin key file). It returns the keys.
func crashSetUp(t *testing.T, work, a string) (runsKey, adminKey string) {
	t.Helper()
	writeFiles(t, work, map[string]string{
		"repo/webhooks/hook.yaml": "authMode: token\nsecretName: tok\n",
		"serve.yaml": "factories:\n  - name: acme\n    source: repo\nruntime:\n  maxConcurrentRuns: 64\n  defaultEnvironment: agent\n" +
			"environments:\n  agent:\n    executor: exec\n    command: [\"sh\", \"-c\", \"read s; sleep \\\"$s\\\"\"]\n",
	})
	factoryCmd(t, work, "", "--data", a, "webhooks", "import", "acme/hook", "--uid", crashUID)
	factoryCmd(t, work, crashToken, "--data", a, "secrets", "create", "tok", "--from-stdin")
	runsKey = strings.TrimSpace(factoryCmd(t, work, "", "--data", a, "apikeys", "create", "ci", "--scope", "runs"))
	adminKey = strings.TrimSpace(factoryCmd(t, work, "", "--data", a, "apikeys", "create", "ops", "--scope", "admin"))
	writeFiles(t, a, map[string]string{AdminKeyFile: adminKey + "\n"})
	return runsKey, adminKey
}

// checkRestoredServer: through the restored server, the runs in progress
// at the instant read ERROR, retryable; both API keys work; the webhook's
// UID and secret take a new delivery; one answered before the instant,
// sent again, is a duplicate of itself.
func checkRestoredServer(t *testing.T, srv *serveProc, live []string, before []accepted, runsKey, adminKey string) {
	t.Helper()
	for _, id := range live {
		var r factory.RunItem
		if err := getJSON(srv.url+"/v1/agent/runs/"+id, runsKey, &r); err != nil {
			t.Fatal(err)
		}
		if r.State != factory.StateError || r.StatusMessage == nil || !r.StatusMessage.Retryable {
			t.Errorf("run %s was in progress at the instant; restored it reads %s %+v", id, r.State, r.StatusMessage)
		}
	}
	if err := getJSON(srv.url+"/v1/admin/api-keys", adminKey, nil); err != nil {
		t.Errorf("the admin key: %v", err)
	}
	if err := getJSON(srv.url+"/v1/agent/runs", runsKey, nil); err != nil {
		t.Errorf("the runs key: %v", err)
	}
	if id, dup, code := post(srv.url, "after-restore", `{"new":true}`); code != 202 || dup != "" {
		t.Errorf("a new delivery with the secret: %d %s %s", code, id, dup)
	}
	again := before[len(before)/2]
	if _, dup, code := post(srv.url, again.identity, again.body); code != 202 || dup != again.id {
		t.Errorf("delivery %s sent again: %d, duplicate of %q", again.id, code, dup)
	}
}

// checkRestoredStore reads the restored store before it is served: every
// delivery answered before the instant is there with its payload, every
// run that ended before it is as it ended. It returns the runs that were
// in progress at the instant, and how many had ended.
func checkRestoredStore(t *testing.T, dir string, at time.Time, truth map[string]*factory.Run, before []accepted) (live []string, ended int) {
	t.Helper()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, d := range before {
		p, err := s.DeliveryPayload(crashUID, d.id)
		if err != nil || string(p) != d.body {
			t.Fatalf("delivery %s was answered before the instant; restored: %q %v", d.id, p, err)
		}
	}
	for id, want := range truth {
		got, err := s.Run(id)
		done := want.FinishedAt != nil && want.FinishedAt.Before(at) && want.State.Terminal()
		if done {
			ended++
		}
		switch {
		case done && (err != nil || got.State != want.State || !got.FinishedAt.Equal(*want.FinishedAt)):
			t.Errorf("run %s ended %s at %s; restored: %+v %v", id, want.State, want.FinishedAt, got, err)
		case err != nil && want.CreatedAt.Before(at):
			t.Errorf("run %s, created before the instant, is not restored: %v", id, err)
		case err == nil && (got.State == factory.StateInProgress || got.State == factory.StateClaimed):
			live = append(live, id)
		}
	}
	return live, ended
}

// readRuns reads the runs as the killed server left them.
func readRuns(t *testing.T, dir string, ids []string) map[string]*factory.Run {
	t.Helper()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := map[string]*factory.Run{}
	for _, id := range ids {
		if r, err := s.Run(id); err == nil {
			out[id] = r
		}
	}
	return out
}

// checkWorkerSignsIn runs `factory worker` with the credentials made
// before the backup, against the restored server's NATS server, and waits
// for the server to list it connected.
func checkWorkerSignsIn(t *testing.T, work string, srv *serveProc, adminKey string) {
	t.Helper()
	w := startWorker(t, work, "worker-b", srv, adminKey)
	w.Process.Signal(syscall.SIGTERM)
	w.Wait()
}

// startWorker starts `factory worker` w1 (its credentials in w1.creds, its
// workspaces in work/dir) on a server's NATS server, taking up to 64 runs
// at once, and waits until the server lists it connected.
func startWorker(t *testing.T, work, dir string, srv *serveProc, adminKey string) *exec.Cmd {
	t.Helper()
	w := exec.Command("factory", "--data", filepath.Join(work, dir), "worker", "--creds", filepath.Join(work, "w1.creds"),
		"--nats", srv.nats, "--id", "w1", "--max-runs", "64")
	w.Dir, w.Env = work, cleanEnv()
	logs := &lockedWriter{w: &bytes.Buffer{}}
	w.Stderr = logs
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Process.Kill(); w.Wait() })
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var list struct {
			Workers []struct {
				Name      string `json:"name"`
				Connected bool   `json:"connected"`
			} `json:"workers"`
		}
		if getJSON(srv.url+"/v1/admin/workers", adminKey, &list) == nil {
			for _, x := range list.Workers {
				if x.Name == "w1" && x.Connected {
					return w
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker w1 did not sign in to %s:\n%s", srv.nats, logs.w)
		}
	}
}

// load posts deliveries from four loaders and creates runs, until stopped.
type load struct {
	url, runsKey string
	stop         chan struct{}
	wg           sync.WaitGroup
	mu           sync.Mutex
	accepted     []accepted
	runs         []string
}

// accepted is a delivery answered 202 (not a duplicate), and when the
// answer arrived.
type accepted struct {
	id, identity, body string
	at                 time.Time
}

func (l *load) start() {
	for g := 0; g < 4; g++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; l.running(); i++ {
				identity, body := fmt.Sprintf("d-%d-%d", g, i), fmt.Sprintf(`{"loader":%d,"n":%d}`, g, i)
				if id, dup, code := post(l.url, identity, body); code == 202 && dup == "" {
					l.mu.Lock()
					l.accepted = append(l.accepted, accepted{id: id, identity: identity, body: body, at: time.Now()})
					l.mu.Unlock()
				}
			}
		}()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for i := 0; l.running(); i++ {
			prompt := "0.05"
			if i%4 == 0 {
				prompt = "60" // still running at the instant
			}
			var out struct {
				RunID string `json:"run_id"`
			}
			b, _ := json.Marshal(map[string]string{"prompt": prompt})
			if postJSON(l.url+"/v1/agent/runs", l.runsKey, b, &out) == nil {
				l.mu.Lock()
				l.runs = append(l.runs, out.RunID)
				l.mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

func (l *load) running() bool {
	select {
	case <-l.stop:
		return false
	default:
		return true
	}
}

func (l *load) finish() {
	close(l.stop)
	l.wg.Wait()
}

func (l *load) acceptedBefore(at time.Time) []accepted {
	var out []accepted
	for _, d := range l.accepted {
		if d.at.Before(at) {
			out = append(out, d)
		}
	}
	return out
}

func (l *load) runIDs() []string { return l.runs }

var loadClient = &http.Client{Timeout: 5 * time.Second}

// post sends a delivery with the token and an identity; it returns the
// delivery ID, the delivery it duplicates (if it does) and the status.
func post(base, identity, body string) (id, duplicateOf string, code int) {
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/w/"+crashUID, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+crashToken)
	req.Header.Set("X-Service-Delivery-Id", identity)
	resp, err := loadClient.Do(req)
	if err != nil {
		return "", "", 0
	}
	defer resp.Body.Close()
	var out struct {
		ID          string `json:"delivery_id"`
		DuplicateOf string `json:"duplicate_of"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil {
		return "", "", resp.StatusCode
	}
	return out.ID, out.DuplicateOf, resp.StatusCode
}

func postJSON(url, key string, body []byte, out any) error {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	return doJSON(req, out)
}

func getJSON(url, key string, out any) error {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	return doJSON(req, out)
}

func doJSON(req *http.Request, out any) error {
	resp, err := loadClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// serveProc is a `factory serve` process.
type serveProc struct {
	cmd       *exec.Cmd
	url, nats string
	logs      *bytes.Buffer
}

// startServe starts `factory serve` on a data directory (loopback, any
// free ports, no ingress rate limit, and args) and waits until it is
// ready.
func startServe(t *testing.T, work, data string, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command("factory", append([]string{"--data", data, "serve", "--config", "serve.yaml", "--listen", "127.0.0.1:0",
		"--nats-listen", "127.0.0.1:0", "--ingress-rate-limit", "-1"}, args...)...)
	cmd.Dir, cmd.Env = work, cleanEnv()
	p := &serveProc{cmd: cmd, logs: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = io.Discard, &lockedWriter{w: p.logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(data, "server.json"))
		var info struct {
			URL  string `json:"url"`
			NATS string `json:"nats_url"`
		}
		if err != nil || json.Unmarshal(b, &info) != nil {
			continue
		}
		if resp, err := http.Get(info.URL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				p.url, p.nats = info.URL, info.NATS
				return p
			}
		}
	}
	t.Fatalf("the server of %s did not start:\n%s", data, p.logs)
	return nil
}

func (p *serveProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

func (p *serveProc) stop(t *testing.T) {
	p.cmd.Process.Signal(syscall.SIGINT)
	p.cmd.Wait()
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// factoryCmd runs a factory command in work, with stdin, and returns its
// standard output; it fails the test if the command fails.
func factoryCmd(t *testing.T, work, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("factory", args...)
	cmd.Dir, cmd.Env, cmd.Stdin = work, cleanEnv(), strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("factory %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// cleanEnv is the environment without the FACTORY_ variables of the
// caller.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FACTORY_") {
			env = append(env, kv)
		}
	}
	return env
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.WriteFile(to, []byte(readFile(t, from)), 0o600); err != nil {
		t.Fatal(err)
	}
}

func verifyFile(t *testing.T, path string) *backup.Manifest {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := backup.Verify(f, backup.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
