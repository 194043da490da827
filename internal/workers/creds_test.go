package workers_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"factory/client"
)

// steal is an agent that looks for its worker's credentials: the path on
// its parent's command line, then the file.
const steal = `
  steal:
    executor: exec
    command: ["sh", "-c", "args=$(tr '\\000' ' ' < /proc/$PPID/cmdline); echo \"parent: $args\"; f=$(echo \"$args\" | sed -n 's/.*--creds[= ]\\([^ ]*\\).*/\\1/p'); if [ -n \"$f\" ] && cat \"$f\"; then echo; echo STOLE; fi; echo looked"]
`

// TestAgentsDoNotFindTheWorkersCredentials is the attack of an agent on a
// direct worker: its parent's command line names the worker's credentials
// file, which it then reads and becomes the worker. The path is not on the
// worker's command line, and the file is out of the agent's reach.
func TestAgentsDoNotFindTheWorkersCredentials(t *testing.T) {
	cl := controlPlaneWith(t, 2*time.Second, steal)
	w := cl.worker(t, "w-creds", 1)
	r, err := cl.c.CreateRun(context.Background(), client.RunRequest{Prompt: "look", Config: map[string]any{"environment_id": "steal"}})
	if err != nil {
		t.Fatal(err)
	}
	cl.wait(t, r.RunID, 30*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
	events, err := cl.c.Timeline(context.Background(), r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, e := range events {
		said = append(said, e.Message)
	}
	all := strings.Join(said, "\n")
	if !strings.Contains(all, "looked") {
		t.Fatalf("the agent did not run:\n%s", all)
	}
	if strings.Contains(all, ".creds") || strings.Contains(all, "STOLE") || strings.Contains(all, "password") {
		t.Errorf("the agent found the worker's credentials:\n%s", all)
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(w.cmd.Process.Pid) + "/cmdline")
	if strings.Contains(string(cmdline), ".creds") {
		t.Errorf("the worker's command line names its credentials: %q", cmdline)
	}
}
