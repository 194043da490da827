package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/docker/dockertest"
	"factory/internal/runtime"
	"factory/internal/testbin"
)

// TestContainerACP: an ACP agent in a container (the demo agent, a static
// factory in the image): the setup runs first, its notes on stderr become
// status messages and never reach the protocol; the agent's file lands in
// the worker's workspace. A failing setup ends the turn FAILED
// (environment_setup_failed); a turn cancelled during its setup ends
// CANCELLED at once.
func TestContainerACP(t *testing.T) {
	image := dockertest.ImageWith(t, "factory-test/demo-agent:1", map[string]string{"bin/factory": testbin.Factory(t)})
	b := Daemon(t, "test-acp")
	b.Grace = 2 * time.Second
	acp := &runtime.ACPExecutor{Command: []string{"factory", "demo-agent", "--acp"}}
	run := func(setup []string, stop bool) (runtime.Result, string, string) {
		dir, turn := runDir(t, "Summarise the build.")
		var rec recorder
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		turn.Executor, turn.Setup, turn.Runner = runtime.ExecutorACP, setup, "linux"
		res := b.Run(ctx, withCommand(turn, image, acp.Command...),
			func(e runtime.Event) {
				rec.event(e)
				if stop && strings.HasPrefix(e.Message, "setup 2/") {
					cancel(errors.New("cancelled"))
				}
			})
		return res, dir, rec.all()
	}

	res, dir, msgs := run([]string{"echo prepared > prepared.txt"}, false)
	if res.State != factory.StateSucceeded || !strings.Contains(msgs, "setup 1/1: echo prepared > prepared.txt") || !strings.Contains(msgs, "wrote SUMMARY.md") {
		t.Fatalf("%+v\n%s", res, msgs)
	}
	for _, f := range []string{"workspace/SUMMARY.md", "workspace/prepared.txt", "output/SUMMARY.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}

	res, _, _ = run([]string{"true", "echo broken >&2; exit 5"}, false)
	if res.State != factory.StateFailed || res.Code != runtime.CodeEnvironmentSetupFailed || !strings.Contains(res.Message, "exited with status 5: broken") {
		t.Errorf("a failing setup: %+v", res)
	}

	started := time.Now()
	res, _, _ = run([]string{"true", "sleep 60"}, true)
	if res.State != factory.StateCancelled || time.Since(started) > 10*time.Second {
		t.Errorf("cancelled during the setup: %+v after %s", res, time.Since(started))
	}
}
