package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// crashReceiver is a route's receiver: down (503) until told otherwise;
// it keeps each event it took, by run, with its message ID.
type crashReceiver struct {
	mu   sync.Mutex
	down bool
	got  map[string][]string // run → types, in the order they came
	ids  map[string]int      // webhook-id → times taken
}

func (rc *crashReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.down {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var e struct {
		Type string `json:"type"`
		Data struct {
			RunID string `json:"run_id"`
		} `json:"data"`
	}
	_ = json.Unmarshal(b, &e)
	rc.got[e.Data.RunID] = append(rc.got[e.Data.RunID], e.Type)
	rc.ids[r.Header.Get("webhook-id")]++
	w.WriteHeader(http.StatusOK)
}

// TestCrashLosesNoNotifications: a real `factory serve` sends its runs'
// events to a receiver that is down; the server is killed with SIGKILL
// while runs are still going and their events are pending; the receiver
// comes back and the server starts again. Every run's events arrive, each
// once, in the order they happened, ending in the state the run ended in:
// the outbox written with each change of a run loses none.
func TestCrashLosesNoNotifications(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess crash test")
	}
	if _, err := exec.LookPath("factory"); err != nil {
		t.Skip("the factory command is not on PATH (TestMain puts it there)")
	}
	rc := &crashReceiver{down: true, got: map[string][]string{}, ids: map[string]int{}}
	recv := httptest.NewServer(rc)
	defer recv.Close()
	work := t.TempDir()
	data := work + "/data"
	writeFiles(t, work, map[string]string{
		"repo/factory.yaml": "schemaVersion: v1alpha1\nname: Ops\ncodeForges: [NONE]\nrepositories: []\nagentDefaults:\n  model: auto\nnotifications:\n" +
			"  - name: ops\n    url: " + recv.URL + "/hook\n    secretName: hooks\n    events: [run.created, run.started, run.succeeded, run.failed, run.errored]\n",
		"repo/agents/lead/agent.md": "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"serve.yaml": "factories:\n  - name: ops\n    source: repo\nruntime:\n  maxConcurrentRuns: 4\n  defaultEnvironment: agent\n" +
			"environments:\n  agent:\n    executor: exec\n    command: [\"sh\", \"-c\", \"sleep 0.2; echo done\"]\n" +
			"notifications:\n  retries: [100ms, 200ms, 400ms, 400ms, 400ms, 400ms, 400ms, 400ms, 400ms, 400ms, 400ms, 400ms]\n",
	})
	factoryCmd(t, work, "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", "--data", data, "secrets", "create", "hooks", "--from-stdin")
	admin := strings.TrimSpace(factoryCmd(t, work, "", "--data", data, "apikeys", "create", "ops", "--scope", "admin"))
	srv := startServe(t, work, data, "--allow-insecure-notifications")
	uid := factoryUID(t, srv.url, admin)
	var ids []string
	for i := 0; i < 12; i++ {
		ids = append(ids, createRun(t, srv.url, admin, uid))
	}
	time.Sleep(500 * time.Millisecond) // some runs ended, some run, some wait
	srv.kill()
	rc.mu.Lock()
	rc.down = false
	rc.mu.Unlock()
	srv = startServe(t, work, data, "--allow-insecure-notifications")
	defer srv.stop(t)
	ended := awaitEnded(t, srv.url, admin, ids)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if done, why := allArrived(rc, ended); done {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("not every event arrived: %s", why)
		}
	}
	time.Sleep(500 * time.Millisecond) // anything sent twice has come by now
	if done, why := allArrived(rc, ended); !done {
		t.Error(why)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for id, n := range rc.ids {
		if n != 1 {
			t.Errorf("message %s arrived %d times", id, n)
		}
	}
}

// allArrived reports whether every run's events came, in order: created,
// then started (a run that never started has none), then the event of the
// state it ended in; rc.mu is not held.
func allArrived(rc *crashReceiver, ended map[string]string) (bool, string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for id, state := range ended {
		got := strings.Join(rc.got[id], ",")
		end := map[string]string{"SUCCEEDED": "run.succeeded", "FAILED": "run.failed", "ERROR": "run.errored"}[state]
		if got != "run.created,run.started,"+end && got != "run.created,"+end {
			return false, fmt.Sprintf("run %s (%s): %s", id, state, got)
		}
	}
	return true, ""
}

func factoryUID(t *testing.T, url, key string) string {
	t.Helper()
	var out struct {
		Factories []struct {
			UID  string `json:"uid"`
			Name string `json:"name"`
		} `json:"factories"`
	}
	callAPI(t, "GET", url+"/v1/factories", key, nil, &out)
	if len(out.Factories) != 1 {
		t.Fatalf("factories %+v", out)
	}
	return out.Factories[0].UID
}

func createRun(t *testing.T, url, key, uid string) string {
	t.Helper()
	var out struct {
		RunID string `json:"run_id"`
	}
	callAPI(t, "POST", url+"/v1/factories/"+uid+"/runs", key, map[string]string{"prompt": "do it"}, &out)
	return out.RunID
}

// awaitEnded waits for the runs to end and returns the state each ended in.
func awaitEnded(t *testing.T, url, key string, ids []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for deadline := time.Now().Add(60 * time.Second); len(out) < len(ids); time.Sleep(50 * time.Millisecond) {
		for _, id := range ids {
			var r struct {
				State string `json:"state"`
			}
			callAPI(t, "GET", url+"/v1/agent/runs/"+id, key, nil, &r)
			if r.State == "SUCCEEDED" || r.State == "FAILED" || r.State == "ERROR" || r.State == "CANCELLED" {
				out[id] = r.State
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs ended", len(out), len(ids))
		}
	}
	return out
}

func callAPI(t *testing.T, method, url, key string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 || json.Unmarshal(b, out) != nil {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
}
