package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"factory"
	"factory/internal/store"
	"factory/internal/trigger"
)

// The schedules of the Agents API (docs/spec/triggers.md): the official
// SDKs' client.agent.schedules calls. Schedules in factory files are not
// listed here; status shows them.

func (s *Server) scheduleRoutes(mux *routes) {
	runs := func(h handler) http.Handler { return s.auth(s.needRuns(h), factory.ScopeRuns) }
	readRuns := func(h handler) http.Handler { return s.auth(s.needRuns(h), factory.ScopeRuns, factory.ScopeRead) }
	mux.Handle("POST /v1/agent/schedules", runs(s.createSchedule))
	mux.Handle("GET /v1/agent/schedules", readRuns(s.listSchedules))
	mux.Handle("GET /v1/agent/schedules/{id}", readRuns(s.getSchedule))
	mux.Handle("PUT /v1/agent/schedules/{id}", runs(s.updateSchedule))
	mux.Handle("DELETE /v1/agent/schedules/{id}", runs(s.deleteSchedule))
	mux.Handle("POST /v1/agent/schedules/{id}/pause", runs(s.pauseSchedule(false)))
	mux.Handle("POST /v1/agent/schedules/{id}/resume", runs(s.pauseSchedule(true)))
}

// scheduleItem is ScheduledAgentItem as the SDKs read it.
type scheduleItem struct {
	*factory.ScheduledAgent
	History        scheduleHistory `json:"history"`
	LastSpawnError *string         `json:"last_spawn_error"`
}

type scheduleHistory struct {
	LastRan *time.Time `json:"last_ran"`
	NextRun *time.Time `json:"next_run"`
}

func (s *Server) item(v *factory.ScheduledAgent) (scheduleItem, error) {
	states, err := s.store.ScheduleStates()
	if err != nil {
		return scheduleItem{}, err
	}
	return s.itemOf(v, states[v.ID]), nil
}

func (s *Server) itemOf(v *factory.ScheduledAgent, st *factory.ScheduleState) scheduleItem {
	it := scheduleItem{ScheduledAgent: v}
	if sched, err := trigger.CompileSchedule(v.CronSchedule); err == nil && v.Enabled {
		n := sched.AtLeast(s.cfg.Schedules.MinInterval).Next(time.Now())
		it.History.NextRun = &n
	}
	if st != nil {
		it.History.LastRan = st.LastFired
		if st.LastError != "" {
			e := st.LastError
			it.LastSpawnError = &e
		}
	}
	return it
}

// scheduleBody is the body of POST and PUT.
type scheduleBody struct {
	Name         *string           `json:"name"`
	CronSchedule *string           `json:"cron_schedule"`
	Prompt       *string           `json:"prompt"`
	Enabled      *bool             `json:"enabled"`
	AgentConfig  map[string]any    `json:"agent_config"`
	Metadata     map[string]string `json:"metadata"`
	Mode         string            `json:"mode"`
}

// apply checks a body and writes it into v. PUT needs name, cron_schedule
// and enabled; POST needs name and cron_schedule.
func (s *Server) applySchedule(b *scheduleBody, v *factory.ScheduledAgent, put bool) error {
	switch {
	case b.Name == nil || strings.TrimSpace(*b.Name) == "":
		return errorf(CodeInvalidRequest, "name: required")
	case len(*b.Name) > 200:
		return errorf(CodeInvalidRequest, "name: at most 200 bytes")
	case b.CronSchedule == nil:
		return errorf(CodeInvalidRequest, "cron_schedule: required")
	case put && b.Enabled == nil:
		return errorf(CodeInvalidRequest, "enabled: required")
	case b.Mode != "" && b.Mode != "normal" && b.Mode != "plan" && b.Mode != "orchestrate":
		return errorf(CodeInvalidRequest, "mode: must be normal, plan or orchestrate")
	}
	if err := trigger.CheckCron(*b.CronSchedule); err != nil {
		return errorf(CodeInvalidRequest, "cron_schedule: "+err.Error())
	}
	if err := trigger.CheckInterval(*b.CronSchedule, s.cfg.Schedules.MinInterval); err != nil {
		return errorf(CodeInvalidRequest, "cron_schedule: "+err.Error())
	}
	if err := checkMetadata(b.Metadata); err != nil {
		return err
	}
	prompt := ""
	if b.Prompt != nil {
		prompt = *b.Prompt
	}
	skill, _ := b.AgentConfig["skill_spec"].(string)
	if strings.TrimSpace(prompt) == "" && skill == "" {
		return errorf(CodeInvalidRequest, "prompt: required unless agent_config.skill_spec is given")
	}
	if b.AgentConfig != nil {
		cfg, _, err := s.resolveConfig(b.AgentConfig)
		if err != nil {
			return err
		}
		v.AgentConfig = cfg
	} else if put {
		v.AgentConfig = nil
	}
	v.Name, v.CronSchedule, v.Prompt, v.Metadata = *b.Name, *b.CronSchedule, prompt, b.Metadata
	if b.Enabled != nil {
		v.Enabled = *b.Enabled
	}
	return nil
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) error {
	var b scheduleBody
	if _, err := readJSON(r, maxRunBody, &b); err != nil {
		return err
	}
	now := time.Now().UTC()
	v := &factory.ScheduledAgent{ID: factory.NewUID(factory.PrefixSchedule), Enabled: true, CreatedAt: now, UpdatedAt: now}
	if err := s.applySchedule(&b, v, false); err != nil {
		return err
	}
	if key := callerKey(r); key != nil {
		v.CreatedBy, v.UpdatedBy = apiKeyCreator(key), apiKeyCreator(key)
	}
	s.scheduleMu.Lock()
	defer s.scheduleMu.Unlock()
	if err := s.roomForSchedule(); err != nil {
		return err
	}
	return s.putSchedule(w, v)
}

// roomForSchedule refuses a schedule past the server's limit of the
// Agents API's schedules, which belong to no factory; the caller holds
// scheduleMu.
func (s *Server) roomForSchedule() error {
	list, err := s.store.AgentSchedules()
	if err != nil {
		return err
	}
	if max := s.cfg.Schedules.WithoutFactory; len(list) >= max {
		return errorf(CodeInvalidRequest, fmt.Sprintf("this server holds at most %d schedules of the Agents API (schedules.maxWithoutFactory in its configuration): delete one first", max))
	}
	return nil
}

func (s *Server) putSchedule(w http.ResponseWriter, v *factory.ScheduledAgent) error {
	if err := s.saveSchedule(v); err != nil {
		return err
	}
	it, err := s.item(v)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, it)
	return nil
}

// saveSchedule writes a schedule and tells the scheduler, for the API and
// the dashboard alike.
func (s *Server) saveSchedule(v *factory.ScheduledAgent) error {
	batch := s.store.NewBatch()
	batch.PutAgentSchedule(v)
	if err := batch.Commit(); err != nil {
		return err
	}
	if s.sched != nil {
		s.sched.Changed()
	}
	return nil
}

func (s *Server) schedule(r *http.Request) (*factory.ScheduledAgent, error) {
	v, err := s.store.AgentSchedule(r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(CodeNotFound, "no schedule "+r.PathValue("id"))
	}
	return v, err
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	out, err := s.scheduleItems()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"schedules": out})
	return nil
}

// scheduleItems lists the Agents API's schedules by name, as the SDKs
// document, with their history: for the API and the dashboard alike.
func (s *Server) scheduleItems() ([]scheduleItem, error) {
	list, err := s.store.AgentSchedules()
	if err != nil {
		return nil, err
	}
	states, err := s.store.ScheduleStates()
	if err != nil {
		return nil, err
	}
	out := make([]scheduleItem, 0, len(list))
	for _, v := range list {
		out = append(out, s.itemOf(v, states[v.ID]))
	}
	sortByName(out)
	return out, nil
}

func sortByName(items []scheduleItem) {
	slices.SortFunc(items, func(a, b scheduleItem) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) error {
	v, err := s.schedule(r)
	if err != nil {
		return err
	}
	it, err := s.item(v)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, it)
	return nil
}

func (s *Server) updateSchedule(w http.ResponseWriter, r *http.Request) error {
	v, err := s.schedule(r)
	if err != nil {
		return err
	}
	var b scheduleBody
	if _, err := readJSON(r, maxRunBody, &b); err != nil {
		return err
	}
	if err := s.applySchedule(&b, v, true); err != nil {
		return err
	}
	v.UpdatedAt = time.Now().UTC()
	if key := callerKey(r); key != nil {
		v.UpdatedBy = apiKeyCreator(key)
	}
	return s.putSchedule(w, v)
}

func (s *Server) pauseSchedule(enabled bool) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		v, err := s.schedule(r)
		if err != nil {
			return err
		}
		v.Enabled, v.UpdatedAt = enabled, time.Now().UTC()
		if key := callerKey(r); key != nil {
			v.UpdatedBy = apiKeyCreator(key)
		}
		return s.putSchedule(w, v)
	}
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	v, err := s.schedule(r)
	if err != nil {
		return err
	}
	batch := s.store.NewBatch()
	batch.DeleteAgentSchedule(v.ID)
	if err := batch.Commit(); err != nil {
		return err
	}
	if s.sched != nil {
		s.sched.Changed()
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}
