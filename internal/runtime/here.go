package runtime

import (
	"context"

	"factory"
)

// Here runs a turn on this machine with ex: its folder laid out (LayOut),
// its repositories cloned (CheckOut), the runner's setup commands where the
// turn has them (their output in SetupLog), then the agent. The control plane's own host and a
// worker's direct backend both run turns this way.
func Here(ctx context.Context, t Turn, ex Executor, events func(Event)) Result {
	defer t.Release()
	if err := LayOut(&t); err != nil {
		return Result{State: factory.StateError, Message: "preparing the workspace: " + err.Error()}
	}
	if res, ok := CheckOut(ctx, t, events); !ok {
		return res
	}
	if len(t.Setup) > 0 {
		if res, ok := RunSetup(ctx, t, events); !ok {
			return res
		}
	}
	return ex.Run(ctx, t, events)
}
