// Package schedules fires schedule triggers: the `schedule` triggers of
// applied automations and the schedules of the Agents API
// (docs/spec/triggers.md, "Schedules"). Each instant of a schedule starts
// one run, exactly once, also across restarts: the run's ID is derived
// from the schedule and the instant, and the instant a schedule last fired
// for is written in the same synced batch as the runs. Instants missed
// while the server was down fire once, for the latest of them only.
package schedules

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"factory"
	"factory/internal/automations"
	"factory/internal/runs"
	"factory/internal/store"
	"factory/internal/trigger"
)

// Scheduler fires the schedules of a store.
type Scheduler struct {
	Store *store.Store
	Runs  *runs.Manager
	Log   *slog.Logger
	// Now is the clock (tests move it); nil is time.Now.
	Now func() time.Time
	// Fired, when set, is told each batch's schedules and how late the
	// batch started after its instant (metrics, benchmarks).
	Fired func(n int, late time.Duration)
	// MinInterval is the least interval between a schedule's instants
	// (0: factory.MinScheduleInterval). New schedules are refused below
	// it; one recorded before fires at its multiples instead.
	MinInterval time.Duration

	mu      sync.Mutex
	gen     uint64
	entries []*entry
	wake    chan struct{}
	once    sync.Once
}

// entry is one schedule, compiled, with the next instant it fires for.
type entry struct {
	id, name, cron string
	sched          *trigger.Schedule
	next           time.Time
	// A file schedule's automation and factory; an API schedule's item.
	automation *factory.Automation
	factory    *factory.Factory
	item       *factory.ScheduledAgent
}

func (s *Scheduler) minInterval() time.Duration {
	if s.MinInterval > 0 {
		return s.MinInterval
	}
	return factory.MinScheduleInterval
}

func (s *Scheduler) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Changed tells the scheduler that schedules may have changed (an API
// call): it reloads them at once rather than at its next poll.
func (s *Scheduler) Changed() {
	s.init()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) init() { s.once.Do(func() { s.wake = make(chan struct{}, 1) }) }

// pollEvery bounds how long a change of the applied state (a revision, a
// disabled automation) takes to reach the scheduler.
const pollEvery = time.Second

// Run fires schedules until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	s.init()
	for {
		if err := s.reload(); err != nil {
			s.Log.Error("loading schedules", "err", err)
		}
		s.fireDue()
		wait := pollEvery
		if next := s.nextInstant(); !next.IsZero() {
			wait = min(wait, max(next.Sub(s.now()), 0))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wake:
			s.mu.Lock()
			s.gen = 0 // reload even though the state write count did not move
			s.mu.Unlock()
		case <-t.C:
		}
		t.Stop()
	}
}

func (s *Scheduler) nextInstant() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	for _, e := range s.entries {
		if next.IsZero() || e.next.Before(next) {
			next = e.next
		}
	}
	return next
}

// reload rebuilds the schedules when the applied state changed. An entry
// that was loaded before keeps its next instant; a new one starts at the
// latest instant missed since it last fired (the catch-up) or at its next.
func (s *Scheduler) reload() error {
	gen := s.Store.StateWrites()
	s.mu.Lock()
	unchanged := s.gen == gen && s.gen != 0
	s.mu.Unlock()
	if unchanged {
		return nil
	}
	loaded, err := load(s.Store, s.minInterval())
	if err != nil {
		return err
	}
	states, err := s.Store.ScheduleStates()
	if err != nil {
		return err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	before := map[string]*entry{}
	for _, e := range s.entries {
		before[e.id+"\x00"+e.cron] = e
	}
	for _, e := range loaded {
		if old := before[e.id+"\x00"+e.cron]; old != nil {
			e.next = old.next
			continue
		}
		e.next = e.sched.Next(now)
		if st := states[e.id]; st != nil && st.LastFired != nil {
			if missed := e.sched.Latest(*st.LastFired, now); !missed.IsZero() {
				e.next = missed // fires at once, for the latest missed instant only
			}
		}
	}
	s.entries, s.gen = loaded, gen
	return nil
}

// load reads every schedule that fires: the schedule triggers of enabled
// automations, and the enabled schedules of the Agents API.
func load(st *store.Store, min time.Duration) ([]*entry, error) {
	fs, err := st.Factories()
	if err != nil {
		return nil, err
	}
	var out []*entry
	for _, f := range fs {
		autos, err := st.Automations(f.Name)
		if err != nil {
			return nil, err
		}
		for _, a := range autos {
			if !a.Spec.Enabled {
				continue
			}
			for i, t := range a.Spec.Triggers {
				if t.Provider != factory.ProviderSchedule || t.Schedule == nil {
					continue
				}
				sched, err := trigger.CompileSchedule(t.Schedule.Cron)
				if err != nil {
					continue // validation refuses it; a record from before cannot fire
				}
				out = append(out, &entry{id: factory.FileScheduleID(a.UID, t.Schedule.Name, i), name: factory.ScheduleName(t.Schedule.Name, i),
					cron: t.Schedule.Cron, sched: sched.AtLeast(min), automation: a, factory: f})
			}
		}
	}
	items, err := st.AgentSchedules()
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		sched, err := trigger.CompileSchedule(it.CronSchedule)
		if err != nil || !it.Enabled {
			continue
		}
		out = append(out, &entry{id: it.ID, name: it.Name, cron: it.CronSchedule, sched: sched.AtLeast(min), item: it})
	}
	return out, nil
}

// fireDue starts the runs of every schedule whose instant has come, in one
// synced batch with what each fired for, and moves each to its next.
func (s *Scheduler) fireDue() {
	now := s.now()
	s.mu.Lock()
	var due []*entry
	for _, e := range s.entries {
		if !e.next.After(now) {
			due = append(due, e)
		}
	}
	s.mu.Unlock()
	if len(due) == 0 || s.Runs == nil {
		return
	}
	sort.Slice(due, func(i, j int) bool { return due[i].next.Before(due[j].next) })
	earliest := due[0].next
	var reqs []runs.CreateRequest
	states := make([]*factory.ScheduleState, 0, len(due))
	for _, e := range due {
		st := &factory.ScheduleState{ID: e.id}
		instant := e.next
		req, err := s.request(e, instant)
		if err != nil {
			st.LastError = err.Error()
			s.Log.Warn("a schedule could not start its run", "schedule", e.id, "instant", instant, "err", err)
		} else {
			reqs = append(reqs, req)
			st.LastFired, st.LastRunID = &instant, req.ID
		}
		states = append(states, st)
	}
	_, err := s.Runs.CreateMany(reqs, func(b *store.Batch) {
		for _, st := range states {
			b.PutScheduleState(st)
		}
	})
	if err != nil {
		s.Log.Error("starting scheduled runs", "schedules", len(due), "err", err)
		return // the instants stay due: tried again at the next pass
	}
	if s.Fired != nil {
		s.Fired(len(reqs), s.now().Sub(earliest))
	}
	s.mu.Lock()
	for _, e := range due {
		e.next = e.sched.Next(now)
	}
	s.mu.Unlock()
}

// Envelope follows a scheduled run's prompt.
const Envelope = `
---
This run was started by schedule %q (%s, UTC) for %s.
`

// request is the run a schedule starts for an instant.
func (s *Scheduler) request(e *entry, instant time.Time) (runs.CreateRequest, error) {
	at := instant.UTC()
	req := runs.CreateRequest{ID: factory.ScheduledRunID(e.id, at), Source: factory.SourceScheduled, ErrorOnUnknownEnvironment: true,
		Schedule: &factory.RunSchedule{ScheduleID: e.id, ScheduleName: e.name, CronSchedule: e.cron}, ScheduledAt: &at}
	envelope := fmt.Sprintf(Envelope, automations.OneLine(e.name), automations.OneLine(e.cron), at.Format(time.RFC3339))
	if it := e.item; it != nil {
		req.Title, req.Prompt, req.Config, req.Metadata = it.Name, strings.TrimRight(it.Prompt, "\n")+"\n"+envelope, it.AgentConfig, it.Metadata
		req.Environment = environmentOf(it.AgentConfig)
		return req, nil
	}
	a := e.automation
	req.Title, req.Config, req.FactoryUID, req.AutomationID = a.Spec.Title, a.Spec.Config, e.factory.UID, a.UID
	req.Prompt = strings.TrimRight(a.Spec.Prompt, "\n") + "\n" + envelope
	req.Environment = environmentOf(a.Spec.Config)
	ag, err := automations.ResolveAgent(s.Store, s.Runs, e.factory, a.Spec.Agent, a.Spec.Exec)
	if err != nil {
		return req, err
	}
	if ag != nil {
		ag.Apply(&req)
	}
	return req, nil
}

// environmentOf reads an agent config's environment_id.
func environmentOf(config json.RawMessage) string {
	var c struct {
		Env string `json:"environment_id"`
	}
	_ = json.Unmarshal(config, &c)
	return c.Env
}
