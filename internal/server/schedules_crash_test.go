package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/store"
)

// TestSchedulesSurviveSIGKILL runs a server in a child process with an
// automation that fires @every 2s (its configuration lowers the minimum
// interval to a second), kills it with SIGKILL after a few
// instants, leaves it down across at least one instant, starts it again,
// and kills it again. No instant has two runs; every run is for a multiple
// of 2 s; the downtime's missed instants gave at most one run (the latest).
func TestSchedulesSurviveSIGKILL(t *testing.T) {
	if os.Getenv("FACTORY_SCHEDULE_SERVER") != "" {
		scheduleServer()
		return
	}
	if testing.Short() {
		t.Skip("subprocess crash test")
	}
	data, repo := t.TempDir(), t.TempDir()
	writeTree(t, repo, map[string]string{
		"factory.yaml":                   "schemaVersion: v1alpha1\nname: Ticks\nrepositories: []\nagentDefaults:\n  model: auto\n",
		"agents/lead/agent.md":           "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"automations/tick/automation.md": "---\ntriggers:\n  - provider: schedule\n    event: cron_fired\n    schedule: {name: tick, cron: \"@every 2s\"}\n---\nTick.\n",
	})
	life := func(up time.Duration) (from, to time.Time) {
		os.Remove(filepath.Join(data, server.ServerFile))
		child := exec.Command(os.Args[0], "-test.run=^TestSchedulesSurviveSIGKILL$")
		child.Env = append(os.Environ(), "FACTORY_SCHEDULE_SERVER="+data, "FACTORY_SCHEDULE_REPO="+repo)
		child.Stderr = os.Stderr
		// The process's start, not the moment its readiness is seen: on a
		// loaded machine the server fires its first instants before a
		// poll sees it ready, and those are not the downtime's.
		from = time.Now()
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		waitReady(t, data)
		time.Sleep(up)
		child.Process.Signal(syscall.SIGKILL)
		child.Wait()
		return from, time.Now()
	}
	_, down := life(5 * time.Second)
	time.Sleep(3 * time.Second) // at least one instant passes while it is down
	back, _ := life(5 * time.Second)

	s, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.RunsInState(factory.StateQueued, factory.StateInProgress, factory.StateSucceeded, factory.StateFailed, factory.StateError)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[time.Time]string{}
	inDowntime := 0
	for _, r := range runs {
		at := r.ScheduledAt
		if at == nil {
			continue
		}
		if other, twice := seen[*at]; twice {
			t.Fatalf("instant %s has two runs: %s and %s", at, other, r.ID)
		}
		seen[*at] = r.ID
		if at.UnixNano()%int64(2*time.Second) != 0 {
			t.Fatalf("instant %s is not a multiple of 2 s since the epoch", at)
		}
		if at.After(down) && at.Before(back) {
			inDowntime++
		}
	}
	if len(seen) < 4 || inDowntime > 1 {
		t.Fatalf("%d instants fired (want at least 4 over 10 s up), %d of the downtime (want at most the latest)", len(seen), inDowntime)
	}
	t.Logf("%d instants fired, each once; %d for the downtime", len(seen), inDowntime)
}

// scheduleServer is the child: a server over the data directory, with the
// scheduler and an agent that does nothing.
func scheduleServer() {
	data, repo := os.Getenv("FACTORY_SCHEDULE_SERVER"), os.Getenv("FACTORY_SCHEDULE_REPO")
	s, err := store.Open(data)
	if err != nil {
		os.Exit(3)
	}
	kr, _ := secrets.LoadKeyring(data)
	ap := &reconciler.Applier{Store: s, Keyring: kr}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(5)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	runs := runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "default", Log: log,
		Environments: map[string]runs.Environment{"default": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	srv := server.New(server.Config{Factories: []server.FactorySource{{Name: "ticks", Source: reconciler.DirSource{Root: repo}, Interval: time.Hour}},
		Runs: runs, Schedules: factory.ScheduleLimits{MinInterval: time.Second}}, ap, log)
	srv.Run(context.Background(), ln)
	os.Exit(0)
}
