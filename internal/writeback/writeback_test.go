package writeback_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"factory"
	"factory/internal/codehost"
	"factory/internal/store"
	"factory/internal/writeback"
)

// TestBody: the comment names the run (the hidden marker), its title and
// state, links its page, lists its follow-ups, and at its end says the
// outcome, the agent's last message (at most 2,000 characters), the branch
// and the pull requests; nothing the agent or the title says can add a
// line of its own to the comment's structure.
func TestBody(t *testing.T) {
	now := time.Now()
	r := &factory.Run{ID: "run_1", Title: "Fix it\n**forged** line", State: factory.StateSucceeded, StartedAt: &now,
		StatusMessage: &factory.StatusMessage{Message: "the agent ended its turn"},
		Repositories:  []factory.RepoCheckout{{Host: "github", Path: "acme/widgets"}},
		Artifacts: []factory.Artifact{{Type: factory.ArtifactPullRequest, Data: factory.ArtifactData{URL: "https://example.com/pull/1",
			Title: "Fix the crash", Status: "open"}}}}
	events := []*factory.RunEvent{{Kind: "created"}, {Kind: "followup", Message: "and the docs\nplease"}, {Kind: "claimed"}, {Kind: "started"},
		{Kind: "message", Message: "[tool] edit"}, {Kind: "message", Message: strings.Repeat("long ", 600)}, {Kind: "finished"}}
	body := writeback.Body(r, events, "https://factory.example.com/")
	for _, want := range []string{writeback.Marker("run_1") + "\n", "**Fix it **forged** line** · ✅ SUCCEEDED",
		"[Run run_1](https://factory.example.com/ui/runs/run_1)", "↪ Follow-up: and the docs please", "**Outcome:** the agent ended its turn",
		"**Branch:** `factory/run_1`", "**Pull request:** [Fix the crash](https://example.com/pull/1) (open)"} {
		if !strings.Contains(body, want) {
			t.Errorf("the comment lacks %q:\n%s", want, body)
		}
	}
	quote := body[strings.Index(body, "> "):]
	quote = quote[:strings.Index(quote, "\n\n")]
	if len(quote) > writeback.MaxFinalMessage+10 || !strings.HasSuffix(quote, "…") {
		t.Errorf("the last message is not shortened: %d bytes", len(quote))
	}
	r.State = factory.StateInProgress
	if body := writeback.Body(r, events[:4], "https://f"); strings.Contains(body, "Outcome") || !strings.Contains(body, "⏳ INPROGRESS") {
		t.Errorf("a run in progress:\n%s", body)
	}
}

// flaky is a code host that refuses the first fails comments.
type flaky struct {
	mu       sync.Mutex
	fails    int
	comments []string
	edits    int
}

func (f *flaky) Name() string { return codehost.GitHub }
func (f *flaky) Token(context.Context, []codehost.Repo) (codehost.Token, error) {
	return codehost.Token{}, nil
}
func (f *flaky) Repository(context.Context, codehost.Repo) (codehost.RepoInfo, error) {
	return codehost.RepoInfo{}, nil
}
func (f *flaky) Comment(_ context.Context, _ codehost.Thread, body string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails > 0 {
		f.fails--
		return "", errors.New("502 Bad Gateway")
	}
	f.comments = append(f.comments, body)
	return "77", nil
}
func (f *flaky) EditComment(context.Context, codehost.Thread, string, string) error {
	f.mu.Lock()
	f.edits++
	f.mu.Unlock()
	return nil
}
func (f *flaky) React(context.Context, codehost.Thread) error { return nil }
func (f *flaky) PullRequests(context.Context, codehost.Repo, string) ([]codehost.PullRequest, error) {
	return nil, nil
}
func (f *flaky) Check(context.Context, codehost.Repo, codehost.Check) error { return nil }
func (f *flaky) Env(codehost.Token) []string                                { return nil }

// TestRetries: a code host that fails is asked again after a while; the
// first failure is said on the run's timeline (write_back_failed), the run
// itself does not change, and once the host answers the comment is made
// once. A host that never answers is given up on, and that is said too.
func TestRetries(t *testing.T) {
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(id string) *factory.Run {
		r := &factory.Run{ID: id, Title: "t", State: factory.StateQueued, CreatedAt: time.Now(), UpdatedAt: time.Now(),
			Origin: &factory.Origin{Provider: "github", Repo: "acme/widgets", Number: 7, WorkItem: "github:acme/widgets#7"}}
		b := s.NewLogBatch()
		b.PutRun(r, nil)
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		fails int
		want  string
	}{{2, "will try again"}, {10, "gave up"}} {
		host := &flaky{fails: c.fails}
		rp := &writeback.Reporter{Store: s, Hosts: &codehost.Hosts{GitHub: host}, PublicURL: "https://f", Log: slog.New(slog.DiscardHandler),
			Backoff: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}}
		ctx, cancel := context.WithCancel(context.Background())
		go rp.Run(ctx)
		r := run("run_" + c.want[:4])
		rp.Changed(r)
		deadline := time.Now().Add(5 * time.Second)
		for {
			evs, _ := s.RunEvents(r.ID)
			got, _ := s.Run(r.ID)
			text := ""
			for _, e := range evs {
				text += e.Message + "\n"
			}
			host.mu.Lock()
			made := len(host.comments)
			host.mu.Unlock()
			done := c.fails < 4 && made == 1 && got.ReportComment == "77" || c.fails >= 4 && strings.Contains(text, "gave up")
			if done {
				if !strings.Contains(text, factory.WriteBackFailed) || !strings.Contains(text, "502 Bad Gateway") || got.State != factory.StateQueued {
					t.Errorf("%d failures: timeline %q, state %s", c.fails, text, got.State)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d failures: %d comments, timeline %q", c.fails, made, text)
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}
}
