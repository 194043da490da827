package workers_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"factory"
	"factory/internal/runtime"
	"factory/internal/store"
	"factory/internal/worker"
	"factory/internal/workers"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRevokedWorkerIsCutOff is the attack of a worker revoked while it is
// connected: its open connection went on pulling turns (with their
// secrets), claiming them and ending runs. Revocation closes its
// connections at once, and whatever still comes in its name (a claim, an
// event: from a cluster of one's own that kept it connected) is refused.
func TestRevokedWorkerIsCutOff(t *testing.T) {
	cp := embeddedControlPlane(t)
	var claims atomic.Int32
	cp.SetClaim(func(runID, attempt, w string) error { claims.Add(1); return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
	claim := func() worker.ClaimAnswer {
		b, _ := json.Marshal(worker.ClaimRequest{RunID: "run_1", Attempt: "at_1"})
		m, err := own(t, cp).Request(worker.ClaimSubject("w1"), b, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var ans worker.ClaimAnswer
		json.Unmarshal(m.Data, &ans)
		return ans
	}
	if ans := claim(); !ans.OK || claims.Load() != 1 {
		t.Fatalf("before revocation, a claim: %+v", ans)
	}
	if err := cp.Registry.Revoke(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); cp.NATS.Connected("w1") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // its reconnections are refused
	if cp.NATS.Connected("w1") || nc.IsConnected() {
		t.Error("the revoked worker's connection stays open")
	}
	if ans := claim(); ans.OK || claims.Load() != 1 {
		t.Errorf("after revocation, a claim in its name: %+v (%d recorded)", ans, claims.Load())
	}
	// An event in its name: its turn's end is not applied; the turn's
	// lease ends it.
	done := make(chan runtime.Result, 1)
	go func() {
		res, _ := cp.Host().Follow(ctx, &runtime.Turn{RunID: "run_1", Attempt: "at_1", Worker: "w1", Dir: t.TempDir()}, func(runtime.Event) {})
		done <- res
	}()
	time.Sleep(100 * time.Millisecond)
	ev, _ := json.Marshal(worker.Event{RunID: "run_1", Attempt: "at_1", Kind: "done", Result: &runtime.Result{State: factory.StateSucceeded}})
	js, _ := jetstream.New(own(t, cp))
	if _, err := js.Publish(ctx, worker.EventsSubject("w1"), ev); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.State == factory.StateSucceeded {
		t.Errorf("a revoked worker's event ended a run: %+v", res)
	}
}

// own is a connection with the control plane's own credentials, which may
// publish on any worker's subjects: what a worker's connection kept open
// by a cluster of one's own could still send.
func own(t *testing.T, cp *workers.ControlPlane) *nats.Conn {
	t.Helper()
	nc, err := workers.Connect(cp.NATS.URL, cp.NATS.Own, "as the worker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// embeddedControlPlane is a control plane with its embedded NATS server on
// loopback, over a store on a temporary folder; both end with the test.
func embeddedControlPlane(t *testing.T) *workers.ControlPlane {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	cp, err := workers.StartControlPlane(context.Background(), workers.Options{Listen: addr, Lease: time.Second}, s, dir,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	return cp
}
