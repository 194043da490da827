package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestSchedulesAreBounded: a runs key made any number of schedules of the
// Agents API, each firing every second (@every 1ns passed too). The
// attack: schedules more often than once a minute (cron's own bound) are
// refused, at creation and at an update, and past the server's limit of
// schedules with no factory (100 by default) the next is refused, each a
// 400 that says why.
func TestSchedulesAreBounded(t *testing.T) {
	h := runsServer(t, 1, `true`)
	for _, cron := range []string{"@every 1s", "@every 1ns", "@every 59s", "@every 0.5m"} {
		status, body := call(t, h, "POST", "/v1/agent/schedules", map[string]any{"name": "fast", "cron_schedule": cron, "prompt": "Tick"})
		if status != 400 || !strings.Contains(string(body), "cron_schedule: "+cron+" fires more often than once a minute") {
			t.Errorf("%s: %d %s", cron, status, body)
		}
	}
	status, body := call(t, h, "POST", "/v1/agent/schedules", map[string]any{"name": "s000", "cron_schedule": "@every 1m", "prompt": "Tick"})
	id := between(string(body), `"id":"`, `"`)
	if status != 200 || id == "" {
		t.Fatalf("@every 1m: %d %s", status, body)
	}
	if status, body := call(t, h, "PUT", "/v1/agent/schedules/"+id, map[string]any{"name": "s000", "cron_schedule": "@every 1s", "prompt": "Tick", "enabled": true}); status != 400 ||
		!strings.Contains(string(body), "more often than once a minute") {
		t.Errorf("an update to @every 1s: %d %s", status, body)
	}
	for i := 1; i < 100; i++ {
		if status, body := call(t, h, "POST", "/v1/agent/schedules", map[string]any{"name": fmt.Sprintf("s%03d", i), "cron_schedule": "*/5 * * * *", "prompt": "Tick"}); status != 200 {
			t.Fatalf("schedule %d: %d %s", i+1, status, body)
		}
	}
	status, body = call(t, h, "POST", "/v1/agent/schedules", map[string]any{"name": "one-too-many", "cron_schedule": "@hourly", "prompt": "Tick"})
	if status != 400 || !strings.Contains(string(body), "this server holds at most 100 schedules of the Agents API") {
		t.Fatalf("schedule 101: %d %s", status, body)
	}
	// Deleting one makes room; an update is not a new schedule.
	if status, body := call(t, h, "PUT", "/v1/agent/schedules/"+id, map[string]any{"name": "s000", "cron_schedule": "@every 2m", "prompt": "Tick", "enabled": true}); status != 200 {
		t.Fatalf("an update at the limit: %d %s", status, body)
	}
	if status, body := call(t, h, "DELETE", "/v1/agent/schedules/"+id, nil); status != 200 {
		t.Fatalf("delete: %d %s", status, body)
	}
	if status, body := call(t, h, "POST", "/v1/agent/schedules", map[string]any{"name": "room", "cron_schedule": "@hourly", "prompt": "Tick"}); status != 200 {
		t.Fatalf("after a delete: %d %s", status, body)
	}
}
