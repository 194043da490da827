package workers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"factory"
	"factory/client"
	"factory/internal/workers"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// TestExternalNATS: the control plane on a NATS cluster of its own
// (serve --nats, a user whose password is in a file): factory workers
// create registers the worker's queue and prints the permissions its user
// needs, no password; the cluster's operator makes that user (an nkey
// here; a password in the environment for a second worker), and the
// workers, connecting with them, run the runs; workers list sees them
// connected (they answer the control plane's presence check). No password
// is on a command line, where every local user reads it.
func TestExternalNATS(t *testing.T) {
	ns, seedFile := externalCluster(t)
	pwFile := filepath.Join(t.TempDir(), "cp.password")
	if err := os.WriteFile(pwFile, []byte("cp-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cl := controlPlane(t, 2*time.Second, "--nats", "nats://"+ns.Addr().String(), "--nats-user", "cp", "--nats-password-file", pwFile)
	// The attack: any local user (an agent included) reads the control
	// plane's command line.
	notOnCommandLine(t, cl.proc, "cp-secret")
	if strings.Contains(cl.proc.log(), "cp-secret") {
		t.Fatalf("the control plane logged its NATS password:\n%s", cl.proc.log())
	}

	credsFile := registerExternal(t, cl, "w1", "nats://"+ns.Addr().String())
	w := start(t, "w1", "--data", t.TempDir(), "worker", "--creds", credsFile, "--nats-nkey", seedFile, "--max-runs", "2")
	var ids []string
	for range 4 {
		ids = append(ids, cl.create(t, "quick"))
	}
	for _, id := range ids {
		r := cl.wait(t, id, 30*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
		if r.State != factory.StateSucceeded || r.Executor.UID != "w1" {
			t.Fatalf("run %s: %s on %+v\n%s", id, r.State, r.Executor, w.log())
		}
	}
	var list struct {
		Workers []workers.WorkerInfo `json:"workers"`
	}
	if err := cl.c.Do(context.Background(), "GET", "/v1/admin/workers", nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Workers) != 1 || !list.Workers[0].Connected {
		t.Fatalf("workers: %+v", list.Workers)
	}

	// A worker whose user the cluster does not know does not get in.
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	otherFile := filepath.Join(t.TempDir(), "other.nk")
	_ = os.WriteFile(otherFile, otherSeed, 0o600)
	intruder := start(t, "intruder", "--data", t.TempDir(), "worker", "--creds", credsFile, "--nats-nkey", otherFile)
	if err := intruder.cmd.Wait(); err == nil || !strings.Contains(intruder.log(), "Authorization Violation") {
		t.Fatalf("a worker the cluster does not know: %v\n%s", err, intruder.log())
	}

	// A worker whose user has a password, given in the environment; w1
	// stops, so that w2 runs what comes next.
	creds2File := registerExternal(t, cl, "w2", "nats://"+ns.Addr().String())
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	_ = w.cmd.Wait()
	t.Setenv("FACTORY_NATS_PASSWORD", "w2-secret")
	w2 := start(t, "w2", "--data", t.TempDir(), "worker", "--creds", creds2File, "--max-runs", "2")
	r := cl.wait(t, cl.create(t, "quick"), 30*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
	if r.State != factory.StateSucceeded || r.Executor.UID != "w2" {
		t.Fatalf("a run on the worker with a password: %s on %+v\n%s", r.State, r.Executor, w2.log())
	}
	notOnCommandLine(t, w2, "w2-secret")
}

// externalCluster is a NATS server of the operator's: the control plane's
// user cp (password cp-secret), the worker w1's (an nkey: its seed's file
// is returned) and w2's (password w2-secret), with the permissions factory
// workers create prints.
func externalCluster(t *testing.T) (*server.Server, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "w1.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, MaxPayload: 8 << 20,
		Users: []*server.User{{Username: "cp", Password: "cp-secret"},
			{Username: "w2", Password: "w2-secret", Permissions: workers.ServerPermissions(workers.WorkerPermissions("w2"))}},
		Nkeys: []*server.NkeyUser{{Nkey: pub, Permissions: workers.ServerPermissions(workers.WorkerPermissions("w1"))}}})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	t.Cleanup(ns.Shutdown)
	return ns, seedFile
}

// registerExternal creates a worker on a control plane over a cluster of
// its own and writes its credentials file: no password, the permissions
// its user needs.
func registerExternal(t *testing.T, cl *cluster, name, natsURL string) string {
	t.Helper()
	var creds workers.CredentialsFile
	if err := cl.c.Do(context.Background(), "POST", "/v1/admin/workers", strings.NewReader(`{"name":"`+name+`"}`), &creds); err != nil {
		t.Fatal(err)
	}
	if creds.Password != "" || creds.Permissions == nil || creds.URL != natsURL || creds.User != name {
		t.Fatalf("credentials on a cluster of its own: %+v", creds)
	}
	b, _ := json.Marshal(creds)
	file := filepath.Join(t.TempDir(), name+".creds")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// notOnCommandLine fails when a process's command line, which every local
// user can read, holds the secret.
func notOnCommandLine(t *testing.T, p *proc, secret string) {
	t.Helper()
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.cmd.Process.Pid))
	if err != nil || strings.Contains(string(cmdline), secret) {
		t.Fatalf("a NATS password is on a command line, for every local user to read: %v %q", err, cmdline)
	}
}

// TestNkeyWorker: a worker created with --nkey (factory workers create NAME
// --nkey) signs in with its seed, and runs runs.
func TestNkeyWorker(t *testing.T) {
	cl := controlPlane(t, 2*time.Second)
	out, err := exec.Command(binary(t), "--server", cl.url, "--api-key", cl.adminKey, "workers", "create", "nk", "--nkey").Output()
	if err != nil || !strings.Contains(string(out), `"nkey_seed":"SU`) || strings.Contains(string(out), `"password"`) {
		t.Fatalf("workers create --nkey: %v\n%s", err, out)
	}
	creds := filepath.Join(t.TempDir(), "nk.creds")
	if err := os.WriteFile(creds, out, 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, "nk", "--data", t.TempDir(), "worker", "--creds", creds)
	r := cl.wait(t, cl.create(t, "quick"), 20*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
	if r.State != factory.StateSucceeded || r.Executor.UID != "nk" {
		t.Fatalf("%s on %+v", r.State, r.Executor)
	}
}
