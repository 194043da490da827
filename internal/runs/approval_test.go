package runs_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
)

// approvalPrompt makes the demo agent ask about three commands, one after
// the other, in one turn, and end it.
const approvalPrompt = "Tidy up.\ndemo: ask run the tests\ndemo: ask delete the cache\ndemo: ask push the branch\ndemo: done"

// waitRun waits until a run satisfies ok, and returns it.
func waitRun(t *testing.T, s *store.Store, id string, within time.Duration, what string, ok func(*factory.Run) bool) *factory.Run {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		r, err := s.Run(id)
		if err == nil && ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: no %s within %s: %+v", id, what, within, r)
		}
	}
}

// pendingApproval waits for the run to be BLOCKED on its n-th approval
// and returns that item.
func pendingApproval(t *testing.T, s *store.Store, id string, n int) *factory.InboxItem {
	t.Helper()
	r := waitRun(t, s, id, 15*time.Second, "approval", func(r *factory.Run) bool {
		return r.State == factory.StateBlocked && r.Current != nil && len(r.Current.Approvals) == 1 && countKind(t, s, id, factory.EventApprovalRequested) == n
	})
	it, err := s.InboxItem(r.Current.Approvals[0])
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func countKind(t *testing.T, s *store.Store, id, kind string) int {
	events, _ := s.RunEvents(id)
	n := 0
	for _, e := range events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// TestApprovalAsk: with permissions ask, each of the agent's permission
// requests parks the run BLOCKED with an inbox item naming the tool call
// and its options, and the same agent process goes on with the answer: a
// person's allow, a person's reject, and the timeout's reject. A follow-up
// sent meanwhile waits for the next turn, which loads the agent's session.
func TestApprovalAsk(t *testing.T) {
	bin := demoAgent(t)
	dir := t.TempDir()
	s := newStoreOnly(t, dir)
	m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "acp", Log: quietLog(),
		Environments: map[string]runs.Environment{"acp": {ApprovalTimeout: 1500 * time.Millisecond, Executor: &runtime.ACPExecutor{
			Command: []string{bin, "demo-agent", "--acp", "--delay", "1ms"}, Permissions: runtime.PermissionsAsk}}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.Wait() }()
	m.Start(ctx)
	r, err := m.Create(runs.CreateRequest{Prompt: approvalPrompt})
	if err != nil {
		t.Fatal(err)
	}
	it := pendingApproval(t, s, r.ID, 1)
	if it.Kind != factory.InboxApproval || it.RunID != r.ID || it.Approval == nil || it.Approval.Title != "run the tests" ||
		it.Approval.Kind != "execute" || !strings.Contains(it.Approval.Arguments, `"command":"run the tests"`) || len(it.Approval.Options) != 3 {
		t.Fatalf("the approval names the tool call: %+v %+v", it, it.Approval)
	}
	// A follow-up while the turn waits for a person: queued, not a new turn.
	if _, ans, err := m.SendFollowUp(r.ID, "Say so.\ndemo: done", nil); err != nil || ans.Outcome != runs.OutcomeQueuedPrompt {
		t.Fatalf("follow-up during an approval: %+v %v", ans, err)
	}
	if got, _ := s.Run(r.ID); got.State != factory.StateBlocked {
		t.Fatalf("the follow-up requeued a run whose turn is live: %s", got.State)
	}
	if _, err := m.AnswerApproval(r.ID, it.UID, "nope", nil); !isCode(err, factory.EINVALID) {
		t.Fatalf("an option the agent did not offer: %v", err)
	}
	by := &factory.Creator{Type: "user", UID: "k1", DisplayName: "Ada"}
	if _, err := m.AnswerApproval(r.ID, it.UID, "allow", by); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AnswerApproval(r.ID, it.UID, "allow", by); !isCode(err, factory.ECONFLICT) {
		t.Fatalf("answering twice: %v", err)
	}
	it = pendingApproval(t, s, r.ID, 2)
	if _, err := m.AnswerApproval(r.ID, it.UID, "reject", by); err != nil {
		t.Fatal(err)
	}
	third := pendingApproval(t, s, r.ID, 3) // nobody answers: the timeout does
	got := waitRun(t, s, r.ID, 20*time.Second, "the follow-up's end", func(r *factory.Run) bool {
		return r.Turns == 2 && r.State.Terminal()
	})
	if got.State != factory.StateSucceeded {
		t.Fatalf("%s: %+v", got.State, got.StatusMessage)
	}
	if it, _ := s.InboxItem(third.UID); it.Resolved == nil || it.Approval.Chosen != "reject" || !it.Approval.Timeout {
		t.Fatalf("the timeout answers with the reject option: %+v", it.Approval)
	}
	checkApprovalTimeline(t, s, r.ID)
}

// checkApprovalTimeline: the same agent process heard the three answers;
// the run went BLOCKED and back three times; the follow-up's turn loaded
// the session without its history reported again.
func checkApprovalTimeline(t *testing.T, s *store.Store, id string) {
	t.Helper()
	events, _ := s.RunEvents(id)
	var msgs, kinds []string
	for _, e := range events {
		kinds = append(kinds, e.Kind)
		if e.Kind == "message" {
			msgs = append(msgs, e.Message)
		}
	}
	all := strings.Join(msgs, "\n")
	pids := regexp.MustCompile(`pid (\d+): (run the tests|delete the cache|push the branch): (\w+)`).FindAllStringSubmatch(all, -1)
	if len(pids) != 3 || pids[0][3] != "allow" || pids[1][3] != "reject" || pids[2][3] != "reject" || pids[0][1] != pids[1][1] || pids[1][1] != pids[2][1] {
		t.Fatalf("one agent process, three answers: %q\n%s", pids, all)
	}
	if n, m := countKind(t, s, id, factory.EventApprovalRequested), countKind(t, s, id, factory.EventApprovalAnswered); n != 3 || m != 3 {
		t.Fatalf("approvals on the timeline: %d asked, %d answered: %q", n, m, kinds)
	}
	if !strings.Contains(all, "continuing session demo-") || strings.Contains(all, "(replayed)") {
		t.Fatalf("the follow-up loads the session, its history not reported again:\n%s", all)
	}
}

func isCode(err error, code string) bool {
	var fe *factory.Error
	return errors.As(err, &fe) && fe.Code == code
}
