package notify_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"factory"
	"factory/internal/store"
)

var allEvents = []string{factory.RunCreated, factory.RunStarted, factory.RunBlocked, factory.RunSucceeded, factory.RunFailed,
	factory.RunErrored, factory.RunCancelled}

// TestReceiverDown: a receiver that answers 503 for a while gets every
// event afterwards, in order per run, none twice, each signed as Standard
// Webhooks says, with the message's one ID however often it was tried.
func TestReceiverDown(t *testing.T) {
	t.Parallel()
	rc := &receiver{answer: func(n int) int {
		if n <= 6 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}}
	s, n, f := outbox(t, rc, factory.NotificationRoute{Name: "ops", Events: allEvents, SecretName: "hooks"})
	lifecycle(t, s, n, "run_a", f.UID, factory.StateClaimed, factory.StateInProgress, factory.StateSucceeded)
	lifecycle(t, s, n, "run_b", f.UID, factory.StateClaimed, factory.StateInProgress, factory.StateFailed)
	got := await(t, rc, 6)
	wh, _ := standardwebhooks.NewWebhook(routeSecret)
	order := map[string][]string{}
	ids := map[string]bool{}
	for _, g := range got {
		if err := wh.Verify(g.body, g.header); err != nil {
			t.Errorf("%s: %v", g.id, err)
		}
		if ids[g.id] {
			t.Errorf("%s was delivered twice", g.id)
		}
		ids[g.id] = true
		order[g.run] = append(order[g.run], g.typ)
	}
	if strings.Join(order["run_a"], ",") != "run.created,run.started,run.succeeded" || strings.Join(order["run_b"], ",") != "run.created,run.started,run.failed" {
		t.Fatalf("order %v", order)
	}
	ns, _, err := n.Deliveries("ops", "", "", 50)
	if err != nil || len(ns) != 6 {
		t.Fatalf("the log: %d, %v", len(ns), err)
	}
	retried := 0
	for _, nt := range ns {
		if nt.Status != factory.NotificationDelivered || nt.LastStatus != 200 {
			t.Errorf("%+v", nt)
		}
		if nt.Attempts > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Error("no delivery was retried: the receiver was never down")
	}
}

// TestGone: a receiver that answers 410 disables its route: the event is
// not tried again, the route's pending events are dropped, later runs
// send nothing; a redelivery sends the same message again (its ID) and
// enables the route.
func TestGone(t *testing.T) {
	t.Parallel()
	gone := true
	// The receiver answers once the run's three events are in the outbox:
	// a 410 that came sooner would rightly keep the later ones out of it.
	written := make(chan struct{})
	rc := &receiver{}
	rc.answer = func(int) int {
		<-written
		if gone {
			return http.StatusGone
		}
		return http.StatusOK
	}
	s, n, f := outbox(t, rc, factory.NotificationRoute{Name: "ops", Events: allEvents, SecretName: "hooks"})
	lifecycle(t, s, n, "run_a", f.UID, factory.StateClaimed, factory.StateInProgress, factory.StateSucceeded)
	close(written)
	var first *factory.Notification
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ns, _, _ := n.Deliveries("", "", "", 50)
		disabled := 0
		for _, nt := range ns {
			if nt.Status == factory.NotificationDisabled {
				disabled++
			}
			if nt.Type == factory.RunCreated {
				first = nt
			}
		}
		if disabled == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log %+v", ns)
		}
	}
	lifecycle(t, s, n, "run_b", f.UID, factory.StateClaimed)
	if ns, _, _ := n.Deliveries("", "", "", 50); len(ns) != 3 {
		t.Fatalf("a disabled route got %d notifications", len(ns)-3)
	}
	rc.mu.Lock()
	gone, tries := false, rc.tries
	rc.mu.Unlock()
	if tries != 1 {
		t.Errorf("%d attempts: a 410 is not tried again", tries)
	}
	again, err := n.Redeliver(first.ID)
	if err != nil || again.MessageID != first.MessageID || again.RedeliveryOf != first.ID {
		t.Fatalf("%+v %v", again, err)
	}
	if got := await(t, rc, 1); got[0].id != first.MessageID {
		t.Fatalf("redelivered %+v", got)
	}
	lifecycle(t, s, n, "run_c", f.UID)
	await(t, rc, 2)
}

// TestRouteFilters: a route gets the events it lists, of the runs of the
// automations it names only.
func TestRouteFilters(t *testing.T) {
	t.Parallel()
	rc := &receiver{}
	s, n, f := outbox(t, rc, factory.NotificationRoute{Name: "ends", Events: []string{factory.RunSucceeded, factory.RunFailed}, SecretName: "hooks",
		Automations: []string{"triage"}})
	b := s.NewBatch()
	b.PutAutomation(&factory.Automation{Factory: f.Name, Key: "triage", UID: "au_triage000000000000000000"})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	lifecycle(t, s, n, "run_other", f.UID, factory.StateClaimed, factory.StateInProgress, factory.StateSucceeded)
	r := &factory.Run{ID: "run_triage", State: factory.StatePending, CreatedAt: time.Now(), UpdatedAt: time.Now(), FactoryUID: f.UID,
		AutomationID: "au_triage000000000000000000"}
	_ = r.MoveTo(factory.StateQueued)
	r.ForgetSteps()
	wb := s.NewLogBatch()
	wb.PutRun(r, nil)
	_ = wb.Commit()
	for _, st := range []factory.RunState{factory.StateClaimed, factory.StateInProgress, factory.StateFailed} {
		if _, err := s.UpdateRun(r.ID, true, func(r *factory.Run, _ *store.Batch) error { return r.MoveTo(st) }); err != nil {
			t.Fatal(err)
		}
	}
	n.Wake()
	got := await(t, rc, 1)
	if len(got) != 1 || got[0].run != "run_triage" || got[0].typ != factory.RunFailed {
		t.Fatalf("got %+v", got)
	}
}

// TestGeneratedSecret: a route that names no secret is signed with one
// generated for it, revealed once.
func TestGeneratedSecret(t *testing.T) {
	t.Parallel()
	rc := &receiver{}
	s, n, f := outbox(t, rc, factory.NotificationRoute{Name: "ops", Events: []string{factory.RunCreated}})
	v, err := n.RevealSecret(f, "ops")
	if err != nil || !strings.HasPrefix(string(v), "whsec_") {
		t.Fatalf("%q %v", v, err)
	}
	if _, err := n.RevealSecret(f, "ops"); err == nil || !strings.Contains(err.Error(), "already revealed") {
		t.Fatalf("a second reveal: %v", err)
	}
	if _, err := n.RevealSecret(f, "nope"); err == nil {
		t.Fatal("an unknown route revealed")
	}
	lifecycle(t, s, n, "run_a", f.UID)
	got := await(t, rc, 1)
	wh, _ := standardwebhooks.NewWebhook(string(v))
	if err := wh.Verify(got[0].body, got[0].header); err != nil {
		t.Fatal(err)
	}
}
