// Package slacktest is a fake Slack Web API for tests, on loopback: a
// workspace's channels, messages and their threads, reactions. Every request
// it receives is checked against Slack's published Web API description
// (slackapi/slack-api-specs, in the shared API descriptions); a test fails
// on anything the description does not allow.
package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"factory/internal/apicheck"
)

// Token is the bot token the fake takes.
const Token = "xoxb-factory-test-token"

// Fake is a Slack workspace on loopback.
type Fake struct {
	URL      string // the Web API's base URL (…/api/)
	Problems *apicheck.Problems

	mu        sync.Mutex
	next      int
	Channels  map[string]string // name → ID
	Messages  []*Message
	Reactions []Reaction
	// Fail answers the next calls of a method with an error (a method →
	// how many).
	Fail map[string]int
}

// Message is a message the bot posted.
type Message struct {
	Channel, TS, ThreadTS, Text string
	Edits                       int
}

// Reaction is a reaction the bot added.
type Reaction struct{ Channel, TS, Name string }

// New starts a fake Slack; the test fails on every problem its requests had.
func New(t testing.TB) *Fake {
	t.Helper()
	raw, err := os.Open(apicheck.SharedFile(t, "slack_web_api.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	desc, err := apicheck.LoadSlack(raw)
	if err != nil {
		t.Fatal(err)
	}
	f := &Fake{Problems: &apicheck.Problems{}, Channels: map[string]string{"general": "C0GENERAL1", "deploys": "C0DEPLOYS1"},
		Fail: map[string]int{}}
	f.URL = apicheck.Serve(t, "Slack", desc.Handler(http.HandlerFunc(f.serve), f.Problems), f.Problems) + "/api/"
	return f
}

// Snapshot runs fn with the fake's state held still.
func (f *Fake) Snapshot(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	v := r.Form
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	f.mu.Lock()
	defer f.mu.Unlock()
	tok := v.Get("token")
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		tok = b
	}
	switch {
	case tok != Token:
		answer(w, map[string]any{"ok": false, "error": "invalid_auth"})
	case f.Fail[method] > 0:
		f.Fail[method]--
		answer(w, map[string]any{"ok": false, "error": "internal_error"})
	default:
		answer(w, f.call(method, v))
	}
}

func (f *Fake) call(method string, v url.Values) map[string]any {
	switch method {
	case "chat.postMessage":
		return f.post(v)
	case "chat.update":
		for _, m := range f.Messages {
			if m.Channel == v.Get("channel") && m.TS == v.Get("ts") {
				m.Text, m.Edits = v.Get("text"), m.Edits+1
				return map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS, "text": m.Text}
			}
		}
		return map[string]any{"ok": false, "error": "message_not_found"}
	case "reactions.add":
		for _, re := range f.Reactions {
			if re.Channel == v.Get("channel") && re.TS == v.Get("timestamp") && re.Name == v.Get("name") {
				return map[string]any{"ok": false, "error": "already_reacted"}
			}
		}
		f.Reactions = append(f.Reactions, Reaction{Channel: v.Get("channel"), TS: v.Get("timestamp"), Name: v.Get("name")})
		return map[string]any{"ok": true}
	case "conversations.list":
		var chans []map[string]any
		for name, id := range f.Channels {
			chans = append(chans, map[string]any{"id": id, "name": name, "is_channel": true})
		}
		return map[string]any{"ok": true, "channels": chans, "response_metadata": map[string]any{"next_cursor": ""}}
	}
	return map[string]any{"ok": false, "error": "not_implemented_by_the_fake"}
}

func (f *Fake) post(v url.Values) map[string]any {
	if v.Get("channel") == "" {
		return map[string]any{"ok": false, "error": "channel_not_found"}
	}
	f.next++
	m := &Message{Channel: v.Get("channel"), TS: fmt.Sprintf("1700000000.%06d", f.next), ThreadTS: v.Get("thread_ts"), Text: v.Get("text")}
	f.Messages = append(f.Messages, m)
	return map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS,
		"message": map[string]any{"type": "message", "text": m.Text, "ts": m.TS, "thread_ts": m.ThreadTS, "bot_id": "B0FACTORY"}}
}

func answer(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
