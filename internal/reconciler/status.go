package reconciler

import (
	"time"

	"factory"
	"factory/internal/store"
	"factory/internal/trigger"
)

// Status builds the status of one factory from the store.
func Status(s *store.Store, f *factory.Factory, publicURL string) (*factory.FactoryStatus, error) {
	whs, err := s.Webhooks(f.Name)
	if err != nil {
		return nil, err
	}
	aus, err := s.Automations(f.Name)
	if err != nil {
		return nil, err
	}
	res, err := s.Resources(f.Name, "")
	if err != nil {
		return nil, err
	}
	st := factory.BuildStatus(f, whs, aus, publicURL)
	st.ResourceStatuses(f, res)
	states, err := s.ScheduleStates()
	if err != nil {
		return nil, err
	}
	for i, a := range aus {
		st.Automations[i].Schedules = schedulesOf(a, states, time.Now())
	}
	return st, nil
}

// schedulesOf is what status shows of an automation's schedule triggers:
// the next instant, and what the scheduler last did.
func schedulesOf(a *factory.Automation, states map[string]*factory.ScheduleState, now time.Time) []factory.ScheduleStatus {
	var out []factory.ScheduleStatus
	for i, t := range a.Spec.Triggers {
		if t.Schedule == nil {
			continue
		}
		id := factory.FileScheduleID(a.UID, t.Schedule.Name, i)
		ss := factory.ScheduleStatus{ScheduleID: id, Name: factory.ScheduleName(t.Schedule.Name, i), CronSchedule: t.Schedule.Cron}
		if sched, err := trigger.CompileSchedule(t.Schedule.Cron); err == nil && a.Spec.Enabled {
			n := sched.Next(now)
			ss.NextFire = &n
		}
		if st := states[id]; st != nil {
			ss.LastFire, ss.LastError = st.LastFired, st.LastError
		}
		out = append(out, ss)
	}
	return out
}
