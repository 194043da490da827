package runs_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"factory"

	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
	"factory/internal/testproc"
)

type fixture struct {
	t     *testing.T
	m     *runs.Manager
	s     *store.Store
	dir   string
	stop  context.CancelFunc
	close func()
}

// newManager runs a manager over a real store with one exec environment
// running script (sh -c).
func newManager(t *testing.T, dir string, max int, script string, mods ...func(*runs.Config)) *fixture {
	t.Helper()
	s, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := runs.Config{Store: s, DataDir: filepath.Join(dir, "data"), MaxConcurrent: max,
		Environments:       map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", script}, Grace: 200 * time.Millisecond}}},
		DefaultEnvironment: "sh", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, mod := range mods {
		mod(&cfg)
	}
	m := runs.NewManager(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, m: m, s: s, dir: dir, stop: cancel}
	f.close = func() { cancel(); m.Wait(); s.Close() }
	t.Cleanup(func() {
		if f.close != nil {
			f.close()
		}
	})
	return f
}

func (f *fixture) wait(id string, state factory.RunState) *factory.Run {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := f.s.Run(id)
		if err == nil && r.State == state {
			return r
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("run %s did not reach %s: %+v %v", id, state, r, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fixture) create(prompt string) *factory.Run {
	f.t.Helper()
	r, err := f.m.Create(runs.CreateRequest{Prompt: prompt, Source: "API",
		Attachments: []runs.AttachmentData{{Name: "event-payload.json", Data: []byte(`{"a":1}`)}}})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func TestRunLifecycle(t *testing.T) {
	f := newManager(t, t.TempDir(), 4, `cat PROMPT.md; echo; cat event-payload.json; echo; echo "attachments in $FACTORY_ATTACHMENTS_DIR"`)
	r := f.create("# Fix the build\nThe nightly failed.")
	if r.State != factory.StateQueued || r.Title != "Fix the build" || len(r.Attachments) != 1 {
		t.Fatalf("created %+v", r)
	}
	r = f.wait(r.ID, factory.StateSucceeded)
	if r.StartedAt == nil || !r.UpdatedAt.After(r.CreatedAt) || r.Turns != 1 {
		t.Fatalf("finished %+v", r)
	}
	events, _ := f.s.RunEvents(r.ID)
	var kinds, messages []string
	for _, e := range events {
		kinds = append(kinds, e.Kind)
		if e.Kind == "message" {
			messages = append(messages, e.Message)
		}
	}
	if strings.Join(kinds, ",") != "created,claimed,started,message,message,message,message,finished" ||
		messages[0] != "# Fix the build" || messages[2] != `{"a":1}` || !strings.HasSuffix(messages[3], "/workspace/attachments") {
		t.Fatalf("timeline %v %q", kinds, messages)
	}
	if _, err := f.m.Create(runs.CreateRequest{Prompt: "x", Environment: "nope"}); !errors.Is(err, runs.ErrUnknownEnvironment) {
		t.Fatalf("unknown environment: %v", err)
	}
}

func TestRunsWaitInCreationOrder(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "order")
	// The runs share a log outside their workspaces: unconfined.
	f := newManager(t, dir, 1, `if [ -e `+log+`.busy ]; then echo overlap >> `+log+`; fi; touch `+log+`.busy; echo $FACTORY_RUN_ID >> `+log+`; sleep 0.1; rm `+log+`.busy`,
		func(c *runs.Config) { c.Unconfined = true })
	var ids []string
	for i := 0; i < 4; i++ {
		ids = append(ids, f.create("run").ID)
	}
	f.wait(ids[3], factory.StateSucceeded)
	got, _ := os.ReadFile(log)
	if strings.TrimSpace(string(got)) != strings.Join(ids, "\n") {
		t.Fatalf("order or overlap:\n%s\nwant\n%s", got, strings.Join(ids, "\n"))
	}
}

func TestCancel(t *testing.T) {
	dir := t.TempDir()
	f := newManager(t, dir, 1, `echo $$ > pid-$FACTORY_RUN_ID; echo working; sleep 30`)
	running, queued := f.create("a"), f.create("b")
	f.wait(running.ID, factory.StateInProgress)

	// A queued run is cancelled without ever starting.
	if _, err := f.m.Cancel(queued.ID); err != nil {
		t.Fatal(err)
	}
	f.wait(queued.ID, factory.StateCancelled)
	if _, err := os.Stat(filepath.Join(f.m.Workspace(queued.ID), "pid-"+queued.ID)); err == nil {
		t.Fatal("a cancelled queued run started")
	}
	// A running one is stopped, with its processes.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(f.m.Workspace(running.ID), "pid-"+running.ID)); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if _, err := f.m.Cancel(running.ID); err != nil {
		t.Fatal(err)
	}
	r := f.wait(running.ID, factory.StateCancelled)
	b, _ := os.ReadFile(filepath.Join(f.m.Workspace(running.ID), "pid-"+running.ID))
	os.WriteFile(filepath.Join(dir, "pid"), b, 0o644)
	noneLeft(t, dir)
	// A finished run cannot be cancelled.
	if _, err := f.m.Cancel(r.ID); !errors.Is(err, runs.ErrTerminal) {
		t.Fatalf("cancel of a cancelled run: %v", err)
	}
	if _, err := f.m.Cancel("run_nope"); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("cancel of an unknown run: %v", err)
	}
}

func TestFollowUps(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	f := newManager(t, dir, 4, `echo "turn: [$FACTORY_FOLLOWUP]" >> turns; while [ ! -e `+gate+` ]; do sleep 0.02; done; echo done`)
	os.WriteFile(gate, nil, 0o644)
	r := f.create("start")
	f.wait(r.ID, factory.StateSucceeded)

	// After the end: the run is continued, with the message.
	if _, err := f.m.FollowUp(r.ID, "also run the tests"); err != nil {
		t.Fatal(err)
	}
	r = f.wait(r.ID, factory.StateSucceeded)
	if r.Turns != 2 {
		t.Fatalf("turns %d", r.Turns)
	}

	// During a turn: queued, and several keep their order.
	os.Remove(gate)
	if _, err := f.m.FollowUp(r.ID, "first"); err != nil {
		t.Fatal(err)
	}
	f.wait(r.ID, factory.StateInProgress)
	f.m.FollowUp(r.ID, "second")
	f.m.FollowUp(r.ID, "third")
	os.WriteFile(gate, nil, 0o644)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, _ := f.s.Run(r.ID)
		if got.Turns == 5 && got.State == factory.StateSucceeded || time.Now().After(deadline) {
			break
		}
	}
	turns, _ := os.ReadFile(filepath.Join(f.m.Workspace(r.ID), "turns"))
	want := "turn: []\nturn: [also run the tests]\nturn: [first]\nturn: [second]\nturn: [third]\n"
	if string(turns) != want {
		t.Fatalf("turns:\n%s\nwant\n%s", turns, want)
	}
}

func TestRestartRecovery(t *testing.T) {
	dir := t.TempDir()
	f := newManager(t, dir, 1, `echo $$ > pid; sleep 30`)
	busy, waiting := f.create("busy"), f.create("waiting")
	f.wait(busy.ID, factory.StateInProgress)
	// Stop as a crash would leave it: the store says INPROGRESS and QUEUED.
	// (A graceful stop ends in-progress runs ERROR itself; write the crash
	// state back to test recovery.)
	f.close()
	f.close = nil
	s, _ := store.Open(filepath.Join(dir, "data"))
	r, _ := s.Run(busy.ID)
	if r.State != factory.StateError || !r.StatusMessage.Retryable {
		t.Fatalf("after a graceful stop: %+v %+v", r, r.StatusMessage)
	}
	prev := *r
	r.State = factory.StateInProgress
	b := s.NewBatch()
	b.PutRun(r, &prev)
	b.Commit()
	s.Close()
	noneLeft(t, dir)

	g := newManager(t, dir, 1, `echo restarted`)
	r = g.wait(busy.ID, factory.StateError)
	if !r.StatusMessage.Retryable || !strings.Contains(r.StatusMessage.Message, "send a follow-up") {
		t.Fatalf("in progress at the crash: %+v", r.StatusMessage)
	}
	g.wait(waiting.ID, factory.StateSucceeded)
	// A follow-up continues the run that was cut short.
	g.m.FollowUp(busy.ID, "go on")
	g.wait(busy.ID, factory.StateSucceeded)
}

type storeRun = factory.Run

func newStoreOnly(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestAgentsRunAsAnotherUser: with RunAs, the agent runs as that user, its
// workspace is its own, and the data directory's keys are out of its
// reach. The attack: `cat ../../../admin-api-key` from the workspace
// printed the admin key.
func TestAgentsRunAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root (or CAP_SETUID); this test runs as root in CI")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	dir := t.TempDir()
	os.Chmod(dir, 0o755) // the agent user must be able to pass the folders above the data directory
	os.Chmod(filepath.Dir(dir), 0o755)
	data := filepath.Join(dir, "data")
	s, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	os.WriteFile(filepath.Join(data, "admin-api-key"), []byte("fk_the_admin_key\n"), 0o600)
	script := `id -u > whoami; cat PROMPT.md > seen; if cat ../../../admin-api-key; then echo LEAKED; fi; echo done > done`
	m := runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "sh", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", script}},
			RunAs: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.Wait() }()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := m.Create(runs.CreateRequest{Prompt: "Read the key.", Source: "API"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, m: m, s: s}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cur, _ := s.Run(r.ID); cur.State.Terminal() {
			if cur.State != factory.StateSucceeded {
				t.Fatalf("the run ended %s: %s", cur.State, cur.StatusMessage.Message)
			}
			break
		}
	}
	done := f.wait(r.ID, factory.StateSucceeded)
	ws := m.Workspace(r.ID)
	if who, _ := os.ReadFile(filepath.Join(ws, "whoami")); strings.TrimSpace(string(who)) != nobody.Uid {
		t.Fatalf("the agent ran as %q, want %s", who, nobody.Uid)
	}
	if seen, _ := os.ReadFile(filepath.Join(ws, "seen")); string(seen) != "Read the key." {
		t.Fatalf("the agent could not read its prompt: %q", seen)
	}
	evs, _ := s.RunEvents(r.ID)
	for _, e := range evs {
		if strings.Contains(e.Message, "fk_the_admin_key") || strings.Contains(e.Message, "LEAKED") {
			t.Fatalf("the agent read the admin key: %+v (run %s)", e, done.State)
		}
	}
}

// TestRunErrorCodes: a run that did not succeed carries the catalog's code:
// an agent that exits non-zero agent_process_failed, one that goes quiet
// past its idle timeout infrastructure_timeout.
func TestRunErrorCodes(t *testing.T) {
	for script, want := range map[string]string{
		`exit 3`:   runtime.CodeAgentProcessFailed,
		`sleep 30`: runtime.CodeInfrastructureTimeout,
	} {
		dir := t.TempDir()
		s, err := store.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "sh", DefaultIdleTimeout: 200 * time.Millisecond,
			Log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
			Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", script}, Grace: 100 * time.Millisecond}}}})
		ctx, cancel := context.WithCancel(context.Background())
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := m.Create(runs.CreateRequest{Prompt: "go", Source: "API"})
		if err != nil {
			t.Fatal(err)
		}
		end := (&fixture{t: t, m: m, s: s}).wait(r.ID, factory.StateFailed)
		if end.StatusMessage == nil || end.StatusMessage.ErrorCode != want {
			t.Errorf("%s: %+v, want error code %s", script, end.StatusMessage, want)
		}
		cancel()
		m.Wait()
		s.Close()
	}
}

// TestFollowUpAttachmentsStayInTheWorkspace: an agent that replaced its
// attachments folder with a link elsewhere does not get a follow-up's
// attachment written there; the turn ends ERROR, saying why.
func TestFollowUpAttachmentsStayInTheWorkspace(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	f := newManager(t, dir, 2, `rm -rf attachments && ln -s `+outside+` attachments && echo done`)
	r := f.create("start")
	f.wait(r.ID, factory.StateSucceeded)
	_, _, err := f.m.SendFollowUp(r.ID, "with a file", []runs.AttachmentData{{Name: "authorized_keys", Data: []byte("ssh-ed25519 AAAA")}})
	if err != nil {
		t.Fatal(err)
	}
	got := f.wait(r.ID, factory.StateError)
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("written outside the workspace: %v", entries)
	}
	if !strings.Contains(got.StatusMessage.Message, "preparing the workspace") {
		t.Errorf("status: %+v", got.StatusMessage)
	}
	if _, _, err := f.m.SendFollowUp(r.ID, "again", []runs.AttachmentData{{Name: "authorized_keys", Data: []byte("x")}}); !errors.Is(err, runtime.ErrAttachmentName) {
		t.Errorf("a second attachment of the same name: %v", err)
	}
}

func noneLeft(t *testing.T, dir string) { testproc.NoneLeft(t, dir) }
