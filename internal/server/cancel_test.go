package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"factory"
	"factory/client"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
	"factory/internal/testproc"
	"factory/internal/worker"
	"factory/internal/workers"
)

// TestCancelAtAnyMoment: 200 runs, each cancelled at a random moment
// (before a worker claims it, during its runner's setup, while its agent
// runs, after its end), with NATS off, with the default (the embedded NATS
// server, runs in the server's own process), and with every run on a
// worker. Every cancel of a run that had not ended answers 200 and the run
// reads CANCELLED at once, and still at the end; a cancel of a run that had
// ended answers 400 and changes nothing; no agent or setup process is left.
// The bug it pins: cancel of a run waiting for a worker ended it ERROR
// ("queueing the run for a worker: context canceled"), and right after the
// 200 the run still read INPROGRESS.
func TestCancelAtAnyMoment(t *testing.T) {
	for _, mode := range []string{"off", "default", "workers"} {
		t.Run(mode, func(t *testing.T) { cancelAtAnyMoment(t, mode) })
	}
}

func cancelAtAnyMoment(t *testing.T, mode string) {
	pids := t.TempDir()
	// The agent and the setup note their process IDs, then take a while
	// (0 to 0.3 s, by the prompt), so that cancels fall everywhere.
	agent := fmt.Sprintf(`echo $$ >> %s/agents; sleep "$(cat PROMPT.md)"; echo done`, pids)
	var m *runs.Manager
	h := startWith(t, func(s *store.Store, data string) *runs.Manager {
		cfg := runs.Config{Store: s, DataDir: data, DefaultEnvironment: "sh", MaxConcurrent: 8, Log: slog.New(slog.DiscardHandler),
			Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", agent}, Grace: 2 * time.Second}}}}
		claims := func(*runs.Manager) {}
		if mode != "off" {
			claims = hostsOnNATS(t, s, data, &cfg, mode == "workers")
		}
		m = runs.NewManager(cfg)
		claims(m)
		return m
	})
	const n = 200
	ids := make([]string, n)
	for i := range n {
		prompt := strconv.FormatFloat(rand.Float64()*0.3, 'f', 2, 64)
		if i%4 == 0 {
			// A factory agent's run: its runner's setup first.
			r, err := m.Create(runs.CreateRequest{Prompt: prompt, Source: factory.SourceAPI,
				Setup: &factory.RunSetup{Runner: "r", SetupCommands: []string{fmt.Sprintf("echo $$ >> %s/setups; sleep 0.1", pids)}}})
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = r.ID
			continue
		}
		r, err := h.c.CreateRun(context.Background(), client.RunRequest{Prompt: prompt})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.RunID
	}
	var wg sync.WaitGroup
	answers := make([]int, n)
	for i, id := range ids {
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(600)) * time.Millisecond)
			answers[i] = cancelOnce(t, h, id)
		})
	}
	wg.Wait()
	// Everything settles: nothing runs, and nothing changed since.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, running := m.Counts(); running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("turns still in flight 30 s after the last cancel")
		}
	}
	counts := map[string]int{}
	for i, id := range ids {
		r, err := h.store.Run(id)
		if err != nil {
			t.Fatal(err)
		}
		switch answers[i] {
		case http.StatusOK:
			if r.State != factory.StateCancelled {
				t.Errorf("run %s: cancelled (200), now %s: %+v", id, r.State, r.StatusMessage)
			}
			counts["cancelled"]++
		case http.StatusBadRequest:
			if r.State != factory.StateSucceeded {
				t.Errorf("run %s: a cancel answered 400 (ended), and it is %s", id, r.State)
			}
			counts["ended before"]++
		}
	}
	for _, f := range []string{"agents", "setups"} {
		testproc.Gone(t, 5*time.Second, pidsIn(t, filepath.Join(pids, f))...)
	}
	t.Logf("%s: %v", mode, counts)
}

// cancelOnce cancels a run through the API and, on 200, reads it at once:
// CANCELLED. On 400 the run had ended.
func cancelOnce(t *testing.T, h *harness, id string) int {
	req, _ := http.NewRequest("POST", h.url+"/v1/agent/runs/"+id+"/cancel", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		r, err := h.c.GetRun(context.Background(), id)
		if err != nil || r.State != factory.StateCancelled {
			t.Errorf("run %s: read right after its cancel's 200: %+v %v", id, r, err)
		}
	case http.StatusBadRequest:
		var p struct {
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(body, &p)
		if !strings.Contains(p.Detail, "ended") {
			t.Errorf("run %s: 400 %s", id, body)
		}
	default:
		t.Errorf("run %s: cancel answered %d %s", id, resp.StatusCode, body)
	}
	return resp.StatusCode
}

// hostsOnNATS starts the workers' control plane on an embedded NATS
// server for a run manager's configuration; onWorkers runs every turn on a
// worker (in this process, over NATS, as factory worker does) instead of
// the control plane's own process. The function it returns hands the
// workers' claims to the run manager made with the configuration.
func hostsOnNATS(t *testing.T, s *store.Store, data string, cfg *runs.Config, onWorkers bool) func(*runs.Manager) {
	t.Helper()
	ctx := context.Background()
	cp, err := workers.StartControlPlane(ctx, workers.Options{Listen: "127.0.0.1:0", Lease: 2 * time.Second}, s, data, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	cfg.Workers, cfg.WorkersReady, cfg.NoLocal = cp.Host(), cp.Ready, onWorkers
	if onWorkers {
		creds, err := cp.Registry.Create(ctx, "w1", "")
		if err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			err := worker.Run(wctx, creds.Credentials, worker.Options{ID: "w1", NATS: cp.URL, MaxRuns: 8, Dir: t.TempDir()}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Errorf("worker: %v", err)
			}
		}()
		t.Cleanup(func() { stop(); <-done })
	}
	return func(m *runs.Manager) { cp.SetClaim(m.Claim) }
}

func pidsIn(t *testing.T, file string) []int {
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}
