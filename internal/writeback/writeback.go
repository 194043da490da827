// Package writeback tells where a run came from how it goes
// (docs/spec/codehosts.md, Write-back; docs/spec/talkback.md): the issue or pull
// request on a code host, the Slack thread, the Linear agent session or
// issue, the Jira issue, the Teams thread. One mechanism for every
// provider: a report made when the run starts and brought up to date at
// each change and at its end (never a second), and a reaction on the
// message that asked. A failure to write back is retried, logged and shown
// on the run's timeline; it never changes the run.
package writeback

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"factory"
	"factory/internal/codehost"
	"factory/internal/store"
)

// Reporter writes runs back to where they came from.
type Reporter struct {
	Store *store.Store
	// Hosts are the code hosts (GitHub, GitLab); Chats the other
	// providers (Slack, Linear, Jira, Teams). Either may be nil.
	Hosts *codehost.Hosts
	Chats Providers
	// PublicURL is the server's address: the report links to the run's
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
	// running is the run whose report is being made; dirty, the runs
	// that changed while theirs was (they are reported again after it).
	running string
	dirty   map[string]bool
}

// DefaultBackoff spreads 5 attempts over about 10 minutes.
var DefaultBackoff = []time.Duration{10 * time.Second, 40 * time.Second, 2 * time.Minute, 7 * time.Minute}

// Changed is told of a run whose state changed (runs.Config.Changed): its
// report is queued, once however many changes come before it is made.
func (rp *Reporter) Changed(r *factory.Run) {
	if r.Origin == nil || r.Origin.Silent || rp.Hosts == nil && rp.Chats == nil {
		return
	}
	rp.enqueue(r.ID)
}

func (rp *Reporter) enqueue(id string) {
	rp.mu.Lock()
	if rp.pending == nil {
		rp.pending, rp.wake, rp.dirty = map[string]int{}, make(chan struct{}, 1), map[string]bool{}
	}
	if _, queued := rp.pending[id]; !queued {
		rp.pending[id] = 0
		rp.queue = append(rp.queue, id)
	} else if rp.running == id {
		rp.dirty[id] = true // its report may already be past this change
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
		rp.pending, rp.wake, rp.dirty = map[string]int{}, make(chan struct{}, 1), map[string]bool{}
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
	rp.running = id
	return id, true
}

// settle ends a report: done, or tried again after a while, at most
// len(Backoff)+1 times; each failure is logged, the first and the last on
// the run's timeline too.
func (rp *Reporter) settle(ctx context.Context, id string, err error) {
	rp.mu.Lock()
	failed, again := rp.pending[id], rp.dirty[id]
	rp.running = ""
	delete(rp.dirty, id)
	if err == nil || errors.Is(err, errNothingToDo) {
		delete(rp.pending, id)
		rp.mu.Unlock()
		if again {
			rp.enqueue(id)
		}
		return
	}
	backoff := rp.Backoff
	if backoff == nil {
		backoff = DefaultBackoff
	}
	last := failed >= len(backoff) || errors.Is(err, ErrNoCredential)
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
		rp.note(id, fmt.Sprintf("%s (%s): %v", factory.WriteBackFailed, word, err), errors.Is(err, ErrNoCredential))
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

// report makes the run's report where it came from, or brings it up to
// date with what the run is now; a report that would say what the last one
// said is not sent again.
func (rp *Reporter) report(ctx context.Context, id string) error {
	r, err := rp.Store.Run(id)
	if err != nil || r.Origin == nil || r.Origin.Silent || r.Talkback != nil && r.Talkback.GaveUp {
		return errNothingToDo
	}
	p, err := rp.provider(ctx, r)
	if errors.Is(err, codehost.ErrNoHost) {
		return errNothingToDo // a code host this server has no credential for: nothing is reached
	}
	if err != nil {
		return err
	}
	events, err := rp.bodyEvents(id)
	if err != nil {
		return err
	}
	rep := NewReport(r, events, rp.PublicURL)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rp.react(ctx, p, r)
	said := r.Talkback
	if said == nil {
		said = &factory.Talkback{}
	}
	digest := rep.digest()
	if r.ReportComment != "" && said.Digest == digest {
		return nil
	}
	rep.FirstEnd = rep.Ended && said.Ended != r.Turns+1
	ref := r.ReportComment
	if ref == "" {
		if ref, err = p.Post(ctx, r.Origin, rep); err != nil {
			return err
		}
	} else if err := p.Update(ctx, r.Origin, ref, rep); err != nil {
		return err
	}
	return rp.said(r, ref, digest, rep.Ended)
}

// said records what the report said: its ID where it was made, its
// digest, and the end it reported. When the run has moved on meanwhile, its
// report is queued again.
func (rp *Reporter) said(r *factory.Run, ref, digest string, ended bool) error {
	now, err := rp.Store.UpdateRun(r.ID, true, func(cur *factory.Run, b *store.Batch) error {
		cur.ReportComment = ref
		tb := factory.Talkback{}
		if cur.Talkback != nil {
			tb = *cur.Talkback
		}
		tb.Digest = digest
		if ended {
			tb.Ended = r.Turns + 1
		}
		cur.Talkback = &tb
		return nil
	})
	if err != nil {
		return err
	}
	if now.State != r.State || now.Turns != r.Turns || len(now.Artifacts) != len(r.Artifacts) {
		rp.enqueue(r.ID) // marks it dirty: reported again once this report settles
	}
	return nil
}

// provider is where a run reports: its code host, or its chat's.
func (rp *Reporter) provider(ctx context.Context, r *factory.Run) (Provider, error) {
	switch r.Origin.Provider {
	case codehost.GitHub, codehost.GitLab:
		h, err := rp.Hosts.For(rp.factoryName(r.FactoryUID), r.Origin.Provider)
		if err != nil {
			return nil, err
		}
		return hostProvider{h}, nil
	}
	if rp.Chats == nil {
		return nil, fmt.Errorf("%w: this server reaches no %s", ErrNoCredential, r.Origin.Provider)
	}
	return rp.Chats.For(ctx, rp.factoryName(r.FactoryUID), r.Origin.Provider)
}

// react marks the message or comment that asked for the run, or for its
// latest follow-up, with 👀, once each.
func (rp *Reporter) react(ctx context.Context, p Provider, r *factory.Run) {
	o := r.Origin
	key := o.Message
	if o.CommentID != 0 {
		key = strconv.FormatInt(o.CommentID, 10)
	}
	if key == "" || r.Talkback != nil && r.Talkback.Reacted == key || o.CommentID != 0 && r.ReactedTo == o.CommentID {
		return
	}
	if err := p.React(ctx, o); err != nil {
		rp.Log.Warn("reacting to the message that asked for a run", "run", r.ID, "provider", o.Provider, "err", err)
		return
	}
	_, err := rp.Store.UpdateRun(r.ID, false, func(r *factory.Run, b *store.Batch) error {
		tb := factory.Talkback{}
		if r.Talkback != nil {
			tb = *r.Talkback
		}
		tb.Reacted, r.Talkback = key, &tb
		if o.CommentID != 0 {
			r.ReactedTo = o.CommentID
		}
		return nil
	})
	if err != nil {
		rp.Log.Warn("recording a reaction", "run", r.ID, "err", err)
	}
}

// digest is what a report says, for telling a change from none.
func (rep *Report) digest() string {
	h := sha256.Sum256([]byte(string(rep.State) + "\x00" + rep.Markdown))
	return hex.EncodeToString(h[:12])
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

// note writes a message on the run's timeline; giveUp stops the run's
// reports for good (a missing credential: the next change would only say
// the same again).
func (rp *Reporter) note(id, msg string, giveUp bool) {
	_, err := rp.Store.UpdateRun(id, false, func(r *factory.Run, b *store.Batch) error {
		b.AddRunEvent(r, factory.RunEvent{Time: time.Now().UTC(), Kind: "message", Message: msg})
		if giveUp {
			tb := factory.Talkback{}
			if r.Talkback != nil {
				tb = *r.Talkback
			}
			tb.GaveUp, r.Talkback = true, &tb
		}
		return nil
	})
	if err != nil {
		rp.Log.Error("noting a write-back failure", "run", id, "err", err)
	}
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
