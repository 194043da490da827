package trigger

import (
	"fmt"

	"factory"
	"factory/internal/events"
)

// Files are the files a delivery's pull (merge) request changes, as its
// code host lists them: a pull request's payload does not, so a trigger
// that filters on paths for one is decided on these (Delivery.SetFiles).
type Files struct {
	Paths []string
	// Capped says the host lists no more than these (GitHub lists 3,000
	// files at most): the pull request may change others.
	Capped bool
	// Unread says why they could not be read ("paths: could not read the
	// pull request's files: ..."); Paths is then empty.
	Unread string
}

// NotRead is why a pull request event matches no trigger that filters on
// paths when no one read its files (Delivery.SetFiles was not called).
const NotRead = "paths: the pull request's files were not read"

// NoReader is NotRead where nothing reads code hosts (a caller without a
// reader of pull requests' files).
const NoReader = NotRead + ": this server reads no code host"

// UnreadFiles is what a failure to read a pull request's files makes of
// them: a reason, for the delivery log and Test filter.
func UnreadFiles(err error) Files {
	return Files{Unread: "paths: could not read the pull request's files: " + err.Error()}
}

// Note says what the files are, for the delivery log and Test filter:
// why they could not be read, how many there are, and the host's cap.
func (f *Files) Note() string {
	switch {
	case f.Unread != "":
		return f.Unread
	case f.Capped:
		return fmt.Sprintf("paths: matched against the first %d files the pull request changes: its code host lists no more", len(f.Paths))
	}
	return fmt.Sprintf("paths: matched against the %d files the pull request changes", len(f.Paths))
}

// PullRequest is the event of the delivery whose changed files a paths
// filter reads (events.PullRequestFiles): its first pull (merge) request
// event; nil when it has none. A delivery's events are all of one pull
// request.
func (d *Delivery) PullRequest() *factory.ProviderEvent {
	for _, ev := range d.Events {
		if events.PullRequestFiles(ev) {
			return ev
		}
	}
	return nil
}

// SetFiles gives the delivery its pull request's changed files: each of
// its pull request events has them as its paths (Fields["paths"], where
// the filter key reads them, and the delivery log shows them). Files that
// could not be read leave the paths out: such an event matches no trigger
// that filters on paths, and Decide says why.
func (d *Delivery) SetFiles(f Files) {
	d.files = &f
	if f.Unread != "" {
		return
	}
	paths := f.Paths
	if paths == nil {
		paths = []string{} // read, and none: kept as read
	}
	for _, ev := range d.Events {
		if !events.PullRequestFiles(ev) {
			continue
		}
		if ev.Fields == nil {
			ev.Fields = map[string][]string{}
		}
		ev.Fields["paths"] = paths
	}
}

// Files are the files SetFiles gave the delivery; nil when it gave none.
func (d *Delivery) Files() *Files { return d.files }

// filesUnread is why the paths of one of the delivery's events cannot be
// matched: "" for an event whose payload lists its files (a push), or a
// pull request event whose files were read.
func (d *Delivery) filesUnread(ev *factory.ProviderEvent) string {
	switch {
	case !events.PullRequestFiles(ev):
		return ""
	case d.files == nil:
		return NotRead
	}
	return d.files.Unread
}

// NeedsFiles reports whether deciding a delivery takes its pull request's
// changed files, not read yet: one of its pull request events is of a
// repository factory.yaml lists, and a trigger of s listens to it and
// filters on paths. Evaluation reads the files only then, once for every
// automation (SetFiles).
func (s *Set) NeedsFiles(settings *factory.Settings, d *Delivery) bool {
	if d.files != nil || d.Provider == "" {
		return false
	}
	src := ProviderDelivery(d.Provider, d.WebhookUID)
	for _, ev := range d.Events {
		if !events.PullRequestFiles(ev) || !listsRepository(settings, ev.Repository) {
			continue
		}
		for i := range s.triggers {
			if c := &s.triggers[i]; c.selects(src) && c.spec.Event == ev.Event && c.filtersPaths() {
				return true
			}
		}
	}
	return false
}

func (c *compiled) filtersPaths() bool {
	_, ok := c.spec.Filter.Keys["paths"]
	return ok
}

// PullRequestPaths reports whether a trigger filters on paths for a pull
// (merge) request event, whose files only its code host lists: the
// host's name (github, gitlab), or "".
func PullRequestPaths(t factory.Trigger) string {
	if _, ok := t.Filter.Keys["paths"]; !ok {
		return ""
	}
	if events.PullRequestFiles(&factory.ProviderEvent{Provider: t.Provider, Event: t.Event}) {
		return t.Provider
	}
	return ""
}
