package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/talkback/teams/teamstest"
)

// TestSlackTalkback: a mention of the app in a channel starts a run; the
// message gets 👀 and one reply in its thread, made at the start and edited
// to the end (the outcome, the agent's last words, the run's link); a
// plain reply in the thread (no automation takes message_posted)
// continues the same run, gets 👀 of its own, and the same reply is edited
// again; the factory's own message in the thread starts nothing.
func TestSlackTalkback(t *testing.T) {
	h, fk := talkbackServer(t)
	hook, did := postChat(t, h, "chat", "slack", chatPayload(t, "slack app_mention"))
	run := awaitReported(t, h, hook, did, 1)
	if run.Source != factory.SourceSlack || run.Origin == nil || run.Origin.WorkItem != "slack:T123ABC456/C123ABC456/1515449522.000016" {
		t.Fatalf("run %+v, origin %+v", run, run.Origin)
	}
	reply := chatPayload(t, "slack reply in a thread")
	_, did2 := postChat(t, h, "chat", "slack", reply)
	again := awaitReported(t, h, hook, did2, 2)
	if again.ID != run.ID {
		t.Fatalf("the thread reply started run %s; the thread's run is %s", again.ID, run.ID)
	}
	checkReportsTo(t, h, run.ID, "slack", run.Origin.WorkItem)
	_, did3 := postChat(t, h, "chat", "slack", chatPayload(t, "slack message of a bot"))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := h.store.Delivery(hook, did3)
		if err == nil && d.Outcome != "" {
			if len(d.RunIDs) != 0 || !strings.Contains(d.Outcome, "bot") {
				t.Fatalf("the bot's message: %+v", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bot's message was not evaluated: %+v %v", d, err)
		}
	}
	fk.slack.Snapshot(func() {
		if len(fk.slack.Messages) != 1 {
			t.Fatalf("%d messages, want one reply, edited: %+v", len(fk.slack.Messages), fk.slack.Messages)
		}
		m := fk.slack.Messages[0]
		if m.Channel != "C123ABC456" || m.ThreadTS != "1515449522.000016" || m.Edits < 2 {
			t.Errorf("the reply %+v", m)
		}
		for _, want := range []string{"✅", "SUCCEEDED", "Looked into it and fixed it.", "|Run " + run.ID + ">", "↪ Follow-up: also update the changelog"} {
			if !strings.Contains(m.Text, want) {
				t.Errorf("the reply lacks %q:\n%s", want, m.Text)
			}
		}
		var reacted []string
		for _, r := range fk.slack.Reactions {
			reacted = append(reacted, r.Name+"@"+r.TS)
		}
		if strings.Join(reacted, ",") != "eyes@1515449522.000016,eyes@1515449600.000200" {
			t.Errorf("reactions %v", reacted)
		}
	})
}

// TestLinearTalkback: an agent session's run answers in the session (a
// thought with the run's link when it starts, the response at its end);
// a prompted event continues the same run, which answers again.
func TestLinearTalkback(t *testing.T) {
	h, fk := talkbackServer(t)
	hook, did := postChat(t, h, "chat", "linear", chatPayload(t, "linear agent session created"))
	run := awaitReported(t, h, hook, did, 1)
	_, did2 := postChat(t, h, "chat", "linear", chatPayload(t, "linear agent session prompted"))
	if again := awaitReported(t, h, hook, did2, 2); again.ID != run.ID {
		t.Fatalf("the prompt started run %s; the session's run is %s", again.ID, run.ID)
	}
	evs, _ := h.store.RunEvents(run.ID)
	fk.linear.Snapshot(func() {
		var types []string
		for _, a := range fk.linear.Activities {
			if a.Session != "2c6f1f3e-0000-4000-8000-000000000001" {
				t.Errorf("an activity in session %s", a.Session)
			}
			types = append(types, a.Type)
		}
		if strings.Join(types, ",") != "thought,response,response" {
			t.Fatalf("activities %+v", fk.linear.Activities)
		}
		if !strings.Contains(fk.linear.Activities[0].Body, "/ui/runs/"+run.ID) || !strings.Contains(fk.linear.Activities[2].Body, "Also add a regression test.") {
			t.Errorf("activities %+v", fk.linear.Activities)
		}
	})
	followed := false
	for _, e := range evs {
		followed = followed || e.Kind == "followup" && strings.HasPrefix(e.Message, "Also add a regression test.")
	}
	if !followed {
		t.Errorf("the prompt is not the run's follow-up: %+v", evs)
	}
}

// TestJiraTalkback: a Jira issue's run comments on the issue (in ADF,
// checked against Atlassian's schema by the fake), then edits the comment.
func TestJiraTalkback(t *testing.T) {
	h, fk := talkbackServer(t)
	hook, did := postChat(t, h, "chat", "jira", chatPayload(t, "jira issue created"))
	run := awaitReported(t, h, hook, did, 1)
	fk.jira.Snapshot(func() {
		if len(fk.jira.Comments) != 1 || fk.jira.Comments[0].Issue != "ENG-7" || fk.jira.Comments[0].Edits < 1 {
			t.Fatalf("comments %+v", fk.jira.Comments)
		}
		body := string(fk.jira.Comments[0].Body)
		if !strings.Contains(body, "SUCCEEDED") || !strings.Contains(body, "/ui/runs/"+run.ID) {
			t.Errorf("the comment %s", body)
		}
	})
}

// teamsPost posts an activity to a factory's Teams bot with an
// Authorization header.
func teamsPost(t *testing.T, h *harness, uid string, activity map[string]any, auth string) answer {
	t.Helper()
	b, _ := json.Marshal(activity)
	req, _ := http.NewRequest(http.MethodPost, h.url+"/hooks/teams/"+uid, bytes.NewReader(b))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return answer{resp.StatusCode, resp.Header, buf.String()}
}

// TestTeamsTalkback: a Teams activity whose Bot Framework token is missing,
// expired, for another bot or another service URL is 401; a good one is a
// delivery that fires the factory's app_mention automation; the run
// replies in the thread through the Bot Connector and edits the reply; a
// reply in the same thread continues the same run.
func TestTeamsTalkback(t *testing.T) {
	h, fk := talkbackServer(t)
	uid := h.status("chat").UID
	post := chatPayload(t, "teams channel message")
	post["serviceUrl"] = fk.teams.URL + "/"
	svc := fk.teams.URL + "/"
	for name, auth := range map[string]string{
		"no token":    "",
		"expired":     "Bearer " + fk.teams.Sign(svc, func(c teamstest.Claims) { c["exp"] = time.Now().Add(-time.Hour).Unix() }),
		"another bot": "Bearer " + fk.teams.Sign(svc, func(c teamstest.Claims) { c["aud"] = "another-app" }),
		"another URL": "Bearer " + fk.teams.Sign("https://evil.example/", nil),
		"forged":      "Bearer " + fk.teams.Sign(svc, nil) + "x",
	} {
		if a := teamsPost(t, h, uid, post, auth); a.status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s", name, a.status, a.body)
		}
	}
	if a := teamsPost(t, h, "fc_nosuchfactory000000000", post, "Bearer "+fk.teams.Sign(svc, nil)); a.status != http.StatusNotFound {
		t.Errorf("an unknown factory: %d", a.status)
	}
	hook := factory.TeamsWebhook(&factory.Factory{Name: "chat", UID: uid}).UID
	did := deliveryID(t, teamsPost(t, h, uid, post, "Bearer "+fk.teams.Sign(svc, nil)))
	run := awaitReported(t, h, hook, did, 1)
	if run.Source != factory.SourceTeams {
		t.Errorf("source %s", run.Source)
	}
	reply := chatPayload(t, "teams reply in the post's thread")
	reply["serviceUrl"] = svc
	did2 := deliveryID(t, teamsPost(t, h, uid, reply, "Bearer "+fk.teams.Sign(svc, nil)))
	if again := awaitReported(t, h, hook, did2, 2); again.ID != run.ID {
		t.Fatalf("the thread reply started run %s; the thread's run is %s", again.ID, run.ID)
	}
	fk.teams.Snapshot(func() {
		if len(fk.teams.Replies) != 1 {
			t.Fatalf("replies %+v", fk.teams.Replies)
		}
		r := fk.teams.Replies[0]
		if r.Conversation != "19:orders@thread.tacv2;messageid=1751364000437" || r.ReplyTo != "1751364000437" || r.Edits < 2 ||
			!strings.Contains(r.Text, "SUCCEEDED") {
			t.Errorf("the reply %+v", r)
		}
	})
}

// TestTalkbackWithoutCredential: a run from Slack of a factory that names
// no Slack token runs to its end; its timeline says the write-back failed
// and why (write_back_failed), once, and nothing reaches Slack.
func TestTalkbackWithoutCredential(t *testing.T) {
	h, fk := talkbackServer(t)
	hook, did := postChat(t, h, "quiet", "slack", chatPayload(t, "slack app_mention"))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := h.store.Delivery(hook, did)
		if err == nil && len(d.RunIDs) == 1 {
			run, _ := h.store.Run(d.RunIDs[0])
			evs, _ := h.store.RunEvents(d.RunIDs[0])
			var failed []string
			for _, te := range factory.Timeline(run.ID, evs) {
				if te.EventType == "write_back_failed" {
					failed = append(failed, te.Message)
				}
			}
			if run.State == factory.StateSucceeded && len(failed) > 0 {
				if len(failed) != 1 || !strings.Contains(failed[0], "botTokenSecret") {
					t.Errorf("write_back_failed %q", failed)
				}
				checkReportsTo(t, h, run.ID, "slack", run.Origin.WorkItem, "given up")
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write_back_failed on the run of delivery %s", did)
		}
	}
	fk.slack.Snapshot(func() {
		if len(fk.slack.Messages)+len(fk.slack.Reactions) != 0 {
			t.Errorf("Slack was reached: %+v %+v", fk.slack.Messages, fk.slack.Reactions)
		}
	})
}

// checkReportsTo: the dashboard's run page says where the run reports.
func checkReportsTo(t *testing.T, h *harness, runID string, want ...string) {
	t.Helper()
	resp, err := signIn(t, h, adminKey).Get(h.url + "/ui/runs/" + runID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	row := between(string(b), "<th>Reports to</th>", "</tr>")
	for _, w := range want {
		if !strings.Contains(row, w) {
			t.Errorf("the run page's Reports to row %q lacks %q", row, w)
		}
	}
}
