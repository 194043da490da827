package workers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/runtime"
	"factory/internal/worker"
	"factory/internal/workers"

	"github.com/nats-io/nats.go/jetstream"
)

// TestOrphanEventsAreBounded is the attack of a worker on the control
// plane's memory and disk: "done" events, each with a large result, for
// turns nobody follows, then a flood of messages for a turn that is live
// but not followed yet. What no live turn owns is dropped; what one owns
// is held within bounds; the events stream is bounded in messages and
// bytes.
func TestOrphanEventsAreBounded(t *testing.T) {
	cp := embeddedControlPlane(t)
	cp.SetOwner(func(runID, attempt string) bool { return attempt == "at_live" })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	creds, err := cp.Registry.Create(ctx, "w1", "")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := workers.Connect(cp.NATS.URL, creds.Credentials, "w1")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	big := strings.Repeat("x", 64<<10)
	publish := func(e worker.Event) {
		b, _ := json.Marshal(e)
		if _, err := js.PublishAsync(worker.EventsSubject("w1"), b); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 500 {
		publish(worker.Event{RunID: "run_x", Attempt: fmt.Sprintf("at_%d", i), Kind: "done", Result: &runtime.Result{State: factory.StateSucceeded, Message: big}})
	}
	for i := range 2000 {
		publish(worker.Event{RunID: "run_live", Attempt: "at_live", Kind: "message", Message: fmt.Sprintf("%d %s", i, big[:4<<10])})
	}
	publish(worker.Event{RunID: "run_live", Attempt: "at_live", Kind: "done", Result: &runtime.Result{State: factory.StateSucceeded}})
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publishing timed out")
	}
	jsOwn, _ := jetstream.New(own(t, cp))
	consumed(t, ctx, jsOwn)
	events, bytes := cp.Host().Orphans()
	if events > 202 || bytes > 2<<20 {
		t.Errorf("the dispatcher holds %d events (%d bytes) of turns nobody follows", events, bytes)
	}
	// The live turn, followed now, still gets its end.
	res, _ := cp.Host().Follow(ctx, &runtime.Turn{RunID: "run_live", Attempt: "at_live", Worker: "w1", Dir: t.TempDir()}, func(runtime.Event) {})
	if res.State != factory.StateSucceeded {
		t.Errorf("the live turn's end was lost: %+v", res)
	}
	info, err := jsOwn.Stream(ctx, worker.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	c := info.CachedInfo().Config
	if c.MaxBytes <= 0 || c.MaxMsgs <= 0 || c.MaxMsgsPerSubject <= 0 || c.MaxMsgSize <= 0 {
		t.Errorf("the events stream is not bounded: %d bytes, %d messages, %d per worker, %d a message", c.MaxBytes, c.MaxMsgs, c.MaxMsgsPerSubject, c.MaxMsgSize)
	}
}

// consumed waits until the control plane has taken every event of the
// stream.
func consumed(t *testing.T, ctx context.Context, js jetstream.JetStream) {
	t.Helper()
	for {
		c, err := js.Consumer(ctx, worker.EventsStream, "control-plane")
		if err == nil {
			if info, err := c.Info(ctx); err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the control plane did not take the events")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
