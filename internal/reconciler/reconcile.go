package reconciler

import (
	"context"
	"fmt"

	"factory"
)

// StateReader gives the current state of a factory: the store itself, or a
// running server that holds it.
type StateReader interface {
	FactoryState(name string) (*factory.State, error)
}

// Checked is the outcome of fetch → load → plan.
type Checked struct {
	Plan    *Plan
	Desired *Desired       // nil when the revision has errors
	State   *factory.State // nil without state
	loaded  *Desired       // what was loaded, valid or not
}

// Strict adds each use of this project's extensions to the v1alpha1
// format to the plan's errors (reconcile --strict) and reports how many
// there were. They are found only when asked: positions need each file's
// YAML parsed again.
func (c *Checked) Strict() int {
	ext := extensions(c.loaded)
	c.Plan.Diagnostics = append(c.Plan.Diagnostics, ext...)
	c.Plan.Diagnostics.Sort()
	return len(ext)
}

// Check fetches a revision, loads it and plans it against the state (none
// when st is nil). It writes nothing. An error means the source could not
// be read or the state could not be; problems in files are in the plan.
func Check(ctx context.Context, src Source, name string, st StateReader) (*Checked, error) {
	return check(ctx, nil, factory.ScheduleLimits{}.OrDefaults(), src, name, st, nil)
}

// CheckWithin is Check with a server's schedule limits.
func CheckWithin(ctx context.Context, lim factory.ScheduleLimits, src Source, name string, st StateReader) (*Checked, error) {
	return check(ctx, nil, lim.OrDefaults(), src, name, st, nil)
}

func check(ctx context.Context, l *Loader, lim factory.ScheduleLimits, src Source, name string, st StateReader, channels ChannelLister) (*Checked, error) {
	snap, err := src.Fetch(ctx)
	if err != nil {
		return nil, err
	}
	var cur *factory.State
	if st != nil {
		if cur, err = st.FactoryState(name); err != nil {
			return nil, fmt.Errorf("read state of factory %s: %w", name, err)
		}
	}
	desired, ds := l.load(snap, lim)
	ds = resolveChannels(ctx, desired, ds, name, channels)
	p := MakePlan(name, desired, cur)
	p.Diagnostics = append(p.Diagnostics, ds...)
	p.Diagnostics.Sort()
	c := &Checked{Plan: p, State: cur, loaded: desired}
	if p.Valid() {
		c.Desired = desired
	}
	return c, nil
}

// Outcome says what a sync did.
type Outcome string

// Outcomes of a sync.
const (
	Applied   Outcome = "applied"   // a revision was applied
	Unchanged Outcome = "unchanged" // nothing to do: nothing written
	Invalid   Outcome = "invalid"   // the revision has errors: not applied
	Failed    Outcome = "error"     // the source or the store could not be read
)

// Sync runs the whole pipeline for one factory: fetch, load, plan, and
// apply when the revision is valid. An invalid revision is recorded as the
// factory's error and nothing of it is applied. A sync that would change
// nothing writes nothing; when neither the revision nor the store changed
// since the last sync of this factory, it does not even load the files.
func (a *Applier) Sync(ctx context.Context, name string, src Source) (*Checked, Outcome, error) {
	snap, err := src.Fetch(ctx)
	if err != nil {
		if rerr := a.RecordFailure(name, src.String(), "", err, nil); rerr != nil {
			return nil, Failed, fmt.Errorf("%w (and recording it failed: %v)", err, rerr)
		}
		a.remember(name, "")
		return nil, Failed, err
	}
	if a.unchanged(name, snap.Revision) {
		return nil, Unchanged, nil
	}
	c, err := check(ctx, a.Loader, a.Loader.limits(), fixed{snap, src}, name, a.Store, a.SlackChannels)
	if err != nil {
		return nil, Failed, err
	}
	p := c.Plan
	a.ServerWarnings(name, c)
	outcome := Applied
	switch f := c.State.Factory; {
	case !p.Valid():
		outcome, err = Invalid, a.RecordFailure(name, src.String(), p.Revision, nil, p.Diagnostics)
	case f != nil && f.Ready && f.Revision == p.Revision && f.Source == src.String() && !p.HasChanges():
		outcome = Unchanged
	default:
		err = a.Apply(p, c.Desired, c.State, src.String())
	}
	if err != nil {
		return c, Failed, err
	}
	a.remember(name, snap.Revision)
	return c, outcome, nil
}

// ServerWarnings adds to a valid revision's plan the warnings only this
// server can give: an agent whose harness it does not run, a chat or
// tracker trigger whose write-back has no credential, a paths filter on
// pull requests of a code host it has no credential for.
func (a *Applier) ServerWarnings(name string, c *Checked) {
	if c.Desired == nil {
		return
	}
	p := c.Plan
	if a.Harness != nil {
		p.Diagnostics = append(p.Diagnostics, HarnessWarnings(c.Desired, a.Harness, a.Isolation, a.HarnessKey)...)
	}
	if a.Credentials != nil {
		p.Diagnostics = append(p.Diagnostics, CredentialWarnings(c.Desired, name, a.Credentials(name))...)
	}
	if a.CodeHost != nil {
		p.Diagnostics = append(p.Diagnostics, CodeHostWarnings(c.Desired, func(host string) bool { return a.CodeHost(name, host) })...)
	}
	p.Diagnostics.Sort()
}

// fixed is a source that has already been fetched.
type fixed struct {
	snap *Snapshot
	src  Source
}

func (f fixed) Fetch(context.Context) (*Snapshot, error) { return f.snap, nil }
func (f fixed) String() string                           { return f.src.String() }

type seen struct {
	revision string
	writes   uint64
}

// remember notes the revision a sync ended on and the store's write count
// after it; "" forgets.
func (a *Applier) remember(name, revision string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil {
		a.seen = map[string]seen{}
	}
	if revision == "" {
		delete(a.seen, name)
		return
	}
	a.seen[name] = seen{revision, a.Store.StateWrites()}
}

func (a *Applier) unchanged(name, revision string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.seen[name]
	return ok && s.revision == revision && s.writes == a.Store.StateWrites()
}
