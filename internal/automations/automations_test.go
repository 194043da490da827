package automations

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"factory"

	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
)

// TestEvaluationIsExactlyOnce covers the window a crash can fall in: runs
// started, delivery not yet off the queue. Evaluating it again (as the
// restarted server does) must start nothing new.
func TestEvaluationIsExactlyOnce(t *testing.T) {
	const uid = "wh_0000000000000000ev01"
	s, m := setUp(t, uid, "one", "two", "off")
	d := &factory.Delivery{ID: "dlv_0001", WebhookUID: uid, Label: factory.LabelAccepted, Time: time.Now(), RunIDs: []string{}}
	if err := s.RecordDelivery(d, []byte(`{"x":1}`), nil); err != nil {
		t.Fatal(err)
	}
	e := &Evaluator{Store: s, Runs: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}

	// The crash: runs started, the delivery still queued.
	hook, _ := s.WebhookByUID(uid)
	first, err := e.fire(hook, d)
	if err != nil || len(first) != 2 {
		t.Fatalf("first evaluation: %v %v (a disabled automation must not fire)", first, err)
	}
	// The restart evaluates the queue again.
	if err := e.Drain(); err != nil {
		t.Fatal(err)
	}
	runs, _ := s.RunsInState(factory.StateQueued)
	if len(runs) != 2 {
		t.Fatalf("%d runs after re-evaluation, want 2", len(runs))
	}
	got, _ := s.Delivery(uid, d.ID)
	if len(got.RunIDs) != 2 || got.RunIDs[0] != first[0] && got.RunIDs[0] != first[1] {
		t.Fatalf("the delivery's runs: %v vs %v", got.RunIDs, first)
	}
	if q, _ := s.EvalQueue(10); len(q) != 0 {
		t.Fatalf("still queued: %v", q)
	}
	// And the runs execute once the manager runs.
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.Wait() }()
	m.Start(ctx)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		done, _ := s.RunsInState(factory.StateSucceeded)
		if len(done) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("runs did not finish")
		}
	}
}

// TestHandOffAndScans covers the three ways a delivery reaches the
// evaluator: the stored queue at start, the in-memory hand-off, and a scan
// after the hand-off overflowed. Each delivery starts its run once.
func TestHandOffAndScans(t *testing.T) {
	const uid = "wh_0000000000000000ev02"
	s, m := setUp(t, uid, "a")
	accept := func(id string) store.QueueItem {
		d := &factory.Delivery{ID: id, WebhookUID: uid, Label: factory.LabelAccepted, Time: time.Now(), RunIDs: []string{}}
		if err := s.RecordDelivery(d, []byte(`{"n":1}`), nil); err != nil {
			t.Fatal(err)
		}
		return store.QueueItem{DeliveryID: id, WebhookUID: uid}
	}
	// A small hand-off buffer: a burst of hand-overs overflows it while the
	// evaluator gathers.
	e := &Evaluator{Store: s, Runs: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), buffer: 4}
	evaluated := func(id string) bool {
		d, err := s.Delivery(uid, id)
		return err == nil && len(d.RunIDs) == 1
	}
	waitFor := func(id, how string) {
		t.Helper()
		// Well within the 5 s after which an idle evaluator scans anyway.
		for deadline := time.Now().Add(3 * time.Second); !evaluated(id); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("delivery %s (%s) was not evaluated", id, how)
			}
		}
	}

	accept("dlv_0001") // accepted before the evaluator runs: found by the start-up scan
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor("dlv_0001", "the start-up scan")

	e.Queued(accept("dlv_0002")) // handed over
	waitFor("dlv_0002", "the hand-off")

	// Lost from the hand-off: a delivery on disk never handed over, then
	// more hand-overs than the buffer holds (of a webhook that does not
	// exist): the overflow makes the evaluator scan the stored queue.
	accept("dlv_0003")
	for i := 0; i < 1000; i++ {
		e.Queued(store.QueueItem{DeliveryID: "dlv_x", WebhookUID: "wh_unknown"})
	}
	waitFor("dlv_0003", "the scan after an overflow")

	runs, err := s.RunsInState(factory.StateQueued)
	if err != nil {
		t.Fatal(err)
	}
	all := len(runs)
	for _, st := range []factory.RunState{factory.StateInProgress, factory.StateSucceeded, factory.StateFailed, factory.StateError} {
		more, _ := s.RunsInState(st)
		all += len(more)
	}
	if all != 3 {
		t.Fatalf("%d runs for 3 deliveries", all)
	}
	if q, _ := s.EvalQueue(10); len(q) != 0 {
		t.Fatalf("still queued: %v", q)
	}
}

// setUp makes a store with a factory, a webhook, and an automation on it
// for each key (the one named "off" disabled), and a run manager whose
// runs run `true`.
func setUp(t *testing.T, uid string, keys ...string) (*store.Store, *runs.Manager) {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := s.NewBatch()
	b.PutFactory(&factory.Factory{Name: "acme", UID: "fc_0000000000000000ac01"})
	b.PutWebhook(&factory.Webhook{Factory: "acme", Key: "w", UID: uid, Spec: factory.WebhookSpec{Name: "w", AuthMode: "token", Enabled: true}})
	for _, key := range keys {
		b.PutAutomation(&factory.Automation{Factory: "acme", Key: key, UID: "au_" + key + "0000000000000000",
			Spec: factory.AutomationSpec{Title: key, Enabled: key != "off", Prompt: "Go.\n",
				Triggers: []factory.Trigger{{Provider: "webhook", Event: "received", Filter: factory.TriggerFilter{WebhookIDs: []string{uid}}}}}})
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "sh", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	return s, m
}
