package slack_test

import (
	"context"
	"strings"
	"testing"

	"factory"
	"factory/internal/talkback/slack"
	"factory/internal/talkback/slack/slacktest"
	"factory/internal/writeback"
)

// TestThread: 👀 on the message that asked (once, however often asked),
// a reply in its thread, edited; the channels by name; every request as
// Slack's description allows.
func TestThread(t *testing.T) {
	t.Parallel()
	f := slacktest.New(t)
	c := slack.New(slacktest.Token, f.URL, nil)
	ctx := context.Background()
	o := &factory.Origin{Provider: "slack", Chat: factory.Chat{Team: "T1", Channel: "C0DEPLOYS1", Thread: "1.000100", Message: "1.000200"}}
	for range 2 {
		if err := c.React(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	rep := &writeback.Report{RunID: "run_1", Title: "Fix <!channel> & co", State: factory.StateInProgress, URL: "https://f.example/ui/runs/run_1"}
	ts, err := c.Post(ctx, o, rep)
	if err != nil {
		t.Fatal(err)
	}
	rep.State, rep.Outcome, rep.Final = factory.StateSucceeded, "done", "All <@U1> fixed"
	rep.PullRequests = []writeback.PullRequest{{Title: "Fix", URL: "https://example.com/pull/1", Status: "open"}}
	if err := c.Update(ctx, o, ts, rep); err != nil {
		t.Fatal(err)
	}
	chans, err := c.Channels(ctx)
	if err != nil || chans["deploys"] != "C0DEPLOYS1" {
		t.Fatalf("channels %v, %v", chans, err)
	}
	f.Snapshot(func() {
		if len(f.Reactions) != 1 || f.Reactions[0].Name != "eyes" || f.Reactions[0].TS != "1.000200" {
			t.Errorf("reactions %+v", f.Reactions)
		}
		if len(f.Messages) != 1 || f.Messages[0].ThreadTS != "1.000100" || f.Messages[0].Edits != 1 {
			t.Fatalf("messages %+v", f.Messages)
		}
		text := f.Messages[0].Text
		for _, want := range []string{"✅ *Fix &lt;!channel&gt; &amp; co* · SUCCEEDED", "<https://f.example/ui/runs/run_1|Run run_1>",
			"*Outcome:* done", "> All &lt;@U1&gt; fixed", "*Pull request:* <https://example.com/pull/1|Fix> (open)"} {
			if !strings.Contains(text, want) {
				t.Errorf("the reply lacks %q:\n%s", want, text)
			}
		}
	})
}

// TestErrors: a refused token and a failing method are errors.
func TestErrors(t *testing.T) {
	t.Parallel()
	f := slacktest.New(t)
	o := &factory.Origin{Chat: factory.Chat{Channel: "C1", Thread: "1.1"}}
	if _, err := slack.New("xoxb-wrong", f.URL, nil).Post(context.Background(), o, &writeback.Report{}); err == nil || !strings.Contains(err.Error(), "invalid_auth") {
		t.Fatalf("a wrong token: %v", err)
	}
	f.Fail["chat.postMessage"] = 1
	if _, err := slack.New(slacktest.Token, f.URL, nil).Post(context.Background(), o, &writeback.Report{}); err == nil {
		t.Fatal("a failing method is no error")
	}
}
