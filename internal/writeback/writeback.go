// Package writeback tells the issue or pull request a run came from how it
// goes (docs/spec/codehosts.md, Write-back): one comment, made when the
// run starts and edited in place at each change and at its end (never a
// second), and a reaction on the comment that asked. A failure to write
// back is retried, logged and shown on the run's timeline; it never
// changes the run.
package writeback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"factory"
	"factory/internal/codehost"
	"factory/internal/store"
)

// Reporter writes runs back to where they came from.
type Reporter struct {
	Store *store.Store
	Hosts *codehost.Hosts
	// PublicURL is the server's address: the comment links to the run's
	// page on the dashboard.
	PublicURL string
	Log       *slog.Logger
	// Backoff are the waits between attempts of one report (5 attempts
	// over about 10 minutes by default).
	Backoff []time.Duration

	mu      sync.Mutex
	pending map[string]int // run ID → attempts failed so far
	queue   []string
	wake    chan struct{}
	done    chan struct{}
}

// DefaultBackoff spreads 5 attempts over about 10 minutes.
var DefaultBackoff = []time.Duration{10 * time.Second, 40 * time.Second, 2 * time.Minute, 7 * time.Minute}

// Changed is told of a run whose state changed (runs.Config.Changed): its
// report is queued, once however many changes come before it is made.
func (rp *Reporter) Changed(r *factory.Run) {
	if r.Origin == nil || r.Origin.Silent || rp.Hosts == nil {
		return
	}
	rp.enqueue(r.ID)
}

func (rp *Reporter) enqueue(id string) {
	rp.mu.Lock()
	if rp.pending == nil {
		rp.pending, rp.wake = map[string]int{}, make(chan struct{}, 1)
	}
	if _, queued := rp.pending[id]; !queued {
		rp.pending[id] = 0
		rp.queue = append(rp.queue, id)
	}
	rp.mu.Unlock()
	select {
	case rp.wake <- struct{}{}:
	default:
	}
}

// Run makes the queued reports until ctx ends.
func (rp *Reporter) Run(ctx context.Context) {
	rp.mu.Lock()
	if rp.pending == nil {
		rp.pending, rp.wake = map[string]int{}, make(chan struct{}, 1)
	}
	rp.mu.Unlock()
	for {
		id, ok := rp.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-rp.wake:
			}
			continue
		}
		err := rp.report(ctx, id)
		rp.settle(ctx, id, err)
	}
}

func (rp *Reporter) next() (string, bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if len(rp.queue) == 0 {
		return "", false
	}
	id := rp.queue[0]
	rp.queue = rp.queue[1:]
	return id, true
}

// settle ends a report: done, or tried again after a while, at most
// len(Backoff)+1 times; each failure is logged, the first and the last on
// the run's timeline too.
func (rp *Reporter) settle(ctx context.Context, id string, err error) {
	rp.mu.Lock()
	failed := rp.pending[id]
	if err == nil || errors.Is(err, errNothingToDo) {
		delete(rp.pending, id)
		rp.mu.Unlock()
		return
	}
	backoff := rp.Backoff
	if backoff == nil {
		backoff = DefaultBackoff
	}
	last := failed >= len(backoff)
	if last {
		delete(rp.pending, id)
	} else {
		rp.pending[id] = failed + 1
	}
	rp.mu.Unlock()
	rp.Log.Warn("writing a run back to where it came from", "run", id, "attempt", failed+1, "err", err)
	if failed == 0 || last {
		word := "will try again"
		if last {
			word = "gave up"
		}
		rp.note(id, fmt.Sprintf("%s (%s): %v", factory.WriteBackFailed, word, err))
	}
	if last {
		return
	}
	time.AfterFunc(backoff[failed], func() {
		if ctx.Err() != nil {
			return
		}
		rp.mu.Lock()
		rp.queue = append(rp.queue, id)
		rp.mu.Unlock()
		select {
		case rp.wake <- struct{}{}:
		default:
		}
	})
}

var errNothingToDo = errors.New("nothing to write back")

// report makes the run's comment, or edits it, with what the run is now.
func (rp *Reporter) report(ctx context.Context, id string) error {
	r, err := rp.Store.Run(id)
	if err != nil || r.Origin == nil || r.Origin.Silent {
		return errNothingToDo
	}
	host, err := rp.Hosts.For(rp.factoryName(r.FactoryUID), r.Origin.Provider)
	if err != nil {
		return errNothingToDo // a host this server has no credential for: nothing is reached
	}
	events, err := rp.bodyEvents(id)
	if err != nil {
		return err
	}
	t := codehost.Thread{Repo: codehost.Repo{Host: r.Origin.Provider, Path: r.Origin.Repo}, Number: r.Origin.Number,
		Merge: r.Origin.Merge, CommentID: r.Origin.CommentID, ReviewComment: r.Origin.ReviewComment}
	body := Body(r, events, rp.PublicURL)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rp.react(ctx, host, r, t)
	if r.ReportComment != "" {
		return host.EditComment(ctx, t, r.ReportComment, body)
	}
	cid, err := host.Comment(ctx, t, body)
	if err != nil {
		return err
	}
	if _, err := rp.Store.UpdateRun(id, true, func(r *factory.Run, b *store.Batch) error {
		r.ReportComment = cid
		return nil
	}); err != nil {
		return err
	}
	// The run may have moved on while the comment was made: edit it to
	// what the run is now.
	if now, err := rp.Store.Run(id); err == nil && now.State != r.State {
		rp.enqueue(id)
	}
	return nil
}

// react marks the comment that asked for the run, or for its latest
// follow-up, with 👀, once each.
func (rp *Reporter) react(ctx context.Context, host codehost.Host, r *factory.Run, t codehost.Thread) {
	if t.CommentID == 0 || r.ReactedTo == t.CommentID {
		return
	}
	if err := host.React(ctx, t); err != nil {
		rp.Log.Warn("reacting to the comment that asked for a run", "run", r.ID, "err", err)
		return
	}
	_, err := rp.Store.UpdateRun(r.ID, false, func(r *factory.Run, b *store.Batch) error {
		r.ReactedTo = t.CommentID
		return nil
	})
	if err != nil {
		rp.Log.Warn("recording a reaction", "run", r.ID, "err", err)
	}
}

func (rp *Reporter) factoryName(uid string) string {
	fs, err := rp.Store.Factories()
	if err != nil {
		return ""
	}
	for _, f := range fs {
		if f.UID == uid {
			return f.Name
		}
	}
	return ""
}

// note writes a message on the run's timeline.
func (rp *Reporter) note(id, msg string) {
	_, err := rp.Store.UpdateRun(id, false, func(r *factory.Run, b *store.Batch) error {
		b.AddRunEvent(r, factory.RunEvent{Time: time.Now().UTC(), Kind: "message", Message: msg})
		return nil
	})
	if err != nil {
		rp.Log.Error("noting a write-back failure", "run", id, "err", err)
	}
}

// Marker is the hidden line a run's comment begins with: it names the run.
func Marker(runID string) string { return "<!-- factory-run: " + runID + " -->" }

// MaxFinalMessage bounds the agent's final message in a comment.
const MaxFinalMessage = 2000

// Body is the comment that says how a run goes: its title and state, a
// link to its page, the follow-ups it got, and at its end the outcome,
// the agent's last message, its branch and the pull requests it opened.
func Body(r *factory.Run, events []*factory.RunEvent, publicURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n**%s** · %s %s\n\n", Marker(r.ID), oneLine(r.Title), stateMark(r.State), r.State)
	fmt.Fprintf(&b, "[Run %s](%s/ui/runs/%s)\n", r.ID, strings.TrimRight(publicURL, "/"), r.ID)
	for _, e := range events {
		if e.Kind == "followup" {
			fmt.Fprintf(&b, "\n↪ Follow-up: %s", oneLine(e.Message))
		}
	}
	if r.State.Terminal() || r.State == factory.StateBlocked {
		if r.StatusMessage != nil && r.StatusMessage.Message != "" {
			fmt.Fprintf(&b, "\n\n**Outcome:** %s", oneLine(r.StatusMessage.Message))
		}
		if last := lastAgentMessage(events); last != "" {
			fmt.Fprintf(&b, "\n\n> %s", strings.ReplaceAll(shorten(last, MaxFinalMessage), "\n", "\n> "))
		}
	}
	if len(r.Repositories) > 0 && r.StartedAt != nil {
		fmt.Fprintf(&b, "\n\n**Branch:** `%s`", r.Branch())
	}
	for _, a := range r.Artifacts {
		if a.Type == factory.ArtifactPullRequest {
			fmt.Fprintf(&b, "\n\n**Pull request:** [%s](%s)", oneLine(firstNonEmpty(a.Data.Title, a.Data.URL)), a.Data.URL)
			if a.Data.Status != "" {
				fmt.Fprintf(&b, " (%s)", a.Data.Status)
			}
		}
	}
	return b.String() + "\n"
}

// bodyEvents are the events of a run's timeline that Body reads (its
// follow-ups, the last turn's start and the agent's last message after
// it), read a page at a time: a long timeline is never held whole.
func (rp *Reporter) bodyEvents(id string) ([]*factory.RunEvent, error) {
	var followUps []*factory.RunEvent
	var start, last *factory.RunEvent
	for from := 0; ; {
		page, err := rp.Store.RunEventsPage(id, from, factory.TimelinePage)
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			switch {
			case e.Kind == "followup":
				followUps = append(followUps, e)
			case e.Kind == "started" || e.Kind == "claimed":
				start, last = e, nil
			case lastAgentMessage([]*factory.RunEvent{e}) != "":
				last = e
			}
		}
		if len(page) < factory.TimelinePage {
			break
		}
		from += len(page)
	}
	for _, e := range []*factory.RunEvent{start, last} {
		if e != nil {
			followUps = append(followUps, e)
		}
	}
	return followUps, nil
}

// lastAgentMessage is the agent's last status message of the last turn.
func lastAgentMessage(events []*factory.RunEvent) string {
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Kind == "started" || e.Kind == "claimed" {
			return ""
		}
		if e.Kind == "message" && !strings.HasPrefix(e.Message, "[") && !strings.HasPrefix(e.Message, "artifacts: ") &&
			!strings.HasPrefix(e.Message, "setup ") && !strings.HasPrefix(e.Message, "checkout: ") {
			return e.Message
		}
	}
	return ""
}

func stateMark(s factory.RunState) string {
	switch s {
	case factory.StateSucceeded:
		return "✅"
	case factory.StateFailed, factory.StateError:
		return "❌"
	case factory.StateCancelled:
		return "⏹"
	case factory.StateBlocked:
		return "⏸"
	}
	return "⏳"
}

// oneLine keeps a text on one line (an agent's words cannot forge the
// comment's structure).
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
