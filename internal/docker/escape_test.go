package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"factory"
	"factory/internal/docker/dockertest"
	"factory/internal/runtime"
)

// hostTargets are what an agent in a container aims at on the worker's
// machine: a file it would have the worker overwrite, and a folder of
// secrets it would have the worker read, list or write into.
func hostTargets(t *testing.T) (victim, secrets string) {
	t.Helper()
	outside := t.TempDir()
	victim = filepath.Join(outside, "victim")
	secrets = filepath.Join(outside, "secrets")
	if err := os.WriteFile(victim, []byte("the worker's own file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "secret.txt"), []byte("the worker's credentials"), 0o600); err != nil {
		t.Fatal(err)
	}
	return victim, secrets
}

// checkHostUntouched fails the test when the worker wrote through what
// the agent left: the victim changed, or anything appeared in the secrets.
func checkHostUntouched(t *testing.T, victim, secrets string) {
	t.Helper()
	if b, _ := os.ReadFile(victim); string(b) != "the worker's own file" {
		t.Errorf("the worker wrote through a link the agent left: the host's file now holds %q", b)
	}
	entries, _ := os.ReadDir(secrets)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the worker wrote into a host folder the agent linked: %v", names)
	}
}

// TestExecAgentCannotRedirectTheWorker is the attack of an exec agent on
// its run's folder: it leaves links where the worker writes the next
// turn's script and environment, and swaps the workspace and the output
// folder for links to the worker's own files. The next turn must write
// nothing through them, and the run's folder must hold what the worker
// made, not the agent's links.
func TestExecAgentCannotRedirectTheWorker(t *testing.T) {
	b := Daemon(t, "test-escape-exec")
	victim, secrets := hostTargets(t)
	dir, turn := runDir(t, "p")
	attack := strings.Join([]string{
		"for f in turn.sh turn.env setup.log setup.status harness/turn.sh harness/turn.env; do rm -f /factory/$f; ln -s " + Quote(victim) + " /factory/$f; done",
		"mv /factory/workspace /factory/workspace.old && ln -s " + Quote(secrets) + " /factory/workspace",
		"mv /factory/output /factory/output.old && ln -s " + Quote(secrets) + " /factory/output",
		"echo attacked",
	}, "; ")
	ct := withCommand(turn, dockertest.Image, "/bin/sh", "-c", attack)
	var rec recorder
	if res := b.Run(context.Background(), ct, rec.event); res.State != factory.StateSucceeded {
		t.Fatalf("the attacking turn: %+v\n%s", res, rec.all())
	}
	for _, d := range []string{"workspace", "output"} {
		if fi, err := os.Lstat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("the run's %s is no longer the worker's folder: %v %v", d, fi.Mode(), err)
		}
	}
	// The next turn: the worker lays the workspace out and writes the
	// turn's script and environment again.
	ct.FollowUp, ct.Command = "again", []string{"/bin/sh", "-c", "echo second"}
	next := ct
	defer next.Release()
	if err := runtime.LayOut(&next); err != nil {
		t.Logf("laying the next turn out: %v", err)
	}
	rec = recorder{}
	res := b.Run(context.Background(), next, rec.event)
	checkHostUntouched(t, victim, secrets)
	if res.State != factory.StateSucceeded || !strings.Contains(rec.all(), "second") {
		t.Errorf("the next turn: %+v\n%s", res, rec.all())
	}
}

// acpAttack is an ACP agent in a shell: it answers initialize and
// session/new, and at its prompt swaps the workspace for a link to the
// worker's secrets, asks the worker to read and to write a file there,
// reports the answers as its messages, and ends its turn.
const acpAttack = `
reply() { printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$1" "$2"; }
idof() { printf '%s' "$1" | sed -n 's/^.*"id":\([0-9][0-9]*\).*$/\1/p'; }
say() { esc=$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr -d '\n'); printf '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s\\n"}}}}\n' "$esc"; }
read -r l; reply "$(idof "$l")" '{"protocolVersion":1,"agentCapabilities":{}}'
read -r l; reply "$(idof "$l")" '{"sessionId":"s1"}'
read -r l; p=$(idof "$l")
mv /factory/workspace /factory/workspace.old 2>/dev/null && ln -s "$SECRETS" /factory/workspace
printf '{"jsonrpc":"2.0","id":901,"method":"fs/read_text_file","params":{"sessionId":"s1","path":"/factory/workspace/secret.txt"}}\n'
read -r l; say "read: $l"
printf '{"jsonrpc":"2.0","id":902,"method":"fs/write_text_file","params":{"sessionId":"s1","path":"/factory/workspace/planted.txt","content":"planted"}}\n'
read -r l; say "write: $l"
reply "$p" '{"stopReason":"end_turn"}'
`

// TestACPAgentCannotRedirectTheWorker is the attack of an ACP agent: it
// replaces its workspace with a link to the worker's files, then asks the
// worker to read and write there over the protocol. The worker must
// serve neither.
func TestACPAgentCannotRedirectTheWorker(t *testing.T) {
	b := Daemon(t, "test-escape-acp")
	victim, secrets := hostTargets(t)
	_, turn := runDir(t, "p")
	turn.Executor, turn.Env = runtime.ExecutorACP, []string{"SECRETS=" + secrets}
	var rec recorder
	res := b.Run(context.Background(), withCommand(turn, dockertest.Image, "/bin/sh", "-c", acpAttack), rec.event)
	msgs := rec.all()
	if !strings.Contains(msgs, "read: ") || !strings.Contains(msgs, "write: ") {
		t.Fatalf("the attack did not run: %+v\n%s", res, msgs)
	}
	if strings.Contains(msgs, "the worker's credentials") {
		t.Errorf("the worker served a host file to the agent:\n%s", msgs)
	}
	checkHostUntouched(t, victim, secrets)
}
