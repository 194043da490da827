package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
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

	"factory/internal/automations"
	"factory/internal/reconciler"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/store"
)

const crashToken = "crash-test-token-0123456789abcdefghijk"

const crashUID = "wh_0000000000000000crash1"

// TestDeliveriesSurviveSIGKILL posts deliveries to a server in a child
// process and kills it with SIGKILL mid-load. After the restart, every
// delivery that was answered 202 is in the log with its payload, and is
// queued for evaluation exactly once.
func TestDeliveriesSurviveSIGKILL(t *testing.T) {
	if os.Getenv("FACTORY_CRASH_SERVER") != "" {
		crashServer()
		return
	}
	if testing.Short() {
		t.Skip("subprocess crash test")
	}
	data, repo := crashSetUp(t)
	child := exec.Command(os.Args[0], "-test.run=^TestDeliveriesSurviveSIGKILL$")
	child.Env = append(os.Environ(), "FACTORY_CRASH_SERVER="+data, "FACTORY_CRASH_REPO="+repo)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	url := waitReady(t, data)
	uid := strings.TrimSpace(readFile(t, filepath.Join(data, "uid")))
	accepted := loadUntilKilled(url, uid, func() {
		time.Sleep(700 * time.Millisecond)
		child.Process.Signal(syscall.SIGKILL)
		child.Wait()
	})
	if len(accepted) == 0 {
		t.Fatal("no delivery was accepted before the kill: nothing was tested")
	}

	s, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkAcceptedLogged(t, s, uid, accepted)
	queued, evaluated, acceptedInLog := checkQueuedOnce(t, s, uid)
	checkOneRunEach(t, s, data, uid, acceptedInLog)
	t.Logf("%d deliveries answered 202 before SIGKILL; %d accepted; %d evaluated before the kill, %d after; one run each",
		len(accepted), acceptedInLog, evaluated, queued)
}

// crashSetUp writes the factory (one token webhook, one automation every
// delivery matches) and its secret and pinned UID into a new store.
func crashSetUp(t *testing.T) (data, repo string) {
	data, repo = t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(repo, "webhooks"), 0o755)
	os.MkdirAll(filepath.Join(repo, "automations"), 0o755)
	os.WriteFile(filepath.Join(repo, "webhooks", "hook.yaml"), []byte("authMode: token\nsecretName: tok\n"), 0o644)
	// Every delivery matches this automation: each starts one run.
	os.WriteFile(filepath.Join(repo, "automations", "all.md"), []byte("---\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: ["+crashUID+"]\n---\nHandle it.\n"), 0o644)
	s, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kr, _ := secrets.LoadKeyring(data)
	if _, _, err := secrets.Create(s, kr, "tok", []byte(crashToken), false, time.Now()); err != nil {
		t.Fatal(err)
	}
	pin := s.NewBatch()
	pin.PinWebhookUID("crash", "hook", crashUID)
	pin.Commit()
	return data, repo
}

// waitReady waits for the child server to answer /readyz at the address it
// records in the data directory.
func waitReady(t *testing.T, data string) string {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(data, server.ServerFile))
		var info server.Info
		if err == nil && json.Unmarshal(b, &info) == nil {
			if resp, err := http.Get(info.URL + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return info.URL
				}
			}
		}
	}
	t.Fatal("the child server did not start")
	return ""
}

// loadUntilKilled runs eight loaders that post until kill has returned;
// each remembers what got a 202. It returns delivery_id → body.
func loadUntilKilled(url, uid string, kill func()) map[string]string {
	var mu sync.Mutex
	accepted := map[string]string{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"loader":%d,"n":%d,"pad":"%s"}`, g, i, strings.Repeat("x", 512))
				if id := postOnce(c, url+"/webhooks/w/"+uid, body); id != "" {
					mu.Lock()
					accepted[id] = body
					mu.Unlock()
				}
			}
		}()
	}
	kill()
	close(stop)
	wg.Wait()
	return accepted
}

// postOnce posts a delivery and returns its ID if it was answered 202. A
// server that died mid-request made no promise.
func postOnce(c *http.Client, url, body string) string {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+crashToken)
	resp, err := c.Do(req)
	if err != nil {
		return ""
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out struct {
		ID string `json:"delivery_id"`
	}
	if resp.StatusCode != 202 || json.Unmarshal(b, &out) != nil {
		return ""
	}
	return out.ID
}

// checkAcceptedLogged: every delivery answered 202 is in the log, with its
// payload byte for byte.
func checkAcceptedLogged(t *testing.T, s *store.Store, uid string, accepted map[string]string) {
	for id, body := range accepted {
		d, err := s.Delivery(uid, id)
		if err != nil || d.Label != factory.LabelAccepted {
			t.Fatalf("delivery %s answered 202 but is not in the log: %v", id, err)
		}
		p, err := s.DeliveryPayload(uid, id)
		if err != nil || string(p) != body {
			t.Fatalf("delivery %s: payload lost or changed: %v", id, err)
		}
	}
}

// checkQueuedOnce: the child evaluated part of the queue before it died
// (it runs the automations); the rest is still queued, once each, and
// nothing is in both.
func checkQueuedOnce(t *testing.T, s *store.Store, uid string) (queued, evaluated, acceptedInLog int) {
	queue, err := s.EvalQueue(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, q := range queue {
		seen[q.DeliveryID]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("delivery %s is queued %d times", id, n)
		}
	}
	logged, _, _ := s.Deliveries(uid, "", 1<<20)
	for _, d := range logged {
		if d.Label != factory.LabelAccepted {
			continue
		}
		acceptedInLog++
		if seen[d.ID] == 0 {
			evaluated++
			if len(d.RunIDs) != 1 {
				t.Fatalf("delivery %s left the queue with runs %v", d.ID, d.RunIDs)
			}
		}
	}
	if len(queue)+evaluated != acceptedInLog {
		t.Fatalf("%d queued + %d evaluated != %d accepted", len(queue), evaluated, acceptedInLog)
	}
	return len(queue), evaluated, acceptedInLog
}

// checkOneRunEach: the restart evaluates the rest, and every accepted
// delivery has started exactly one run, whatever moment the kill fell on.
func checkOneRunEach(t *testing.T, s *store.Store, data, uid string, acceptedInLog int) {
	m := runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "default", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Environments: map[string]runs.Environment{"default": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	if err := (&automations.Evaluator{Store: s, Runs: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Drain(); err != nil {
		t.Fatal(err)
	}
	runs, err := s.RunsInState(factory.RunStates...)
	if err != nil {
		t.Fatal(err)
	}
	perDelivery := map[string]int{}
	for _, r := range runs {
		perDelivery[r.DeliveryID]++
	}
	logged, _, _ := s.Deliveries(uid, "", 1<<20)
	for _, d := range logged {
		if d.Label == factory.LabelAccepted && (perDelivery[d.ID] != 1 || len(d.RunIDs) != 1) {
			t.Fatalf("delivery %s: %d runs, record lists %v", d.ID, perDelivery[d.ID], d.RunIDs)
		}
	}
	if len(runs) != acceptedInLog {
		t.Fatalf("%d runs for %d accepted deliveries", len(runs), acceptedInLog)
	}
}

func readFile(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// crashServer is the child: a server over the data directory, with the
// delivery rate limit off, until it is killed.
func crashServer() {
	data, repo := os.Getenv("FACTORY_CRASH_SERVER"), os.Getenv("FACTORY_CRASH_REPO")
	s, err := store.Open(data)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	kr, _ := secrets.LoadKeyring(data)
	ap := &reconciler.Applier{Store: s, Keyring: kr}
	if _, _, err := ap.Sync(context.Background(), "crash", reconciler.DirSource{Root: repo}); err != nil {
		os.Exit(4)
	}
	whs, _ := s.Webhooks("crash")
	os.WriteFile(filepath.Join(data, "uid"), []byte(whs[0].UID), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(5)
	}
	runs := runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "default", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Environments: map[string]runs.Environment{"default": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	srv := server.New(server.Config{Factories: []server.FactorySource{{Name: "crash", Source: reconciler.DirSource{Root: repo}, Interval: time.Hour}},
		IngressPerMinute: -1, Runs: runs}, ap, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv.Run(context.Background(), ln)
	os.Exit(0)
}
