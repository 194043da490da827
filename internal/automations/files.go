package automations

import (
	"context"

	"factory"
	"factory/internal/trigger"
)

// FileReader reads the files a pull (merge) request event's pull request
// changes, through the factory's code host, for the paths filter; a
// failure is the reason in trigger.Files (trigger.UnreadFiles).
type FileReader func(ctx context.Context, factoryName string, ev *factory.ProviderEvent) trigger.Files

// readFiles gives a pull request's delivery its changed files when an
// enabled automation filters on paths for one of its events: read once
// (Files), whatever the number of automations. Files that could not be
// read, or that the host lists no more of, make the delivery's outcome
// say so, and are logged. A failure is not retried: the delivery's other
// automations are decided, and those that filter on paths do not fire
// (an operator redelivers the delivery to have it evaluated again).
func (e *Evaluator) readFiles(f *factory.Factory, read *trigger.Delivery, autos []*compiledAutomation, d *factory.Delivery) {
	need := false
	for _, a := range autos {
		if a.rec.Spec.Enabled && a.triggers.NeedsFiles(&f.Settings, read) {
			need = true
			break
		}
	}
	if !need {
		return
	}
	files := trigger.Files{Unread: trigger.NoReader}
	pr := read.PullRequest()
	if e.Files != nil {
		files = e.Files(e.context(), f.Name, pr)
	}
	read.SetFiles(files)
	if files.Unread != "" || files.Capped {
		d.Outcome = files.Note()
		e.Log.Warn("a pull request's changed files", "factory", f.Name, "delivery", d.ID, "repository", pr.Repository, "event", pr.Event,
			"note", files.Note())
	}
}

// context is what a read on the evaluator's behalf runs within: Run's
// context once it runs.
func (e *Evaluator) context() context.Context {
	if ctx, ok := e.ctx.Load().(context.Context); ok {
		return ctx
	}
	return context.Background()
}
