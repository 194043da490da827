package workers_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/client"
)

// timelineEvent is a timeline entry as a test reads it.
type timelineEvent struct {
	Type    string         `json:"event_type"`
	Payload map[string]any `json:"payload"`
}

func (cl *cluster) timeline(t *testing.T, id string) []timelineEvent {
	t.Helper()
	var tl struct {
		Events []timelineEvent `json:"events"`
	}
	if err := cl.c.Do(context.Background(), "GET", "/v1/agent/runs/"+id+"/timeline", nil, &tl); err != nil {
		t.Fatal(err)
	}
	return tl.Events
}

// approvalItem waits for the run's n-th approval (the run BLOCKED) and
// returns its inbox item's UID, from the timeline.
func (cl *cluster) approvalItem(t *testing.T, id string, n int) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var asked []string
		for _, e := range cl.timeline(t, id) {
			if e.Type == factory.EventApprovalRequested {
				asked = append(asked, e.Payload["item_uid"].(string))
			}
		}
		if r, err := cl.c.GetRun(context.Background(), id); err == nil && len(asked) == n && r.State == factory.StateBlocked {
			return asked[n-1]
		}
	}
	t.Fatalf("run %s: no approval %d", id, n)
	return ""
}

// TestApprovalOnWorker: permissions ask on a worker's turn: the worker
// asks the control plane over NATS, the run is BLOCKED with the inbox
// item, and a person's answers through the API (allow, reject) and the
// timeout reach the same agent process on the worker.
func TestApprovalOnWorker(t *testing.T) {
	cl := controlPlaneWith(t, 2*time.Second, "  ask:\n    executor: acp\n    permissions: ask\n    approvalTimeout: 2s\n    command: ["+binary(t)+", demo-agent, --acp, --delay, 1ms]\n")
	cl.worker(t, "w1", 2)
	created, err := cl.c.CreateRun(context.Background(), client.RunRequest{Prompt: "Tidy up.\ndemo: ask run the tests\ndemo: ask delete the cache\ndemo: ask push the branch\ndemo: done",
		Config: map[string]any{"environment_id": "ask"}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.RunID
	answer := func(item, option string) error {
		return cl.c.Do(context.Background(), "POST", "/v1/agent/runs/"+id+"/approvals/"+item, strings.NewReader(`{"option_id":"`+option+`"}`), nil)
	}
	first := cl.approvalItem(t, id, 1)
	if err := answer(first, "maybe"); err == nil || !strings.Contains(err.Error(), "not one of the agent's options") {
		t.Fatalf("an option the agent did not offer: %v", err)
	}
	if err := answer(first, "allow"); err != nil {
		t.Fatal(err)
	}
	if err := answer(cl.approvalItem(t, id, 2), "reject"); err != nil {
		t.Fatal(err)
	}
	cl.approvalItem(t, id, 3) // nobody answers
	r := cl.wait(t, id, 30*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
	if r.State != factory.StateSucceeded || r.Executor.UID != "w1" {
		t.Fatalf("%s on %+v: %+v", r.State, r.Executor, r.StatusMessage)
	}
	var msgs []string
	answered := 0
	for _, e := range cl.timeline(t, id) {
		if m, ok := e.Payload["message"].(string); ok {
			msgs = append(msgs, m)
		}
		if e.Type == factory.EventApprovalAnswered {
			answered++
		}
	}
	all := strings.Join(msgs, "\n")
	pids := regexp.MustCompile(`pid (\d+): [a-z ]+: (\w+)`).FindAllStringSubmatch(all, -1)
	if len(pids) != 3 || pids[0][2] != "allow" || pids[1][2] != "reject" || pids[2][2] != "reject" || pids[0][1] != pids[2][1] || answered != 3 ||
		!strings.Contains(all, "the timeout answered the approval of push the branch") {
		t.Fatalf("one agent process, three answers (%d on the timeline): %q\n%s", answered, pids, all)
	}
}
