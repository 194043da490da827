package jira_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"factory"
	"factory/internal/talkback/jira"
	"factory/internal/talkback/jira/jiratest"
	"factory/internal/writeback"
)

// TestComment: a comment in ADF made on the issue, edited to the run's end
// (outcome, the last message line by line, branch, pull requests); every
// request and body as Jira's description and the ADF schema allow.
func TestComment(t *testing.T) {
	t.Parallel()
	f := jiratest.New(t)
	p := jira.Reporter{Client: jira.New("https://acme.atlassian.net", f.URL, jiratest.Email, jiratest.Token, nil)}
	ctx := context.Background()
	o := &factory.Origin{Provider: "jira", Chat: factory.Chat{Site: "https://acme.atlassian.net", Issue: "ENG-7"}}
	rep := &writeback.Report{RunID: "run_1", Title: "Outage in EU", State: factory.StateInProgress, URL: "https://f.example/ui/runs/run_1"}
	id, err := p.Post(ctx, o, rep)
	if err != nil {
		t.Fatal(err)
	}
	rep.State, rep.Outcome, rep.Final, rep.Branch = factory.StateSucceeded, "done", "Fixed it.\n\nSee the PR.", "factory/run_1"
	rep.FollowUps = []string{"and the docs"}
	rep.PullRequests = []writeback.PullRequest{{Title: "Fix checkout", URL: "https://github.com/acme/shop/pull/9", Status: "open"}}
	if err := p.Update(ctx, o, id, rep); err != nil {
		t.Fatal(err)
	}
	f.Snapshot(func() {
		if len(f.Comments) != 1 || f.Comments[0].Issue != "ENG-7" || f.Comments[0].Edits != 1 {
			t.Fatalf("comments %+v", f.Comments)
		}
		body := string(f.Comments[0].Body)
		for _, want := range []string{`"text":"SUCCEEDED"`, `"href":"https://github.com/acme/shop/pull/9"`, `"type":"blockquote"`, `"type":"hardBreak"`,
			`"text":"factory/run_1","marks":[{"type":"code"}]`} {
			if !strings.Contains(strings.ReplaceAll(body, " · ", ""), want) && !strings.Contains(body, want) {
				t.Errorf("the comment lacks %s:\n%s", want, body)
			}
		}
	})
	// An issue of another site is not commented on: its key names
	// another issue here.
	other := &factory.Origin{Chat: factory.Chat{Site: "https://evil.atlassian.net", Issue: "ENG-7"}}
	if _, err := p.Post(ctx, other, rep); !errors.Is(err, writeback.ErrNoCredential) {
		t.Errorf("another site: %v", err)
	}
	f.Fail = 1
	if err := p.Update(ctx, o, id, rep); err == nil || !strings.Contains(err.Error(), "HTTP 400") {
		t.Errorf("a refusal: %v", err)
	}
}

// TestADF: documents of every shape a report takes validate against
// Atlassian's schema, and the schema refuses what ADF does not allow (the
// check can fail).
func TestADF(t *testing.T) {
	t.Parallel()
	adf := jiratest.ADF(t)
	for _, rep := range []*writeback.Report{
		{RunID: "r", State: factory.StateQueued},
		{RunID: "r", Title: "t", State: factory.StateFailed, URL: "u", Outcome: "o", Final: "\n\nx\n", Branch: "b", FollowUps: []string{""},
			PullRequests: []writeback.PullRequest{{Title: "", URL: ""}}},
	} {
		b, _ := json.Marshal(jira.ADF(rep))
		if err := adf.Validate(b); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	if err := adf.Validate([]byte(`{"version":1,"type":"doc","content":[{"type":"paragraph","content":[{"type":"text","text":""}]}]}`)); err == nil {
		t.Error("an empty text node passes")
	}
}
