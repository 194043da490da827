package factory

import (
	"encoding/json"
	"strconv"
	"time"
)

// PrefixSchedule is the UID prefix of a schedule of the Agents API.
const PrefixSchedule = "sch_"

// ScheduledAgent is a schedule of the Agents API (POST /v1/agent/schedules):
// not in any file, owned by the server (docs/spec/triggers.md).
type ScheduledAgent struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	CronSchedule string            `json:"cron_schedule"`
	Enabled      bool              `json:"enabled"`
	Prompt       string            `json:"prompt"`
	AgentConfig  json.RawMessage   `json:"agent_config,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	CreatedAt    time.Time         `json:"created_at"`
	UpdatedAt    time.Time         `json:"updated_at"`
	CreatedBy    *Creator          `json:"created_by,omitempty"`
	UpdatedBy    *Creator          `json:"updated_by,omitempty"`
}

// ScheduleState is what the scheduler remembers of one schedule: the
// instant it last fired for (and the run that started), and why the last
// attempt failed, if it did.
type ScheduleState struct {
	ID        string     `json:"id"`
	LastFired *time.Time `json:"last_fired,omitempty"`
	LastRunID string     `json:"last_run_id,omitempty"`
	LastError string     `json:"last_error,omitempty"`
}

// ScheduleLimits bound the schedules of a server: how often one may fire,
// and how many a factory (PerFactory) and the Agents API (WithoutFactory)
// may hold. Zero fields take the defaults (limits.go).
type ScheduleLimits struct {
	MinInterval    time.Duration
	PerFactory     int
	WithoutFactory int
}

// OrDefaults is l with its zero fields set to the defaults.
func (l ScheduleLimits) OrDefaults() ScheduleLimits {
	if l.MinInterval <= 0 {
		l.MinInterval = MinScheduleInterval
	}
	if l.PerFactory <= 0 {
		l.PerFactory = MaxSchedulesPerFactory
	}
	if l.WithoutFactory <= 0 {
		l.WithoutFactory = MaxSchedulesWithoutFactory
	}
	return l
}

// FileScheduleID is the schedule_id of a schedule trigger of an
// automation: the automation's UID and the schedule's name (an unnamed one
// is named by the trigger's position: name schedules to keep their
// identity when triggers move).
func FileScheduleID(automationUID, name string, index int) string {
	return automationUID + ":" + ScheduleName(name, index)
}

// ScheduleName is a schedule trigger's name, or trigger-<index> for one
// without.
func ScheduleName(name string, index int) string {
	if name == "" {
		return "trigger-" + strconv.Itoa(index)
	}
	return name
}

// ScheduledRunID is the ID of the run a schedule starts for an instant:
// derived, so that firing the same instant again (after a crash, on
// another replica) finds the run instead of starting a second one.
func ScheduledRunID(scheduleID string, instant time.Time) string {
	return DerivedID(PrefixRun, "schedule", scheduleID, instant.UTC().Format(time.RFC3339Nano))
}
