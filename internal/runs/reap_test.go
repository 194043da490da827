package runs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"factory"
	"factory/internal/testproc"
)

// reapScript is an agent that starts a child in its group and waits.
const reapScript = `echo $$ > pid; sleep 300 & echo $! > child; wait`

// TestAgentsDieWithTheServer: an agent dies with the server that started it
// (Pdeathsig), and what it left in its process group is killed at the
// next start, before the run is marked ERROR; a follow-up then starts a
// fresh agent with nothing of the old one running. The attack: after a
// SIGKILL of the server the agent kept running under PID 1, and a
// follow-up started a second agent in the same workspace.
func TestAgentsDieWithTheServer(t *testing.T) {
	if dir := os.Getenv("FACTORY_REAP_CHILD"); dir != "" {
		reapChild(t, dir)
		return
	}
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestAgentsDieWithTheServer$")
	child.Env = append(os.Environ(), "FACTORY_REAP_CHILD="+dir)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	runID := strings.TrimSpace(waitFile(t, filepath.Join(dir, "runid")))
	ws := filepath.Join(dir, "data", "runs", runID, "workspace")
	agent, grandchild := pidIn(t, filepath.Join(ws, "pid")), pidIn(t, filepath.Join(ws, "child"))
	t.Logf("run %s: agent %d, its child %d", runID, agent, grandchild)

	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	for deadline := time.Now().Add(5 * time.Second); testproc.Alive(agent); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent (pid %d) outlived the server", agent)
		}
	}
	if !testproc.Alive(grandchild) {
		t.Fatal("the agent's child died with it: nothing is left for the restart to reap, the test proves nothing")
	}

	f := newManager(t, dir, 1, reapScript) // the restart
	r := f.wait(runID, factory.StateError)
	if r.Process != nil || !r.StatusMessage.Retryable {
		t.Fatalf("after the restart: %+v", r)
	}
	for deadline := time.Now().Add(5 * time.Second); testproc.Alive(grandchild); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent's child (pid %d) outlived the restart", grandchild)
		}
	}
}

// reapChild is the server the test kills: a manager running one run whose
// agent never ends.
func reapChild(t *testing.T, dir string) {
	f := newManager(t, dir, 1, reapScript)
	r := f.create("wait forever")
	ws := filepath.Join(dir, "data", "runs", r.ID, "workspace")
	waitFile(t, filepath.Join(ws, "child"))
	f.wait(r.ID, factory.StateInProgress)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if cur, _ := f.s.Run(r.ID); cur.Process != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run's process was not recorded")
		}
	}
	os.WriteFile(filepath.Join(dir, "runid"), []byte(r.ID), 0o600)
	time.Sleep(time.Minute) // until killed
}

func waitFile(t *testing.T, path string) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && strings.HasSuffix(string(b), "\n") || err == nil && filepath.Base(path) == "runid" && len(b) > 0 {
			return string(b)
		}
	}
	t.Fatalf("%s did not appear", path)
	return ""
}

func pidIn(t *testing.T, path string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(waitFile(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
