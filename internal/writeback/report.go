package writeback

import (
	"fmt"
	"strings"

	"factory"
)

// Report is what a run's report says, for each provider to render: the
// run, its page, its follow-ups, and at the end of a turn its outcome, the
// agent's last message, its branch and pull requests; Markdown is all of
// it as a code host's comment (Body).
type Report struct {
	RunID, Title string
	State        factory.RunState
	URL          string
	FollowUps    []string
	// Ended: the run's turn has ended (the run is terminal or BLOCKED);
	// FirstEnd: this report is the first to say so (a provider that
	// appends rather than edits says the end once). Failed: the run ended
	// FAILED, ERROR or CANCELLED.
	Ended, FirstEnd, Failed bool
	Outcome, Final          string
	Branch                  string
	PullRequests            []PullRequest
	Markdown                string
}

// PullRequest is a pull request a report names.
type PullRequest struct{ Title, URL, Status string }

// NewReport is the report of a run as it is now.
func NewReport(r *factory.Run, events []*factory.RunEvent, publicURL string) *Report {
	rep := &Report{RunID: r.ID, Title: oneLine(r.Title), State: r.State, URL: RunURL(publicURL, r.ID),
		Ended: r.State.Terminal() || r.State == factory.StateBlocked, Markdown: Body(r, events, publicURL)}
	rep.Failed = rep.Ended && r.State != factory.StateSucceeded && r.State != factory.StateBlocked
	for _, e := range events {
		if e.Kind == "followup" {
			rep.FollowUps = append(rep.FollowUps, oneLine(e.Message))
		}
	}
	if rep.Ended {
		if r.StatusMessage != nil {
			rep.Outcome = oneLine(r.StatusMessage.Message)
		}
		rep.Final = shorten(lastAgentMessage(events), MaxFinalMessage)
	}
	if len(r.Repositories) > 0 && r.StartedAt != nil {
		rep.Branch = r.Branch()
	}
	for _, a := range r.Artifacts {
		if a.Type == factory.ArtifactPullRequest {
			rep.PullRequests = append(rep.PullRequests, PullRequest{Title: oneLine(firstNonEmpty(a.Data.Title, a.Data.URL)),
				URL: a.Data.URL, Status: a.Data.Status})
		}
	}
	return rep
}

// RunURL is a run's page on the dashboard.
func RunURL(publicURL, runID string) string {
	return strings.TrimRight(publicURL, "/") + "/ui/runs/" + runID
}

// Mark is a state's sign, as reports show it.
func Mark(s factory.RunState) string { return stateMark(s) }

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
	fmt.Fprintf(&b, "[Run %s](%s)\n", r.ID, RunURL(publicURL, r.ID))
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

// OneLine keeps a text on one line (an agent's words cannot forge the
// report's structure).
func OneLine(s string) string { return oneLine(s) }

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
