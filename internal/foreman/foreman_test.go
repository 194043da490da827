package foreman_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/foreman"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
)

// world is a store on a temp dir with one factory, a run manager that is
// not started (its runs stay queued), and the foreman over both.
type world struct {
	s   *store.Store
	m   *runs.Manager
	f   *foreman.Foreman
	fac *factory.Factory
}

func newWorld(t *testing.T, settings factory.Settings) *world {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fac := &factory.Factory{Name: "acme", UID: factory.NewUID(factory.PrefixFactory), Settings: settings, CreatedAt: time.Now()}
	b := s.NewBatch()
	b.PutFactory(fac)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "default", Log: slog.New(slog.DiscardHandler),
		Environments: map[string]runs.Environment{"default": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	f := foreman.New(foreman.Config{Store: s, Runs: m, Key: []byte("0123456789abcdef0123456789abcdef"), URL: func() string { return "http://127.0.0.1:1" }})
	t.Cleanup(f.Drain) // before the store closes
	return &world{s: s, m: m, f: f, fac: fac}
}

// run creates a run of the factory, under parents (nearest first).
func (w *world) run(t *testing.T, parents ...string) *factory.Run {
	t.Helper()
	r, err := w.m.Create(runs.CreateRequest{Prompt: "work", FactoryUID: w.fac.UID, Ancestors: parents, Repositories: []factory.RepoCheckout{}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRunToken(t *testing.T) {
	w := newWorld(t, factory.Settings{})
	a, b := w.run(t), w.run(t)
	tok := w.f.RunToken(a.ID)
	if r, err := w.f.VerifyRunToken(tok); err != nil || r.ID != a.ID {
		t.Fatalf("a run's own token: %v %v", r, err)
	}
	other := foreman.New(foreman.Config{Store: w.s, Key: []byte("another key of thirty-two bytes!")})
	mac := tok[strings.LastIndexByte(tok, '.'):]
	for name, bad := range map[string]string{
		"another run's ID under this run's MAC": "frt_" + b.ID + mac,
		"a MAC cut short":                       tok[:len(tok)-1],
		"no MAC":                                "frt_" + a.ID,
		"another server's key":                  other.RunToken(a.ID),
		"no prefix":                             strings.TrimPrefix(tok, "frt_"),
		"empty":                                 "",
		"an unknown run":                        w.f.RunToken("run_nope"),
	} {
		if _, err := w.f.VerifyRunToken(bad); !errors.Is(err, foreman.ErrBadToken) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := w.m.Cancel(a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.f.VerifyRunToken(tok); !errors.Is(err, foreman.ErrBadToken) {
		t.Errorf("the token of a cancelled run: %v", err)
	}
}

func TestSpecApproval(t *testing.T) {
	w := newWorld(t, factory.Settings{})
	root := w.run(t)
	title := "The task"
	task, err := w.f.CreateTask(w.fac, root.Conversation(), foreman.TaskFields{Title: &title}, nil)
	if err != nil {
		t.Fatal(err)
	}
	child := w.run(t, root.ID)
	if _, err := w.f.SetStage(child, "implement"); factory.ErrorCode(err) != factory.ECONFLICT {
		t.Fatalf("IMPLEMENT before any spec review: %v", err)
	}
	approve := func(answer string) {
		t.Helper()
		it, err := w.f.Ask(child, foreman.Ask{Question: "The spec?", Kind: factory.InboxSpecReview})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.f.Answer(it.UID, answer, "", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := w.f.Answer(it.UID, answer, "", nil); factory.ErrorCode(err) != factory.ECONFLICT {
			t.Errorf("answering twice: %v", err)
		}
	}
	approve("request_changes")
	if _, err := w.f.SetStage(child, "IMPLEMENT"); err == nil {
		t.Fatal("IMPLEMENT after changes were requested")
	}
	approve("APPROVE")
	got, err := w.f.SetStage(child, "IMPLEMENT")
	if err != nil || got.Stage != factory.StageImplement || got.UID != task.UID {
		t.Fatalf("IMPLEMENT after the approval: %v %v", got, err)
	}
	v2, err := w.f.Ask(child, foreman.Ask{Question: "The new spec?", Kind: factory.InboxSpecReview})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.f.SetStage(child, "IMPLEMENT"); err == nil {
		t.Fatal("a new spec review left the old approval standing")
	}
	// The attack: a third spec review while the second is open, and a
	// person approves the second: the third stays unapproved.
	if _, err := w.f.Ask(child, foreman.Ask{Question: "The spec, third draft?", Kind: factory.InboxSpecReview}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.f.Answer(v2.UID, "approve", "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := w.f.SetStage(child, "IMPLEMENT"); err == nil {
		t.Fatal("the approval of an older spec review let the task past the newest")
	}
	relaxed := newWorld(t, factory.Settings{SpecApproval: "none"})
	r := relaxed.run(t)
	if _, err := relaxed.f.CreateTask(relaxed.fac, r.Conversation(), foreman.TaskFields{Title: &title}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := relaxed.f.SetStage(r, "IMPLEMENT"); err != nil {
		t.Errorf("specApproval: none: %v", err)
	}
}

func TestAsking(t *testing.T) {
	w := newWorld(t, factory.Settings{})
	r := w.run(t)
	for _, bad := range []foreman.Ask{{}, {Question: " "}, {Question: "x", Kind: "poll"}, {Question: strings.Repeat("x", foreman.MaxQuestion+1)},
		{Question: "x", Options: make([]string, foreman.MaxOptions+1)}} {
		if _, err := w.f.Ask(r, bad); factory.ErrorCode(err) != factory.EINVALID {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	it, err := w.f.Ask(r, foreman.Ask{Question: "Which colour?\nThe button.", Options: []string{"Red", "Blue"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := w.s.Run(r.ID); got.Asking == nil || got.Asking.Item != it.UID || got.Asking.Question != "Which colour?" {
		t.Fatalf("the run does not say it asks: %+v", got.Asking)
	}
	for _, bad := range []string{"", "Green"} {
		if _, err := w.f.Answer(it.UID, bad, "", nil); factory.ErrorCode(err) != factory.EINVALID {
			t.Errorf("answer %q: %v", bad, err)
		}
	}
	done, err := w.f.Answer(it.UID, "blue", "", &factory.Creator{DisplayName: "Ada"})
	if err != nil || done.Answer != "Blue" || done.Kind != factory.InboxAnsweredQuestion || done.Resolved == nil {
		t.Fatalf("the answer: %+v %v", done, err)
	}
	got, _ := w.s.Run(r.ID)
	fus, _ := w.s.FollowUps(r.ID)
	if got.Asking != nil || len(fus) != 1 || !strings.Contains(fus[0].Message, "Ada answered your question (Which colour?): Blue") {
		t.Errorf("the run after the answer: %+v %+v", got.Asking, fus)
	}
}

func TestDispatchDepth(t *testing.T) {
	w := newWorld(t, factory.Settings{Orchestration: &factory.Orchestration{MaxDepth: 2}})
	top := w.run(t)
	one := w.run(t, top.ID)
	two := w.run(t, one.ID, top.ID)
	_, err := w.f.Dispatch(two, foreman.Dispatch{Agent: "any", Prompt: "deeper"})
	if factory.ErrorCode(err) != factory.EINVALID || !strings.Contains(err.Error(), "orchestration.maxDepth") {
		t.Errorf("a dispatch past maxDepth: %v", err)
	}
	if _, err := w.f.Dispatch(one, foreman.Dispatch{Agent: "any", Prompt: " "}); factory.ErrorCode(err) != factory.EINVALID {
		t.Errorf("a dispatch without a prompt: %v", err)
	}
}
