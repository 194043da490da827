package runs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
)

// TestAgentOutputIsBounded is the attack of an agent that floods its
// output: twelve thousand lines, then one line of 300 KB. What the run
// keeps is bounded per message, per turn and per run, and the excess is
// said once on the timeline, with its count.
func TestAgentOutputIsBounded(t *testing.T) {
	f := newManager(t, t.TempDir(), 1, `i=0; while [ $i -lt 12000 ]; do echo "line $i of the flood"; i=$((i+1)); done; head -c 300000 /dev/zero | tr '\0' x; echo`)
	r := f.create("flood")
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := f.s.Run(r.ID)
		if err == nil && got.State.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end: %+v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	events, err := f.s.RunEvents(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	messages, bytes, longest, notes := 0, 0, 0, 0
	for _, e := range events {
		if e.Kind != "message" {
			continue
		}
		messages++
		bytes += len(e.Message)
		longest = max(longest, len(e.Message))
		if strings.HasPrefix(e.Message, factory.OutputLimited) {
			notes++
		}
	}
	const maxTurnMessages, maxMessageBytes, maxTurnBytes = factory.MaxTurnMessages, factory.MaxMessageBytes, factory.MaxTurnMessageBytes
	if messages > maxTurnMessages+2 || bytes > maxTurnBytes+(64<<10) || longest > maxMessageBytes+8 {
		t.Errorf("the run kept %d status messages, %d bytes, the longest %d bytes: want at most %d, %d, %d", messages, bytes, longest, maxTurnMessages, maxTurnBytes, maxMessageBytes)
	}
	if notes != 1 {
		t.Errorf("the excess is said %d times on the timeline, want once", notes)
	}
}

// TestRunOutputBound: the run's bound holds across its turns: each turn
// keeps its own share until the run's is spent, each says once that it
// passed a bound, and each turn's end counts what it dropped.
func TestRunOutputBound(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	script := `i=0; while [ $i -lt 12 ]; do echo "line $i"; i=$((i+1)); done`
	m := runs.NewManager(runs.Config{Store: s, DataDir: filepath.Join(dir, "data"), MaxConcurrent: 1,
		Output:             &runtime.OutputLimits{Message: 100, TurnMessages: 10, TurnBytes: 1 << 20, RunMessages: 25, RunBytes: 1 << 20},
		Environments:       map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", script}}}},
		DefaultEnvironment: "sh", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); m.Wait(); s.Close() })
	f := &fixture{t: t, m: m, s: s, dir: dir}
	r := f.create("three turns")
	f.wait(r.ID, factory.StateSucceeded)
	for i := 0; i < 2; i++ {
		if _, err := m.FollowUp(r.ID, "again"); err != nil {
			t.Fatal(err)
		}
		f.waitTurns(r.ID, i+2)
	}
	events, _ := s.RunEvents(r.ID)
	var kept, notes []int
	var finished []string
	for _, e := range events {
		switch {
		case e.Kind == "started":
			kept, notes = append(kept, 0), append(notes, 0)
		case e.Kind == "message" && strings.HasPrefix(e.Message, factory.OutputLimited):
			notes[len(notes)-1]++
		case e.Kind == "message":
			kept[len(kept)-1]++
		case e.Kind == "finished":
			finished = append(finished, e.Message)
		}
	}
	if fmt.Sprint(kept) != "[10 10 5]" || fmt.Sprint(notes) != "[1 1 1]" {
		t.Errorf("kept %v messages a turn with %v notes; want [10 10 5] and one note each", kept, notes)
	}
	for i, want := range []string{"(2 status messages", "(2 status messages", "(7 status messages"} {
		if i >= len(finished) || !strings.Contains(finished[i], want) {
			t.Errorf("turn %d ended %q, want the count of what it dropped, %q", i+1, finished, want)
		}
	}
}

// waitTurns waits until a run has ended its nth turn.
func (f *fixture) waitTurns(id string, n int) {
	f.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if r, err := f.s.Run(id); err == nil && r.Turns >= n && r.State.Terminal() {
			return
		}
	}
	f.t.Fatalf("run %s did not end its turn %d", id, n)
}
