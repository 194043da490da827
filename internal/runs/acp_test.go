package runs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/testbin"
)

// demoAgent builds the factory binary once: its demo-agent --acp is the
// real ACP agent these tests drive.
func demoAgent(t *testing.T) string { return testbin.Factory(t) }

// TestACPRunsThroughTheManager: a run on an ACP environment, follow-ups
// sent during its turn and after it (kept in order), and the agent's
// stderr kept for diagnosis.
func TestACPRunsThroughTheManager(t *testing.T) {
	bin := demoAgent(t)
	dir := t.TempDir()
	s := newStoreOnly(t, dir)
	m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "acp", Log: quietLog(),
		Environments: map[string]runs.Environment{"acp": {Executor: &runtime.ACPExecutor{
			Command: []string{"sh", "-c", "echo agent starting >&2; exec " + bin + " demo-agent --acp --delay 100ms"}}}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.Wait() }()
	m.Start(ctx)
	r, err := m.Create(runs.CreateRequest{Prompt: "Triage."})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got, _ := s.Run(r.ID); got.State == factory.StateInProgress || time.Now().After(deadline) {
			break
		}
	}
	m.FollowUp(r.ID, "one")
	m.FollowUp(r.ID, "two")
	var got *storeRun
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, _ = s.Run(r.ID)
		if got.Turns == 3 && got.State == factory.StateSucceeded || time.Now().After(deadline) {
			break
		}
	}
	if got.Turns != 3 || got.State != factory.StateSucceeded {
		t.Fatalf("%+v", got)
	}
	summary, _ := os.ReadFile(filepath.Join(m.Workspace(r.ID), "SUMMARY.md"))
	if !strings.Contains(string(summary), "## Follow-up\n\ntwo") {
		t.Fatalf("the last turn was not the last follow-up:\n%s", summary)
	}
	events, _ := s.RunEvents(r.ID)
	var started []string
	for _, e := range events {
		if e.Kind == "started" {
			started = append(started, e.Message)
		}
	}
	if strings.Join(started, ",") != ",one,two" {
		t.Fatalf("turns in order: %q", started)
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(m.Workspace(r.ID)), "agent-stderr.log")); err != nil || !strings.Contains(string(b), "agent starting") {
		t.Fatalf("stderr kept: %v %q", err, b)
	}
}

// TestACPInterruptAndArtifacts: an interrupt ends an ACP turn with
// session/cancel and leaves the run BLOCKED; a follow-up continues it; the
// demo agent's summary (from its output folder) and its pull request (a
// resource link in its messages) become the run's artifacts.
func TestACPInterruptAndArtifacts(t *testing.T) {
	bin := demoAgent(t)
	dir := t.TempDir()
	s := newStoreOnly(t, dir)
	m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "acp", Log: quietLog(),
		Environments: map[string]runs.Environment{"acp": {Executor: &runtime.ACPExecutor{
			// Slow on its first turn (interrupted), quick on the next.
			Command: []string{"sh", "-c", `d=10ms; [ -e .turn1 ] || { touch .turn1; d=2s; }; exec ` + bin + ` demo-agent --acp --delay $d`},
			Grace:   time.Second}}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.Wait() }()
	m.Start(ctx)
	r, err := m.Create(runs.CreateRequest{Prompt: "Fix it and open a pull request."})
	if err != nil {
		t.Fatal(err)
	}
	wait := func(state factory.RunState) *storeRun {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			got, _ := s.Run(r.ID)
			if got.State == state {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s, want %s", got.State, state)
			}
		}
	}
	wait(factory.StateInProgress)
	if err := m.Interrupt("run_nope"); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("interrupting an unknown run: %v", err)
	}
	if err := m.Interrupt(r.ID); err != nil {
		t.Fatal(err)
	}
	if got := wait(factory.StateBlocked); len(got.Artifacts) != 0 {
		t.Errorf("an interrupted turn reported %+v", got.Artifacts)
	}
	if err := m.Interrupt(r.ID); !errors.Is(err, runs.ErrNotLive) {
		t.Errorf("interrupting a blocked run: %v", err)
	}
	m.FollowUp(r.ID, "go on")
	got := wait(factory.StateSucceeded)
	var kinds []string
	for _, a := range got.Artifacts {
		kinds = append(kinds, string(a.Type)+" "+a.Data.Filepath+a.Data.URL)
	}
	if len(kinds) != 2 || kinds[0] != "FILE SUMMARY.md" || !strings.HasPrefix(kinds[1], "PULL_REQUEST https://demo.invalid/") {
		t.Fatalf("artifacts: %q", kinds)
	}
}
