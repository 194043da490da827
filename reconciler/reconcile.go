package reconciler

import (
	"context"
	"fmt"

	"factory/store"
)

// StateReader gives the current state of a factory: the store itself, or a
// running server that holds it.
type StateReader interface {
	FactoryState(name string) (*store.State, error)
}

// Checked is the outcome of fetch → load → plan.
type Checked struct {
	Plan    *Plan
	Desired *Desired     // nil when the revision has errors
	State   *store.State // nil without state
}

// Check fetches a revision, loads it and plans it against the state (none
// when st is nil). It writes nothing. An error means the source could not
// be read or the state could not be; problems in files are in the plan.
func Check(ctx context.Context, src Source, name string, st StateReader) (*Checked, error) {
	snap, err := src.Fetch(ctx)
	if err != nil {
		return nil, err
	}
	var cur *store.State
	if st != nil {
		if cur, err = st.FactoryState(name); err != nil {
			return nil, fmt.Errorf("read state of factory %s: %w", name, err)
		}
	}
	desired, ds := Load(snap)
	p := MakePlan(name, desired, cur)
	p.Diagnostics = append(p.Diagnostics, ds...)
	p.Diagnostics.Sort()
	c := &Checked{Plan: p, State: cur}
	if p.Valid() {
		c.Desired = desired
	}
	return c, nil
}

// Sync runs the whole pipeline for one factory: fetch, load, plan, and
// apply when the revision is valid. An invalid revision is recorded as the
// factory's error and nothing of it is applied. A sync that would change
// nothing writes nothing.
func (a *Applier) Sync(ctx context.Context, name string, src Source) (*Checked, error) {
	c, err := Check(ctx, src, name, a.Store)
	if err != nil {
		if rerr := a.RecordFailure(name, src.String(), "", err, nil); rerr != nil {
			return nil, fmt.Errorf("%w (and recording it failed: %v)", err, rerr)
		}
		return nil, err
	}
	p := c.Plan
	if !p.Valid() {
		return c, a.RecordFailure(name, src.String(), p.Revision, nil, p.Diagnostics)
	}
	if f := c.State.Factory; f != nil && f.Ready && f.Revision == p.Revision && f.Source == src.String() && !p.HasChanges() {
		return c, nil
	}
	return c, a.Apply(p, c.Desired, c.State, src.String())
}
