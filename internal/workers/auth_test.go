package workers_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory/internal/store"
	"factory/internal/workers"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// TestWorkerPermissions: the embedded server lets in the control plane
// and registered workers only, and a worker reaches only its own queue,
// its own events and its own inbox; a revoked worker is refused.
func TestWorkerPermissions(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	reg := &workers.Registry{Store: s}
	emb, err := workers.StartEmbedded(dir, addr, &workers.Accounts{Worker: reg.Lookup, WorkerByNkey: reg.ByNkey}, "control-password", "")
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	cp, err := workers.Connect(emb.URL, emb.Own, "control plane")
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	js, _ := jetstream.New(cp)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := workers.Setup(ctx, js); err != nil {
		t.Fatal(err)
	}
	reg.JS, reg.URL = js, emb.URL
	c1, err := reg.Create(ctx, "w1", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Create(ctx, "w2", ""); err != nil {
		t.Fatal(err)
	}
	checkNkeyWorker(t, ctx, emb, reg)
	for name, c := range map[string]workers.Credentials{"a wrong password": {User: "w1", Password: "nope"}, "an unknown worker": {User: "w9", Password: c1.Password},
		"the control plane's name with a worker's password": {User: workers.ControlUser, Password: c1.Password}} {
		if nc, err := workers.Connect(emb.URL, c, "x"); err == nil {
			nc.Close()
			t.Errorf("%s connected", name)
		}
	}
	checkWorkerReach(t, ctx, emb, c1)
	if err := reg.Revoke(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if nc, err := workers.Connect(emb.URL, c1.Credentials, "x"); err == nil {
		nc.Close()
		t.Error("a revoked worker connected")
	}
}

// checkWorkerReach: w1 reaches its own queue, the shared one and its own
// events, and nothing of w2's, nor anyone's inbox.
func checkWorkerReach(t *testing.T, ctx context.Context, emb *workers.Embedded, c1 *workers.CredentialsFile) {
	t.Helper()
	var denied = make(chan error, 8)
	nc, err := nats.Connect(emb.URL, nats.UserInfo(c1.User, c1.Password), nats.CustomInboxPrefix("_INBOX_w1"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { denied <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	w1, _ := jetstream.New(nc)
	if _, err := w1.Consumer(ctx, workers.RunsStream, "host-w1"); err != nil {
		t.Fatalf("w1 cannot reach its own queue: %v", err)
	}
	if _, err := w1.Consumer(ctx, workers.RunsStream, "any"); err != nil {
		t.Fatalf("w1 cannot reach the shared queue: %v", err)
	}
	short, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	if _, err := w1.Consumer(short, workers.RunsStream, "host-w2"); err == nil {
		t.Fatal("w1 reached w2's queue")
	}
	if _, err := w1.Publish(ctx, "factory.events.w1", []byte(`{}`)); err != nil {
		t.Fatalf("w1 cannot report: %v", err)
	}
	own, err := w1.ObjectStore(ctx, "FACTORY_OUTPUTS_w1")
	if err != nil {
		t.Fatalf("w1 cannot reach its object store: %v", err)
	}
	if _, err := own.PutBytes(ctx, "at_1/report.md", bytes.Repeat([]byte("x"), 300<<10)); err != nil {
		t.Fatalf("w1 cannot put an output: %v", err)
	}
	if _, err := w1.ObjectStore(short, "FACTORY_OUTPUTS_w2"); err == nil {
		t.Fatal("w1 reached w2's object store")
	}
	for _, subject := range []string{"$O.FACTORY_OUTPUTS_w2.C.x", "$O.FACTORY_OUTPUTS_w2.M.x", "$JS.API.STREAM.PURGE.OBJ_FACTORY_OUTPUTS_w2"} {
		drain(denied) // the refusals of the calls before
		nc.Publish(subject, []byte(`{}`))
		nc.Flush()
		if !permissionDenied(denied) {
			t.Errorf("w1 published to %s", subject)
		}
	}
	for _, subject := range []string{"factory.events.w2", "factory.runs.any"} {
		drain(denied) // the refusals of the calls before
		nc.Publish(subject, []byte(`{}`))
		nc.Flush()
		if !permissionDenied(denied) {
			t.Errorf("w1 published to %s", subject)
		}
	}
	for _, subject := range []string{"_INBOX.>", "factory.control.w2", "factory.events.>"} {
		drain(denied)
		nc.Subscribe(subject, func(*nats.Msg) {})
		nc.Flush()
		if !permissionDenied(denied) {
			t.Errorf("w1 subscribed to %s", subject)
		}
	}
}

func permissionDenied(ch chan error) bool {
	select {
	case err := <-ch:
		return errors.Is(err, nats.ErrPermissionViolation)
	case <-time.After(2 * time.Second):
		return false
	}
}

// drain empties ch of the errors already reported.
func drain(ch chan error) {
	time.Sleep(100 * time.Millisecond)
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestStoreEncryptedAtRest: with a key, nothing an assignment holds (a
// granted secret, say) is on disk in the clear; without one it would be
// (the control that shows the search finds it).
func TestStoreEncryptedAtRest(t *testing.T) {
	for _, key := range []string{"", "c2VjcmV0LWtleS1mb3ItdGhlLXN0b3JlLWF0LXJlc3Q="} {
		dir := t.TempDir()
		emb, err := workers.StartEmbedded(dir, "127.0.0.1:0", &workers.Accounts{Worker: func(string) ([]byte, bool) { return nil, false }}, "pw", key)
		if err != nil {
			t.Fatal(err)
		}
		nc, err := workers.Connect(emb.URL, emb.Own, "control plane")
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := workers.Setup(ctx, js); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, "factory.runs.any", []byte(`{"env":["GH_TOKEN=ghp_the-secret-value-at-rest"]}`)); err != nil {
			t.Fatal(err)
		}
		cancel()
		nc.Close()
		emb.Shutdown()
		found := false
		_ = filepath.WalkDir(filepath.Join(dir, "nats"), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				b, _ := os.ReadFile(p)
				found = found || bytes.Contains(b, []byte("the-secret-value-at-rest"))
			}
			return nil
		})
		if found != (key == "") {
			t.Errorf("key %q: the secret is on disk in the clear: %v", key, found)
		}
	}
}

// checkNkeyWorker: a worker made with an nkey signs in with its seed (no
// password in its credentials), reaches its own queue and not another's;
// another seed, a password for it, or its seed once revoked, do not get in.
func checkNkeyWorker(t *testing.T, ctx context.Context, emb *workers.Embedded, reg *workers.Registry) {
	t.Helper()
	c3, err := reg.Create(ctx, "w3", workers.AuthNkey)
	if err != nil || c3.Password != "" || !strings.HasPrefix(c3.NkeySeed, "SU") {
		t.Fatalf("an nkey worker's credentials: %+v %v", c3, err)
	}
	nc, err := workers.Connect(emb.URL, c3.Credentials, "w3")
	if err != nil {
		t.Fatalf("the nkey worker cannot connect: %v", err)
	}
	js, _ := jetstream.New(nc)
	if _, err := js.Consumer(ctx, workers.RunsStream, "host-w3"); err != nil {
		t.Errorf("w3 cannot reach its own queue: %v", err)
	}
	short, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	if _, err := js.Consumer(short, workers.RunsStream, "host-w2"); err == nil {
		t.Error("w3 reached w2's queue")
	}
	nc.Close()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	for name, c := range map[string]workers.Credentials{"another seed": {User: "w3", NkeySeed: string(otherSeed)},
		"a password for an nkey worker": {User: "w3", Password: "anything"}} {
		if nc, err := workers.Connect(emb.URL, c, "x"); err == nil {
			nc.Close()
			t.Errorf("%s connected", name)
		}
	}
	if err := reg.Revoke(ctx, "w3"); err != nil {
		t.Fatal(err)
	}
	if nc, err := workers.Connect(emb.URL, c3.Credentials, "x"); err == nil {
		nc.Close()
		t.Error("a revoked nkey worker connected")
	}
}
