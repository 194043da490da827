package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"factory"
)

// Supervise waits for a turn to end, for every executor alike. The agent
// ends it (ended is closed; finish says how), or the turn is stopped: the
// run is cancelled (ctx), the environment's timeout passes, or the agent
// is quiet for the idle timeout (activity resets it), or interrupted
// (the turn ends BLOCKED). stop asks the agent
// to end and makes sure it has; its result is the turn's.
func Supervise(ctx context.Context, t Turn, activity <-chan struct{}, ended <-chan struct{},
	finish func() Result, stop func(state factory.RunState, msg string) Result) Result {
	var total <-chan time.Time
	if t.Timeout > 0 {
		tm := time.NewTimer(t.Timeout)
		defer tm.Stop()
		total = tm.C
	}
	var budget <-chan time.Time
	if t.BudgetTime > 0 {
		tm := time.NewTimer(t.BudgetTime)
		defer tm.Stop()
		budget = tm.C
	}
	idle := newTimer(t.IdleTimeout)
	defer idle.Stop()
	for {
		select {
		case <-ended:
			return finish()
		case <-activity:
			idle.Reset()
		case <-ctx.Done():
			res := stop(stoppedBy(ctx))
			if code := StopCode(ctx); code != "" {
				res.Code = code
			}
			return res
		case <-budget:
			res := stop(factory.StateFailed, fmt.Sprintf("the run's budget of time (maxDuration) ran out after %s", t.BudgetTime.Round(time.Second)))
			res.Code = CodeBudgetExceeded
			return res
		case <-total:
			res := stop(factory.StateFailed, fmt.Sprintf("the environment's timeout (%s) was reached", t.Timeout))
			res.Code = CodeInfrastructureTimeout
			return res
		case <-idle.C():
			res := stop(factory.StateFailed, fmt.Sprintf("no output for %s: the idle timeout (idle_timeout_minutes) was reached", t.IdleTimeout))
			res.Code = CodeInfrastructureTimeout
			return res
		}
	}
}

// StoppedBy is how a turn whose context was cancelled ends: BLOCKED by an
// interrupt, else CANCELLED (for an executor that stops a turn outside
// Supervise).
func StoppedBy(ctx context.Context) (factory.RunState, string) { return stoppedBy(ctx) }

// stoppedBy is how a turn whose context was cancelled ends: BLOCKED by an
// interrupt, FAILED by a StopError (with its code: StopCode), else
// CANCELLED.
func stoppedBy(ctx context.Context) (factory.RunState, string) {
	var se *StopError
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errInterrupted):
		return factory.StateBlocked, "interrupted: the run waits for a follow-up to continue"
	case errors.As(cause, &se):
		return factory.StateFailed, se.Message
	}
	return factory.StateCancelled, "cancelled"
}

// StopCode is the error code of a turn stopped by a StopError, else "".
func StopCode(ctx context.Context) string {
	var se *StopError
	if errors.As(context.Cause(ctx), &se) {
		return se.Code
	}
	return ""
}

// waitExit is the agent's exit: the returned channel is closed when it has
// exited, and *err is then its exit error. A closed channel can be waited
// on by any number of selects.
func waitExit(p *agentProcess, err *error) <-chan struct{} {
	exited := make(chan struct{})
	go func() {
		<-p.exited
		*err = p.waitErr
		close(exited)
	}()
	return exited
}
