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

	"factory/reconciler"
	"factory/secrets"
	"factory/server"
	"factory/store"
)

const crashToken = "crash-test-token-0123456789abcdefghijk"

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
	data, repo := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(repo, "webhooks"), 0o755)
	os.WriteFile(filepath.Join(repo, "webhooks", "hook.yaml"), []byte("authMode: token\nsecretName: tok\n"), 0o644)
	s, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	kr, _ := secrets.LoadKeyring(data)
	if _, _, err := secrets.Create(s, kr, "tok", []byte(crashToken), false, time.Now()); err != nil {
		t.Fatal(err)
	}
	s.Close()

	child := exec.Command(os.Args[0], "-test.run=^TestDeliveriesSurviveSIGKILL$")
	child.Env = append(os.Environ(), "FACTORY_CRASH_SERVER="+data, "FACTORY_CRASH_REPO="+repo)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	var url string
	for deadline := time.Now().Add(20 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(data, server.ServerFile))
		var info server.Info
		if err == nil && json.Unmarshal(b, &info) == nil {
			if resp, err := http.Get(info.URL + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					url = info.URL
				}
			}
		}
	}
	if url == "" {
		t.Fatal("the child server did not start")
	}
	uid := strings.TrimSpace(readFile(t, filepath.Join(data, "uid")))

	// Eight loaders post until the kill; each remembers what got a 202.
	var mu sync.Mutex
	accepted := map[string]string{} // delivery_id → body
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{}
			c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"loader":%d,"n":%d,"pad":"%s"}`, g, i, strings.Repeat("x", 512))
				req, _ := http.NewRequest("POST", url+"/webhooks/w/"+uid, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+crashToken)
				resp, err := c.Do(req)
				if err != nil {
					continue // the server died mid-request: no 202, no promise
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 202 {
					var out struct {
						ID string `json:"delivery_id"`
					}
					if json.Unmarshal(b, &out) == nil {
						mu.Lock()
						accepted[out.ID] = body
						mu.Unlock()
					}
				}
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	close(stop)
	wg.Wait()
	if len(accepted) == 0 {
		t.Fatal("no delivery was accepted before the kill: nothing was tested")
	}

	s, err = store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, body := range accepted {
		d, err := s.Delivery(uid, id)
		if err != nil || d.Label != store.LabelAccepted {
			t.Fatalf("delivery %s answered 202 but is not in the log: %v", id, err)
		}
		p, err := s.DeliveryPayload(uid, id)
		if err != nil || string(p) != body {
			t.Fatalf("delivery %s: payload lost or changed: %v", id, err)
		}
	}
	queue, err := s.EvalQueue(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, q := range queue {
		seen[q.DeliveryID]++
	}
	for id := range accepted {
		if seen[id] != 1 {
			t.Fatalf("delivery %s is queued %d times", id, seen[id])
		}
	}
	logged, _, _ := s.Deliveries(uid, "", 1<<20)
	acceptedInLog := 0
	for _, d := range logged {
		if d.Label == store.LabelAccepted {
			acceptedInLog++
			if seen[d.ID] != 1 {
				t.Fatalf("logged delivery %s is queued %d times", d.ID, seen[d.ID])
			}
		}
	}
	if len(queue) != acceptedInLog {
		t.Fatalf("%d queued, %d accepted in the log", len(queue), acceptedInLog)
	}
	t.Logf("%d deliveries answered 202 before SIGKILL; %d accepted in the log; all queued once", len(accepted), acceptedInLog)
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
	srv := server.New(server.Config{Factories: []server.FactorySource{{Name: "crash", Source: reconciler.DirSource{Root: repo}, Interval: time.Hour}},
		IngressPerMinute: -1}, ap, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv.Run(context.Background(), ln)
	os.Exit(0)
}
