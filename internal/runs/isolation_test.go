package runs_test

import (
	"strings"
	"syscall"
	"testing"

	"factory/internal/confine"
	"factory/internal/runs"
	"factory/internal/runtime"
)

// TestIsolationSaysWhatIsShared: unconfined, environments that share a
// user (or one whose runs run at once) are said to share everything, and
// agents of the server's own user to reach the data directory; confined,
// neither is said.
func TestIsolationSaysWhatIsShared(t *testing.T) {
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	envs := map[string]runs.Environment{
		"a":    {Executor: &runtime.ExecExecutor{Command: []string{"true"}}, RunAs: nobody},
		"b":    {Executor: &runtime.ExecExecutor{Command: []string{"true"}}, RunAs: nobody},
		"mine": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}},
	}
	unconfined := runs.NewManager(runs.Config{DataDir: t.TempDir(), Environments: envs, Unconfined: true}).Isolation()
	all := strings.Join(unconfined.Warnings, "\n")
	if unconfined.Confined || !strings.Contains(all, "environments a, b: agents run as user 65534, unconfined: runs that share a user share everything") ||
		!strings.Contains(all, "environment mine: agents run as the server's user, unconfined") {
		t.Errorf("unconfined: %+v", unconfined)
	}
	if w := runs.NewManager(runs.Config{DataDir: t.TempDir(), Environments: envs, Unconfined: true}).EnvironmentIsolation("a"); !strings.Contains(w,
		"environment a: its agents run as user 65534, unconfined, shared with environments b and runs of it at the same time") {
		t.Errorf("unconfined, environment a: %q", w)
	}
	if confine.ABI() == 0 {
		t.Skip("this kernel has no Landlock: agents cannot be confined here")
	}
	confined := runs.NewManager(runs.Config{DataDir: t.TempDir(), Environments: envs}).Isolation()
	if !confined.Confined || strings.Contains(strings.Join(confined.Warnings, "\n"), "share everything") {
		t.Errorf("confined: %+v", confined)
	}
	if w := runs.NewManager(runs.Config{DataDir: t.TempDir(), Environments: envs}).EnvironmentIsolation("a"); w != "" {
		t.Errorf("confined, environment a: %q", w)
	}
}
