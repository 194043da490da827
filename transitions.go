package factory

import (
	"errors"
	"fmt"
	"slices"
)

// transitions is the one table of a run's states (docs/spec/platform-api.md,
// "Transitions"): the states a run may move to from each. Anything else is
// refused. A terminal state is left only for QUEUED, by a follow-up that
// continues the run.
var transitions = map[RunState][]RunState{
	StatePending: {StateQueued, StateCancelled, StateError, StateFailed},
	StateQueued:  {StateClaimed, StateCancelled, StateError, StateFailed},
	// QUEUED again: the claim's lease ran out before the agent started,
	// and the turn is offered again.
	StateClaimed:    {StateInProgress, StateQueued, StateCancelled, StateError, StateFailed},
	StateInProgress: {StateSucceeded, StateFailed, StateError, StateCancelled, StateBlocked},
	StateBlocked:    {StateInProgress, StateQueued, StateCancelled, StateError, StateFailed},
	StateSucceeded:  {StateQueued},
	StateFailed:     {StateQueued},
	StateError:      {StateQueued},
	StateCancelled:  {StateQueued},
}

// ErrTransition is the error of a change of state the table does not have.
var ErrTransition = errors.New("a run cannot go")

// CanMove reports whether a run may go from one state to another.
func CanMove(from, to RunState) bool {
	return slices.Contains(transitions[from], to)
}

// MoveTo changes the run's state, if the table allows it, and remembers
// the step: the store checks, when it writes the run, that every change of
// state it is given was made this way. A refused step changes nothing.
func (r *Run) MoveTo(to RunState) error {
	if !CanMove(r.State, to) {
		return fmt.Errorf("%w from %s to %s", ErrTransition, r.State, to)
	}
	if len(r.steps) == 0 {
		r.steps = []RunState{r.State}
	}
	r.steps = append(r.steps, to)
	r.State = to
	return nil
}

// CheckSteps reports whether a run read in state from and now in its
// current state got there by legal steps (MoveTo) only: the store's check
// before it writes a changed run.
func (r *Run) CheckSteps(from RunState) error {
	if len(r.steps) == 0 {
		if r.State != from {
			return fmt.Errorf("%w from %s to %s: the state was set, not moved through the table", ErrTransition, from, r.State)
		}
		return nil
	}
	if r.steps[0] != from || r.steps[len(r.steps)-1] != r.State {
		return fmt.Errorf("%w from %s to %s: the steps taken (%v) do not lead there", ErrTransition, from, r.State, r.steps)
	}
	for i := 1; i < len(r.steps); i++ {
		if !CanMove(r.steps[i-1], r.steps[i]) {
			return fmt.Errorf("%w from %s to %s", ErrTransition, r.steps[i-1], r.steps[i])
		}
	}
	return nil
}

// Steps are the states the run went through since it was read (its state
// then first); empty when its state did not change.
func (r *Run) Steps() []RunState { return r.steps }

// ForgetSteps clears the steps once the run is written.
func (r *Run) ForgetSteps() { r.steps = nil }
