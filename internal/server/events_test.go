package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

type sseEvent struct {
	id, event, data string
}

// readSSE reads a Server-Sent Events stream until it ends or ctx does.
func readSSE(t *testing.T, ctx context.Context, url, key, lastID string, got chan<- sseEvent) {
	defer close(got)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("the stream answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		return
	}
	var ev sseEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.event != "" || ev.data != "" {
				got <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

// TestRunEventsStream: a run's events arrive live, in order, as the
// timeline's objects; the stream ends with the run; Last-Event-ID resumes
// after the event it names, with nothing twice.
func TestRunEventsStream(t *testing.T) {
	h := runsServer(t, 1, `echo working; sleep 0.5; echo done`)
	_, body := call(t, h, "POST", "/v1/agent/runs", map[string]any{"prompt": "stream me"})
	var created struct {
		RunID string `json:"run_id"`
	}
	json.Unmarshal(body, &created)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	got := make(chan sseEvent, 64)
	go readSSE(t, ctx, h.url+"/v1/agent/runs/"+created.RunID+"/events", runsKey, "", got)
	var events []sseEvent
	for ev := range got {
		events = append(events, ev)
	}
	if len(events) < 4 || events[0].event != "oz_run_created" || events[len(events)-1].event != "end" ||
		!strings.Contains(events[len(events)-1].data, "SUCCEEDED") {
		t.Fatalf("the stream: %+v", events)
	}
	for i, ev := range events[:len(events)-1] {
		var te map[string]any
		if err := json.Unmarshal([]byte(ev.data), &te); err != nil || ev.id != strconvI(i) || te["event_type"] != ev.event || te["run_id"] != created.RunID {
			t.Fatalf("event %d: %+v (%v)", i, ev, err)
		}
	}
	// The timeline endpoint has the same objects.
	_, tl := call(t, h, "GET", "/v1/agent/runs/"+created.RunID+"/timeline", nil)
	var timeline struct {
		Events []json.RawMessage `json:"events"`
	}
	json.Unmarshal(tl, &timeline)
	if len(timeline.Events) != len(events)-1 || string(timeline.Events[1]) != events[1].data {
		t.Fatalf("timeline %d events, stream %d; %s vs %s", len(timeline.Events), len(events)-1, timeline.Events[1], events[1].data)
	}
	// Resumed after event 1: events 2.. only.
	again := make(chan sseEvent, 64)
	go readSSE(t, ctx, h.url+"/v1/agent/runs/"+created.RunID+"/events", runsKey, "1", again)
	var resumed []sseEvent
	for ev := range again {
		resumed = append(resumed, ev)
	}
	if len(resumed) != len(events)-2 || resumed[0].id != "2" {
		t.Fatalf("resumed: %+v", resumed)
	}
	if a := call2(t, h, "/v1/agent/runs/"+created.RunID+"/events", "x"); a != 400 {
		t.Fatalf("a bad Last-Event-ID: %d", a)
	}
}

func strconvI(i int) string { b, _ := json.Marshal(i); return string(b) }

func call2(t *testing.T, h *harness, path, lastID string) int {
	req, _ := http.NewRequest("GET", h.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+runsKey)
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestFactoryEventsStream: a delivery posted while the stream is open
// arrives as a delivery event, then the run it starts as run events up to
// its end; without a factory_uid the call is refused.
func TestFactoryEventsStream(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"webhooks/ci.yaml": "authMode: token\n"})
	h := serveWithSecrets(t, root, nil)
	ci := h.hook("ci")
	writeTree(t, root, map[string]string{"automations/all.md": "---\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [" + ci.uid + "]\n---\nGo.\n"})
	st, err := h.c.SyncFactory(context.Background(), h.status("acme").UID)
	if err != nil || !st.Ready {
		t.Fatal(err, st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	got := make(chan sseEvent, 64)
	// Resume from now: the stream may connect after the delivery is posted.
	go readSSE(t, ctx, h.url+"/v1/events?factory_uid="+st.UID, adminKey, strconv.FormatInt(time.Now().UnixNano(), 10), got)
	id := deliveryID(t, post(t, ci.url, "", `{"n":1}`, "Authorization", "Bearer "+ci.secret))
	var sawDelivery, sawEnd bool
	for !sawEnd {
		select {
		case ev, ok := <-got:
			if !ok {
				t.Fatal("the stream ended")
			}
			switch {
			case ev.event == "delivery" && strings.Contains(ev.data, `"delivery_id":"`+id+`"`):
				sawDelivery = true
			case ev.event == "run" && strings.Contains(ev.data, `"state":"SUCCEEDED"`):
				sawEnd = true
			}
		case <-ctx.Done():
			t.Fatalf("no run end: delivery seen %v", sawDelivery)
		}
	}
	if !sawDelivery {
		t.Fatal("the delivery was not streamed")
	}
	if a := get2(t, h.url+"/v1/events", adminKey); a != 400 {
		t.Fatalf("no factory_uid: %d", a)
	}
}

func get2(t *testing.T, url, key string) int {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
