package linear_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"factory"
	"factory/internal/talkback/linear"
	"factory/internal/talkback/linear/lineartest"
	"factory/internal/writeback"
)

// TestOperations: every operation the client sends validates against
// Linear's schema, with variables of the types its inputs are.
func TestOperations(t *testing.T) {
	t.Parallel()
	s := lineartest.Schema(t)
	vars := func(v any) map[string]any {
		var m map[string]any
		b, _ := json.Marshal(v)
		_ = json.Unmarshal(b, &m)
		return m
	}
	in := map[string]map[string]any{
		"FactoryActivity":      {"input": vars(linear.ActivityInput{AgentSessionID: "s", Content: linear.ActivityContent{Type: "thought", Body: "b"}})},
		"FactoryComment":       {"input": vars(linear.CommentCreateInput{IssueID: "i", Body: "b"})},
		"FactoryCommentUpdate": {"id": "c", "input": vars(linear.CommentUpdateInput{Body: "b"})},
		"FactoryLink":          {"issueId": "i", "url": "https://example.com/pull/1", "title": "t"},
	}
	for _, op := range linear.Operations {
		name := strings.Fields(op)[1]
		name = name[:strings.IndexByte(name, '(')]
		if probs := lineartest.Check(s, op, in[name]); len(probs) > 0 {
			t.Errorf("%s: %v", name, probs)
		}
	}
	// The check can fail: a field Linear does not have, a variable of
	// the wrong type.
	if probs := lineartest.Check(s, `mutation { commentCreate(input: {issueId: "i", bodyy: "b"}) { success } }`, nil); len(probs) == 0 {
		t.Error("an unknown input field passes")
	}
	if probs := lineartest.Check(s, linear.Operations[2], map[string]any{"id": 5, "input": map[string]any{"body": "b"}}); len(probs) == 0 {
		t.Error("a number for a String! passes")
	}
}

// TestSession: a run from an agent session says it started (a thought with
// its link), then at its end, once however many reports come, the pull
// requests linked to the issue and the response; a failed run's end is an
// error activity.
func TestSession(t *testing.T) {
	t.Parallel()
	f := lineartest.New(t)
	p := linear.Reporter{Client: linear.New(lineartest.Token, f.URL, nil)}
	ctx := context.Background()
	o := &factory.Origin{Provider: "linear", Chat: factory.Chat{Thread: "sess-1", Issue: "issue-1"}}
	rep := &writeback.Report{RunID: "run_1", Title: "Fix *it*", State: factory.StateInProgress, URL: "https://f.example/ui/runs/run_1"}
	id, err := p.Post(ctx, o, rep)
	if err != nil || id == "" {
		t.Fatal(id, err)
	}
	if err := p.Update(ctx, o, id, rep); err != nil { // a change mid-run says nothing
		t.Fatal(err)
	}
	rep.State, rep.Ended, rep.FirstEnd, rep.Outcome = factory.StateSucceeded, true, true, "done"
	rep.PullRequests = []writeback.PullRequest{{Title: "Fix", URL: "https://github.com/acme/widgets/pull/1", Status: "open"}}
	if err := p.Update(ctx, o, id, rep); err != nil {
		t.Fatal(err)
	}
	rep.FirstEnd = false
	if err := p.Update(ctx, o, id, rep); err != nil {
		t.Fatal(err)
	}
	rep.State, rep.FirstEnd, rep.Failed = factory.StateFailed, true, true
	if err := p.Update(ctx, o, id, rep); err != nil {
		t.Fatal(err)
	}
	f.Snapshot(func() {
		var types []string
		for _, a := range f.Activities {
			types = append(types, a.Type)
		}
		if strings.Join(types, ",") != "thought,response,error" || !strings.Contains(f.Activities[0].Body, "(https://f.example/ui/runs/run_1)") {
			t.Errorf("activities %+v", f.Activities)
		}
		if !strings.Contains(f.Activities[1].Body, "**Fix \\*it\\*** · ✅ SUCCEEDED") || !strings.Contains(f.Activities[1].Body, "[Fix](https://github.com/acme/widgets/pull/1)") {
			t.Errorf("response %q", f.Activities[1].Body)
		}
		if len(f.Attachments) != 1 || f.Attachments[0] != (lineartest.Attachment{Issue: "issue-1", URL: "https://github.com/acme/widgets/pull/1", Title: "Fix"}) {
			t.Errorf("attachments %+v", f.Attachments)
		}
	})
}

// TestIssueComment: a run from an issue event comments on the issue, then
// edits the comment; errors of Linear's are errors.
func TestIssueComment(t *testing.T) {
	t.Parallel()
	f := lineartest.New(t)
	p := linear.Reporter{Client: linear.New(lineartest.Token, f.URL, nil)}
	ctx := context.Background()
	o := &factory.Origin{Provider: "linear", Chat: factory.Chat{Issue: "issue-2"}}
	rep := &writeback.Report{RunID: "run_2", Title: "t", State: factory.StateQueued, URL: "https://f/ui/runs/run_2"}
	id, err := p.Post(ctx, o, rep)
	if err != nil {
		t.Fatal(err)
	}
	rep.State = factory.StateSucceeded
	if err := p.Update(ctx, o, id, rep); err != nil {
		t.Fatal(err)
	}
	f.Snapshot(func() {
		if len(f.Comments) != 1 || f.Comments[0].Issue != "issue-2" || f.Comments[0].Edits != 1 || !strings.Contains(f.Comments[0].Body, "SUCCEEDED") {
			t.Errorf("comments %+v", f.Comments)
		}
	})
	f.Fail["commentUpdate"] = 1
	if err := p.Update(ctx, o, id, rep); err == nil {
		t.Error("a GraphQL error is no error")
	}
	if _, err := (linear.Reporter{Client: linear.New("wrong", f.URL, nil)}).Post(ctx, o, rep); err == nil || !strings.Contains(err.Error(), "Authentication") {
		t.Errorf("a wrong token: %v", err)
	}
}
