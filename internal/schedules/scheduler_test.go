package schedules

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/secrets"
	"factory/internal/store"
)

// fixture applies a v1alpha1 factory whose automation fires at cron, to a
// real store, with a run manager that is never started (runs stay QUEUED:
// this tests what is created, not what runs). Its schedules may fire every
// second (testLimits), so that a test can step through instants quickly.
func fixture(t *testing.T, cron string) (*store.Store, *runs.Manager) {
	t.Helper()
	root, data := t.TempDir(), t.TempDir()
	for p, c := range map[string]string{
		"factory.yaml":                   "schemaVersion: v1alpha1\nname: S\nrepositories: []\nagentDefaults:\n  model: auto\n",
		"agents/lead/agent.md":           "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"automations/tick/automation.md": "---\ntriggers:\n  - provider: schedule\n    event: cron_fired\n    schedule:\n      name: tick\n      cron: \"" + cron + "\"\n---\nTick.\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(c), 0o644)
	}
	s, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	kr, err := secrets.LoadKeyring(data)
	if err != nil {
		t.Fatal(err)
	}
	a := &reconciler.Applier{Store: s, Keyring: kr, Loader: &reconciler.Loader{Schedules: testLimits}}
	if _, outcome, err := a.Sync(context.Background(), "s", reconciler.DirSource{Root: root}); err != nil || outcome != reconciler.Applied {
		t.Fatal(outcome, err)
	}
	m := runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "sh", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	return s, m
}

// testLimits let schedules fire every second.
var testLimits = factory.ScheduleLimits{MinInterval: time.Second}

func scheduledRuns(t *testing.T, s *store.Store) map[time.Time]*factory.Run {
	t.Helper()
	runs, err := s.RunsInState(factory.StateQueued)
	if err != nil {
		t.Fatal(err)
	}
	out := map[time.Time]*factory.Run{}
	for _, r := range runs {
		if r.ScheduledAt == nil {
			continue
		}
		if _, twice := out[*r.ScheduledAt]; twice {
			t.Fatalf("instant %s fired twice", r.ScheduledAt)
		}
		out[*r.ScheduledAt] = r
	}
	return out
}

// Each instant fires once; a scheduler that starts again (a restart) fires
// the latest instant it missed, once, and never one that fired already.
func TestInstantsFireOnceAcrossRestarts(t *testing.T) {
	s, m := fixture(t, "@every 2s")
	t0 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	now := t0.Add(500 * time.Millisecond)
	clock := func() time.Time { return now }
	newScheduler := func() *Scheduler {
		return &Scheduler{Store: s, Runs: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clock, MinInterval: testLimits.MinInterval}
	}
	sch := newScheduler()
	step := func(sch *Scheduler, at time.Duration) {
		now = t0.Add(at)
		if err := sch.reload(); err != nil {
			t.Fatal(err)
		}
		sch.fireDue()
	}
	step(sch, 500*time.Millisecond) // loads: next is t0+2s, nothing due
	if n := len(scheduledRuns(t, s)); n != 0 {
		t.Fatalf("%d runs before the first instant", n)
	}
	step(sch, 2*time.Second)
	step(sch, 2100*time.Millisecond) // the same instant again: nothing new
	step(sch, 4*time.Second)
	got := scheduledRuns(t, s)
	if len(got) != 2 || got[t0.Add(2*time.Second)] == nil || got[t0.Add(4*time.Second)] == nil {
		t.Fatalf("after two instants: %v", keys(got))
	}
	r := got[t0.Add(2*time.Second)]
	if r.Source != factory.SourceScheduled || r.Schedule == nil || r.Schedule.ScheduleName != "tick" || r.Schedule.CronSchedule != "@every 2s" ||
		r.Schedule.ScheduleID != r.AutomationID+":tick" || r.Prompt[:len("You lead.")] != "You lead." {
		t.Fatalf("the scheduled run: %+v %+v", r, r.Schedule)
	}

	// Down from t0+4.5s to t0+9.5s: 6 and 8 are missed; 8, the latest, fires once.
	sch = newScheduler()
	step(sch, 9500*time.Millisecond)
	got = scheduledRuns(t, s)
	if len(got) != 3 || got[t0.Add(8*time.Second)] == nil || got[t0.Add(6*time.Second)] != nil {
		t.Fatalf("after the catch-up: %v", keys(got))
	}
	// A second restart at the same moment fires nothing more.
	sch = newScheduler()
	step(sch, 9600*time.Millisecond)
	step(sch, 10*time.Second)
	if got = scheduledRuns(t, s); len(got) != 4 || got[t0.Add(10*time.Second)] == nil {
		t.Fatalf("after the next instant: %v", keys(got))
	}
	states, _ := s.ScheduleStates()
	st := states[r.Schedule.ScheduleID]
	if st == nil || st.LastFired == nil || !st.LastFired.Equal(t0.Add(10*time.Second)) || st.LastError != "" {
		t.Fatalf("the schedule's state: %+v", st)
	}
}

func keys(m map[time.Time]*factory.Run) []string {
	var out []string
	for k := range m {
		out = append(out, k.Format("15:04:05"))
	}
	return out
}

// TestFastRecordsFireOnceAMinute: a schedule stored before schedules were
// bounded (an Agents API schedule @every 1s, made by a runs key) fires at
// most once a minute, the minimum interval, however often it asks.
func TestFastRecordsFireOnceAMinute(t *testing.T) {
	s, m := fixture(t, "@daily")
	batch := s.NewBatch()
	batch.PutAgentSchedule(&factory.ScheduledAgent{ID: "sch_fast", Name: "fast", CronSchedule: "@every 1s", Enabled: true, Prompt: "Tick"})
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 24, 9, 0, 0, 500_000_000, time.UTC)
	now := t0
	sch := &Scheduler{Store: s, Runs: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }}
	for i := 0; i <= 150; i++ {
		now = t0.Add(time.Duration(i) * time.Second)
		if err := sch.reload(); err != nil {
			t.Fatal(err)
		}
		sch.fireDue()
	}
	var fired []string
	for at, r := range scheduledRuns(t, s) {
		if r.Schedule != nil && r.Schedule.ScheduleID == "sch_fast" {
			fired = append(fired, at.Format("15:04:05"))
		}
	}
	if len(fired) != 2 {
		t.Fatalf("a schedule @every 1s fired %d times in 150 s: %v (want 2, at 09:01:00 and 09:02:00)", len(fired), fired)
	}
}

// TestScheduleEnvelopeFoldsLineBreaks: a cron expression may hold line
// breaks between its fields ("0 3 * *\n*" parses as five fields), and the
// envelope quotes it in the trusted part of the prompt: it stays one line.
func TestScheduleEnvelopeFoldsLineBreaks(t *testing.T) {
	s, m := fixture(t, "@daily")
	sch := &Scheduler{Store: s, Runs: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cron := "0 3 * *\n*"
	e := &entry{id: "sch_x", name: "nightly", cron: cron, item: &factory.ScheduledAgent{ID: "sch_x", Name: "nightly", CronSchedule: cron, Prompt: "Tick"}}
	req, err := sch.request(e, time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	want := "Tick\n\n---\nThis run was started by schedule \"nightly\" (0 3 * * *, UTC) for 2026-11-24T03:00:00Z.\n"
	if req.Prompt != want {
		t.Fatalf("the prompt:\n%q\nwant\n%q", req.Prompt, want)
	}
}
