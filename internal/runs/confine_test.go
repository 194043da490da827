package runs_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"factory"
	"factory/internal/runs"
)

// reach is an agent that tries what it must not: the server's keys and
// store in the data directory, another run's workspace, a credential
// elsewhere on the machine, and a write into the data directory. It says what it could do, then
// that it is done.
const reach = `DATA=$(cd ../../.. && pwd)
for f in "$DATA/admin-api-key" "$DATA/secrets.key" "$DATA/runs/run_other/workspace/secret.txt" "$OUTSIDE/creds"; do
  if cat "$f" >/dev/null 2>&1; then echo "READ $f"; fi
done
if ls "$DATA" >/dev/null 2>&1; then echo "LISTED the data directory"; fi
if ls "$DATA/runs" >/dev/null 2>&1; then echo "LISTED the runs"; fi
if (echo planted > "$DATA/planted") 2>/dev/null; then echo "WROTE into the data directory"; fi
echo mine > "$FACTORY_OUTPUT_DIR/mine.txt" && echo mine > own.txt && echo "done"`

// TestAgentsAreConfinedByDefault is the attack of an agent of the
// server's own process, run as the server's user (no user:), on what the
// server holds. On a kernel with Landlock it reaches none of it, and still
// works in its own folders.
func TestAgentsAreConfinedByDefault(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	data := filepath.Join(dir, "data")
	for name, content := range map[string]string{
		filepath.Join(data, "admin-api-key"):                                "fk_admin",
		filepath.Join(data, "secrets.key"):                                  "the key",
		filepath.Join(data, "runs", "run_other", "workspace", "secret.txt"): "another run's",
		filepath.Join(outside, "creds"):                                     "a credential",
	} {
		os.MkdirAll(filepath.Dir(name), 0o700)
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("OUTSIDE", outside)
	f := newManager(t, dir, 1, "OUTSIDE="+outside+"; "+reach)
	r := f.create("reach")
	r = f.wait(r.ID, factory.StateSucceeded)
	events, _ := f.s.RunEvents(r.ID)
	var said []string
	for _, e := range events {
		if e.Kind == "message" {
			said = append(said, e.Message)
		}
	}
	all := strings.Join(said, "\n")
	if !strings.Contains(all, "done") {
		t.Fatalf("the agent did not work in its own folders:\n%s", all)
	}
	for _, line := range said {
		if strings.HasPrefix(line, "READ ") || strings.HasPrefix(line, "LISTED ") || strings.HasPrefix(line, "WROTE ") {
			t.Errorf("the agent %s", line)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "planted")); err == nil {
		t.Errorf("the agent wrote into the data directory")
	}
}

// shared is an agent of two runs that share a user: one holds (its
// workspace has a file of its own), the other looks through /proc for
// another run's agent and reads its environment and, from its HOME, its
// workspace.
const shared = `if grep -q hold PROMPT.md; then echo "the holder's own" > mine; : > holding; sleep 4; echo held; exit 0; fi
for e in /proc/[0-9]*/environ; do
  run=$(tr '\0' '\n' < "$e" 2>/dev/null | grep '^FACTORY_RUN_ID=')
  [ -n "$run" ] && [ "$run" != "FACTORY_RUN_ID=$FACTORY_RUN_ID" ] || continue
  echo "READ the environment of $run"
  home=$(tr '\0' '\n' < "$e" | sed -n 's/^HOME=//p')
  for f in "$home/mine" "$home/../workspace/mine"; do if cat "$f" 2>/dev/null; then echo "READ $f"; fi; done
done
echo looked`

// TestSharedUserRunsAreApart is the attack of a run on another that runs
// at the same time as the same user (an environment's user:): through /proc
// it finds the other's agent, reads its environment (its secrets), and
// from there its workspace. Confined (Landlock), neither is reachable.
func TestSharedUserRunsAreApart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root (or CAP_SETUID); this test runs as root in CI")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	dir := t.TempDir()
	os.Chmod(dir, 0o755) // the agent user must be able to pass the folders above the data directory
	os.Chmod(filepath.Dir(dir), 0o755)
	f := newManager(t, dir, 2, shared, func(c *runs.Config) {
		env := c.Environments["sh"]
		env.RunAs = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		c.Environments["sh"] = env
	})
	holder := f.create("hold")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(f.m.Workspace(holder.ID), "holding")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holding run did not start")
		}
	}
	reacher := f.wait(f.create("reach").ID, factory.StateSucceeded)
	events, _ := f.s.RunEvents(reacher.ID)
	looked := false
	for _, e := range events {
		looked = looked || e.Message == "looked"
		if strings.HasPrefix(e.Message, "READ ") || strings.Contains(e.Message, "the holder's own") {
			t.Errorf("a run reached another run of the same user: %s", e.Message)
		}
	}
	if !looked {
		t.Fatalf("the reaching run did not look")
	}
	f.wait(holder.ID, factory.StateSucceeded)
}
