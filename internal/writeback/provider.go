package writeback

import (
	"context"
	"errors"

	"factory"
	"factory/internal/codehost"
)

// Provider is where runs of one kind report (docs/spec/talkback.md): a code
// host, Slack, Linear, Jira, Teams. Each says the same report in its own
// way.
type Provider interface {
	// React marks the message or comment that asked for the run (👀):
	// o.CommentID on a code host, o.Message in a chat. A provider without
	// reactions does nothing.
	React(ctx context.Context, o *factory.Origin) error
	// Post makes the run's report where it came from and returns its ID.
	Post(ctx context.Context, o *factory.Origin, rep *Report) (string, error)
	// Update brings the report made before (id) up to date: an edit, or,
	// where a report is a sequence of activities (a Linear agent
	// session), the next one when there is one to say.
	Update(ctx context.Context, o *factory.Origin, id string, rep *Report) error
}

// Providers finds the provider of a factory's runs from a chat or tracker,
// with the factory's credentials; ErrNoCredential when it has none.
type Providers interface {
	For(ctx context.Context, factoryName, provider string) (Provider, error)
}

// ErrNoCredential is the error of a run whose provider the factory has no
// credential for: the write-back is given up at once (a write_back_failed
// on the run's timeline), never tried again.
var ErrNoCredential = errors.New("no credential")

// hostProvider is a code host as a Provider: a comment on the issue or pull
// request, made then edited.
type hostProvider struct{ h codehost.Host }

func threadOf(o *factory.Origin) codehost.Thread {
	return codehost.Thread{Repo: codehost.Repo{Host: o.Provider, Path: o.Repo}, Number: o.Number, Merge: o.Merge,
		CommentID: o.CommentID, ReviewComment: o.ReviewComment}
}

func (p hostProvider) React(ctx context.Context, o *factory.Origin) error {
	return p.h.React(ctx, threadOf(o))
}

func (p hostProvider) Post(ctx context.Context, o *factory.Origin, rep *Report) (string, error) {
	return p.h.Comment(ctx, threadOf(o), rep.Markdown)
}

func (p hostProvider) Update(ctx context.Context, o *factory.Origin, id string, rep *Report) error {
	return p.h.EditComment(ctx, threadOf(o), id, rep.Markdown)
}
