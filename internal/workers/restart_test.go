package workers_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"factory"
	"factory/client"
)

// TestControlPlaneKilledDuringDispatch: the control plane killed with
// SIGKILL at each step of handing a turn to a worker (the attempt
// recorded, the turn published, its claim recorded) and started again:
// the run ends within the lease of the restart (done by the worker, or
// ERROR and retryable), runs once, and never waits for ever. The bug it
// pins: killed between recording the attempt and publishing it, the
// control plane came back to a run QUEUED for ever on an attempt no worker
// would claim.
func TestControlPlaneKilledDuringDispatch(t *testing.T) {
	for _, step := range []string{"recorded", "published", "claimed"} {
		t.Run(step, func(t *testing.T) {
			lease := 2 * time.Second
			cl := controlPlane(t, lease)
			cl.proc.cmd.Process.Kill()
			_, _ = cl.proc.cmd.Process.Wait()
			cl.proc = startEnv(t, "control-plane-crashing", []string{"FACTORY_TEST_CRASH_AT=" + step}, cl.args...)
			cl.ready(t)
			w := cl.worker(t, "w1", 2)
			time.Sleep(500 * time.Millisecond)                                                    // connected
			_, _ = cl.c.CreateRun(context.Background(), client.RunRequest{Prompt: "run " + step}) // may die before it answers
			if err := cl.proc.cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Fatalf("the control plane did not die at %s: %v", step, err)
			}
			cl.proc = start(t, "control-plane-again", cl.args...)
			restarted := time.Now()
			cl.ready(t)
			list, err := cl.c.ListRuns(context.Background(), nil)
			if err != nil || len(list.Runs) != 1 {
				t.Fatalf("runs after the restart: %+v %v", list, err)
			}
			id := list.Runs[0].RunID
			// The lease, and a moment for a loaded machine.
			r := cl.wait(t, id, lease+3*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
			took := time.Since(restarted)
			if r.State != factory.StateSucceeded && (r.State != factory.StateError || r.StatusMessage == nil || !r.StatusMessage.Retryable) {
				t.Fatalf("after the restart: %s %+v", r.State, r.StatusMessage)
			}
			if started := startedRuns(w.log())[id]; started > 1 {
				t.Fatalf("run %s started %d times", id, started)
			}
			t.Logf("killed at %s: %s %v after the restart", step, r.State, took.Round(time.Millisecond))
		})
	}
}

// TestFollowUpAfterRestart: after the control plane is killed with
// SIGKILL and started again, a follow-up of each run goes to the worker
// that holds its workspace (the worker the run records; nothing kept in
// memory), and runs there, in the same folder.
func TestFollowUpAfterRestart(t *testing.T) {
	cl := controlPlane(t, 2*time.Second)
	cl.worker(t, "w1", 4)
	cl.worker(t, "w2", 4)
	ctx := context.Background()
	first := map[string]string{} // run → its worker
	where := map[string]string{} // run → its workspace, as the agent said
	for i := range 6 {
		id := cl.create(t, fmt.Sprint("quick ", i))
		r := cl.wait(t, id, 20*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
		if r.State != factory.StateSucceeded || r.Executor == nil {
			t.Fatalf("run %s: %s %+v", id, r.State, r.Executor)
		}
		first[id], where[id] = r.Executor.UID, workspaceOf(t, cl, r)
	}
	if err := cl.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = cl.proc.cmd.Process.Wait()
	cl.proc = start(t, "control-plane-again", cl.args...)
	cl.ready(t)
	sent := time.Now()
	for id := range first {
		if err := cl.c.FollowUp(ctx, id, "and again"); err != nil {
			t.Fatal(err)
		}
	}
	for id, w := range first {
		r := cl.wait(t, id, 20*time.Second, func(r *client.Run) bool { return r.State.Terminal() && r.FinishedAt != nil && r.FinishedAt.After(sent) })
		if r.State != factory.StateSucceeded || r.Executor == nil || r.Executor.UID != w {
			t.Fatalf("run %s's follow-up: %s on %+v; its first turn ran on %s", id, r.State, r.Executor, w)
		}
		if got := workspaceOf(t, cl, r); got != where[id] {
			t.Fatalf("run %s's follow-up ran in %s, its first turn in %s", id, got, where[id])
		}
	}
}

// workspaceOf is the folder the run's latest turn ran in, as its agent
// wrote it (where.txt, an artifact).
func workspaceOf(t *testing.T, cl *cluster, r *client.Run) string {
	t.Helper()
	for i := len(r.Artifacts) - 1; i >= 0; i-- {
		a := r.Artifacts[i]
		if a.Data.Filename != "where.txt" {
			continue
		}
		b, err := cl.c.DoRaw(context.Background(), "GET", "/v1/agent/artifacts/"+a.Data.UID+"/download", nil)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	t.Fatalf("run %s has no where.txt: %+v", r.RunID, r.Artifacts)
	return ""
}

// ready waits for the control plane's API to answer.
func (cl *cluster) ready(t testing.TB) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := cl.c.ListRuns(context.Background(), nil); err == nil {
			return
		}
	}
	t.Fatal("the control plane did not come back")
}
