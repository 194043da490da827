package trigger_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/filter"
	"factory/internal/trigger"
)

const (
	hookA = "wh_000000000000000000000a"
	hookB = "wh_000000000000000000000b"
	hookC = "wh_000000000000000000000c"
)

func webhookTrigger(filter string, uids ...string) factory.Trigger {
	t := factory.Trigger{Provider: factory.ProviderWebhook, Event: "received", Filter: factory.TriggerFilter{WebhookIDs: uids}}
	if filter != "" {
		t.Filter.Payload = json.RawMessage(filter)
	}
	return t
}

func payload(t *testing.T, s string) any {
	t.Helper()
	v, err := filter.DecodePayload([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSet(t *testing.T) {
	triggers := []factory.Trigger{
		webhookTrigger(`{"action":{"in":["opened"]}}`, hookA),
		webhookTrigger(`{"status":{"in":["failed"]}}`, hookA, hookB),
	}
	set, err := trigger.Compile(triggers)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		src       trigger.Source
		payload   string
		selects   bool
		match     bool
		selecting []int
		shown     int
		keysPass  bool
	}{
		{"first trigger matches", trigger.Webhook(hookA), `{"action":"opened"}`, true, true, []int{1, 2}, 1, true},
		{"second trigger matches on the shared webhook", trigger.Webhook(hookA), `{"status":"failed"}`, true, true, []int{1, 2}, 2, true},
		{"only the second trigger selects B", trigger.Webhook(hookB), `{"action":"opened"}`, true, false, []int{2}, 2, false},
		{"second trigger matches on B", trigger.Webhook(hookB), `{"status":"failed"}`, true, true, []int{2}, 2, true},
		{"no trigger selects C", trigger.Webhook(hookC), `{"action":"opened"}`, false, false, nil, 1, true},
		{"an unknown provider selects nothing", trigger.Source{Provider: "schedule"}, `{}`, false, false, nil, 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := trigger.Event{Source: c.src, Payload: payload(t, c.payload)}
			if got := set.Selects(c.src); got != c.selects {
				t.Errorf("Selects = %v, want %v", got, c.selects)
			}
			if got := set.Match(ev); got != c.match {
				t.Errorf("Match = %v, want %v", got, c.match)
			}
			x := set.Explain(ev)
			if !slices.Equal(x.Selecting, c.selecting) || x.Trigger != c.shown || x.Fires() != c.match {
				t.Errorf("Explain = selecting %v, shown %d, fires %v; want %v, %d, %v", x.Selecting, x.Trigger, x.Fires(), c.selecting, c.shown, c.match)
			}
			passed := len(x.Keys) > 0
			for _, k := range x.Keys {
				passed = passed && k.Passed
			}
			if passed != c.keysPass || x.PayloadMatched != passed {
				t.Errorf("keys passed = %v, matched %v, want %v: %+v", passed, x.PayloadMatched, c.keysPass, x.Keys)
			}
		})
	}
	if got := set.WebhookUIDs(); !slices.Equal(got, []string{hookA, hookB}) {
		t.Errorf("WebhookUIDs = %v", got)
	}
	if x := set.Explain(trigger.Event{Source: trigger.Webhook(hookC)}); !slices.Equal(x.Selected, []string{hookA, hookA, hookB}) {
		t.Errorf("Selected = %v", x.Selected)
	}
}

func TestNoFilterMatchesEverything(t *testing.T) {
	set, err := trigger.Compile([]factory.Trigger{webhookTrigger("", hookA)})
	if err != nil {
		t.Fatal(err)
	}
	if !set.Match(trigger.Event{Source: trigger.Webhook(hookA), Payload: payload(t, `{"anything":1}`)}) {
		t.Error("a trigger without a payload filter fires for every delivery of its webhook")
	}
	empty, _ := trigger.Compile(nil)
	if empty.Selects(trigger.Webhook(hookA)) || empty.Explain(trigger.Event{Source: trigger.Webhook(hookA)}).Trigger != 0 {
		t.Error("an automation without triggers selects nothing")
	}
}

func TestCompileNamesTheTrigger(t *testing.T) {
	_, err := trigger.Compile([]factory.Trigger{webhookTrigger("", hookA), webhookTrigger(`["not an object"]`, hookA)})
	if err == nil || err.Error()[:9] != "trigger 2" {
		t.Fatalf("err = %v, want it to name trigger 2", err)
	}
}

func TestWebhookRefs(t *testing.T) {
	refs := trigger.WebhookRefs([]factory.Trigger{webhookTrigger("", hookA), {Provider: "schedule"}, webhookTrigger("", hookB, hookC)})
	want := []trigger.Ref{{hookA, "/triggers/0/filter/webhook_ids/0"}, {hookB, "/triggers/2/filter/webhook_ids/0"}, {hookC, "/triggers/2/filter/webhook_ids/1"}}
	if !slices.Equal(refs, want) {
		t.Fatalf("refs = %v, want %v", refs, want)
	}
}

// FuzzParseCron: any expression parses or is refused with a message, and
// a parsed schedule always has a next instant.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"0 9 * * 1", "@every 90s", "@daily", "*/15 * * * *", "TZ=UTC 0 * * * *", "61 * * * *", "@every -1s", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := trigger.ParseCron(expr)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a message")
			}
			return
		}
		_ = s.Next(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
		// What passes the minimum interval fires no more often.
		if trigger.CheckInterval(expr, time.Minute) == nil {
			c, err := trigger.CompileSchedule(expr)
			if err != nil {
				t.Fatalf("%q parses but does not compile: %v", expr, err)
			}
			from := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
			if n := c.Next(from); !n.IsZero() {
				if m := c.Next(n); !m.IsZero() && m.Sub(n) < time.Minute {
					t.Fatalf("%q passes the minimum interval and fires %s apart", expr, m.Sub(n))
				}
			}
		}
	})
}

// TestCheckInterval: a schedule fires at most once every minimum interval
// (a minute by default, cron's own bound): only @every can ask for more
// often, and is refused; a record made before is slowed to the minimum.
func TestCheckInterval(t *testing.T) {
	for _, tt := range []struct {
		cron string
		min  time.Duration
		want string // "" passes
	}{
		{"@every 1s", time.Minute, "@every 1s fires more often than once a minute, the most a schedule may: write @every 1m or more"},
		{"@every 1ns", time.Minute, "@every 1ns fires more often than once a minute"},
		{"@every 59s", time.Minute, "fires more often than once a minute"},
		{"@every 0.5m", time.Minute, "fires more often than once a minute"},
		{"@every 60s", time.Minute, ""},
		{"@every 1m", time.Minute, ""},
		{"@every 90s", time.Minute, ""},
		{"* * * * *", time.Minute, ""},
		{"@hourly", time.Minute, ""},
		{"@every 90s", 2 * time.Minute, "@every 90s fires more often than once every 2m, the most a schedule may: write @every 2m or more"},
		{"@every 1s", time.Second, ""},
		{"@every 30m", time.Hour, "write @every 1h or more"},
		{"not a cron", time.Minute, ""}, // CheckCron says why
	} {
		err := trigger.CheckInterval(tt.cron, tt.min)
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s at least %s: %v, want %q", tt.cron, tt.min, err, tt.want)
		}
	}
	from := time.Date(2026, 11, 24, 9, 0, 0, 500_000_000, time.UTC)
	fast, _ := trigger.CompileSchedule("@every 1s")
	if got := fast.AtLeast(time.Minute).Next(from); !got.Equal(time.Date(2026, 11, 24, 9, 1, 0, 0, time.UTC)) {
		t.Errorf("@every 1s slowed to a minute: next %s", got)
	}
	hourly, _ := trigger.CompileSchedule("@hourly")
	if got := hourly.AtLeast(time.Minute).Next(from); !got.Equal(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("@hourly at least a minute: next %s", got)
	}
}

func TestScheduleInstants(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tt := range []struct {
		cron, after, next string
	}{
		{"@every 90s", "2026-11-24T09:00:00Z", "2026-11-24T09:00:00Z"}, // a multiple of 90 s since the epoch...
		{"@every 90s", "2026-11-24T09:00:01Z", "2026-11-24T09:01:30Z"}, // ...whatever the instant asked from
		{"@every 2s", "2026-11-24T09:00:01.5Z", "2026-11-24T09:00:02Z"},
		{"0 9 * * 1", "2026-11-24T09:00:00Z", "2026-11-30T09:00:00Z"}, // Mondays at 09:00 UTC
		{"@daily", "2026-11-24T23:59:59Z", "2026-11-25T00:00:00Z"},
		{"*/15 * * * *", "2026-11-24T09:07:00+02:00", "2026-11-24T07:15:00Z"}, // UTC, whatever the zone asked in
	} {
		s, err := trigger.CompileSchedule(tt.cron)
		if err != nil {
			t.Fatal(err)
		}
		after := at(tt.after)
		if tt.cron == "@every 90s" && tt.after == "2026-11-24T09:00:00Z" {
			after = after.Add(-time.Second)
		}
		if got := s.Next(after); !got.Equal(at(tt.next)) {
			t.Errorf("%s after %s: %s, want %s", tt.cron, tt.after, got, tt.next)
		}
	}
	s, _ := trigger.CompileSchedule("@every 2s")
	if got := s.Latest(at("2026-11-24T09:00:00Z"), at("2026-11-24T09:00:09Z")); !got.Equal(at("2026-11-24T09:00:08Z")) {
		t.Errorf("latest missed @every 2s instant: %s", got)
	}
	if got := s.Latest(at("2026-11-24T09:00:08Z"), at("2026-11-24T09:00:09Z")); !got.IsZero() {
		t.Errorf("none missed, got %s", got)
	}
	c, _ := trigger.CompileSchedule("0 * * * *")
	if got := c.Latest(at("2026-11-24T06:00:00Z"), at("2026-11-24T09:30:00Z")); !got.Equal(at("2026-11-24T09:00:00Z")) {
		t.Errorf("latest missed hourly instant: %s", got)
	}
}
