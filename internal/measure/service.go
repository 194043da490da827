// Package measure measures and improves a factory's runs
// (docs/measure-and-improve.md): scorers whose judge runs classify a sample
// of completed runs, benchmark runs of a suite's tasks under several
// configurations, and self-improvement runs that turn an agent's repeated
// failures into a pull request. Judges, trials and self-improvement are
// ordinary runs of the run manager, with sources of their own; this
// package watches every run's end and starts or records what follows.
package measure

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"factory"
	"factory/internal/runs"
	"factory/internal/store"
)

// Config is what the service works with.
type Config struct {
	Store *store.Store
	Runs  *runs.Manager
	Log   *slog.Logger
	// Now is the clock (tests move it); time.Now by default.
	Now func() time.Time
}

// Service scores, benchmarks and improves.
type Service struct {
	cfg Config
	// mu covers the queue of ended runs waiting to be looked at.
	mu    sync.Mutex
	queue []string
	wake  chan struct{}
	// improving serialises the decisions to start self-improvement runs.
	improving sync.Mutex
}

// New returns a service that observes the run manager's runs; Run makes
// it act on them.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{cfg: cfg, wake: make(chan struct{}, 1)}
	if cfg.Runs != nil {
		cfg.Runs.Observe(s.runChanged)
	}
	return s
}

// runChanged queues a factory's run that ended (the run manager's
// observer: it must not block).
func (s *Service) runChanged(r *factory.Run) {
	if !r.State.Terminal() || r.FactoryUID == "" {
		return
	}
	s.mu.Lock()
	s.queue = append(s.queue, r.ID)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// catchUpWindow is how far back the start looks for ended runs the last
// process may not have acted on (it stopped between a run's end and its
// judge's start, say): acting on one twice changes nothing.
const catchUpWindow = time.Hour

// Run acts on ended runs until ctx ends: first those of the last hour
// (catchUp), then each as it ends; and checks every hour for agents whose
// oldest unaddressed failure is a week old.
func (s *Service) Run(ctx context.Context) {
	s.catchUp()
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	for {
		for {
			s.mu.Lock()
			if len(s.queue) == 0 {
				s.mu.Unlock()
				break
			}
			id := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			s.handle(ctx, id)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-tick.C:
			s.ImproveAll(false)
		}
	}
}

// catchUp queues the factories' runs that ended in the last catchUpWindow.
func (s *Service) catchUp() {
	since := s.cfg.Now().Add(-catchUpWindow).UnixNano()
	q := store.RunQuery{Equal: map[string]string{"in_factory": "true"}, SortBy: "updated_at", MinNanos: since, Limit: 1000, Asc: true,
		States: []factory.RunState{factory.StateSucceeded, factory.StateFailed, factory.StateError, factory.StateCancelled}}
	for {
		page, err := s.cfg.Store.ListRuns(q)
		if err != nil {
			s.cfg.Log.Error("looking for ended runs to score", "err", err)
			return
		}
		for _, r := range page.Runs {
			s.runChanged(r)
		}
		if !page.More {
			return
		}
		q.After = page.Last
	}
}

// handle acts on an ended run: a judge's answer is recorded, a trial's
// end starts its judges, any other run of an agent is sampled by the
// factory's scorers and, failed, counted for self-improvement.
func (s *Service) handle(ctx context.Context, id string) {
	r, err := s.cfg.Store.Run(id)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.cfg.Log.Error("reading an ended run", "run", id, "err", err)
		}
		return
	}
	switch r.Source {
	case factory.SourceScorer:
		err = s.judged(r)
	case factory.SourceBenchmarkTrial:
		err = s.trialEnded(r)
	case factory.SourceSelfImprovement:
		return
	default:
		if err = s.sample(r); err == nil {
			err = s.noteFailedRun(r)
		}
	}
	if err != nil {
		s.cfg.Log.Error("measuring a run", "run", id, "source", r.Source, "err", err)
	}
}

// factoryOf reads a run's factory.
func (s *Service) factoryOf(uid string) (*factory.Factory, error) {
	fs, err := s.cfg.Store.Factories()
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.UID == uid {
			return f, nil
		}
	}
	return nil, factory.Errorf(factory.ENOTFOUND, "no factory %s", uid)
}

// agentOf is the factory agent a run ran, "" for none.
func agentOf(r *factory.Run) string {
	if r.Setup != nil {
		return r.Setup.Agent
	}
	return ""
}
