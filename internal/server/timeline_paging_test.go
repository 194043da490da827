package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
)

// TestTimelineReadersArePaged is the attack of a run with a long timeline
// on its readers: two thousand status messages. The timeline and the
// conversation answer a page at a time (at most 500 entries unless asked
// for fewer), each with the cursor of the next, and every entry is seen
// once by following them; the dashboard's run page shows the last page.
func TestTimelineReadersArePaged(t *testing.T) {
	h := runsServer(t, 1, `i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done`)
	id := createRun(t, h, map[string]any{"prompt": "flood"})
	waitState(t, h, id, "SUCCEEDED")

	read := func(path string) []timelinePage { return readPages(t, h, path) }
	seen := map[string]bool{}
	lines := 0
	for _, p := range read("/v1/agent/runs/" + id + "/timeline") {
		if len(p.Events) > 500 {
			t.Errorf("a timeline page of %d events", len(p.Events))
		}
		for _, e := range p.Events {
			u := fmt.Sprint(e["event_uuid"])
			if seen[u] {
				t.Errorf("event %s seen twice", u)
			}
			seen[u] = true
			if strings.HasPrefix(fmt.Sprint(e["message"]), "line ") {
				lines++
			}
		}
	}
	if lines != 2000 {
		t.Errorf("the timeline's pages hold %d of the 2000 lines", lines)
	}
	said := 0
	for _, p := range read("/v1/agent/runs/" + id + "/conversation") {
		n := 0
		for _, turn := range p.Turns {
			msgs, _ := turn["messages"].([]any)
			n += len(msgs)
			for _, m := range msgs {
				if strings.HasPrefix(fmt.Sprint(m.(map[string]any)["text"]), "line ") {
					said++
				}
			}
		}
		if n > 500 {
			t.Errorf("a conversation page of %d messages", n)
		}
	}
	if said != 2000 {
		t.Errorf("the conversation's pages hold %d of the 2000 lines", said)
	}
	c := signIn(t, h, adminKey)
	resp, err := c.Get(h.url + "/ui/runs/" + id + "/live")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rows := strings.Count(string(body), "<td>status_message</td>"); rows == 0 || rows > 500 {
		t.Errorf("the run's page shows %d status messages, want the last page (at most 500)", rows)
	}
	if !strings.Contains(string(body), "line 1999") || strings.Contains(string(body), "line 3<") {
		t.Errorf("the run's page does not show the last page")
	}
}

// timelinePage is a page of a run's timeline or conversation.
type timelinePage struct {
	Events   []map[string]any `json:"events"`
	Turns    []map[string]any `json:"turns"`
	PageInfo struct {
		HasNextPage bool   `json:"has_next_page"`
		NextCursor  string `json:"next_cursor"`
	} `json:"page_info"`
}

// readPages follows a run's paged reader from its first page to its last.
func readPages(t *testing.T, h *harness, path string) (pages []timelinePage) {
	next := ""
	for i := 0; i < 50; i++ {
		q := path
		if next != "" {
			q += "?cursor=" + url.QueryEscape(next)
		}
		status, b := call(t, h, "GET", q, nil)
		var p timelinePage
		if status != 200 || json.Unmarshal(b, &p) != nil {
			t.Fatalf("%s: %d %.300s", q, status, b)
		}
		pages = append(pages, p)
		if !p.PageInfo.HasNextPage {
			return pages
		}
		next = p.PageInfo.NextCursor
	}
	t.Fatalf("%s: no last page", path)
	return nil
}
