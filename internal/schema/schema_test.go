package schema_test

import (
	"strings"
	"testing"

	"factory/internal/schema"
)

func TestParseWebhookErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // diagnostics, formatted
	}{
		{"valid empty file gets defaults", "", nil},
		{"bad enum points at the value", "name: GitHub\ndescription: x\nauthMode: signatur\n",
			[]string{`webhooks/w.yaml:3:11: /authMode: must be one of token, url_token, signature; did you mean "signature"?`}},
		{"signature needs a scheme", "authMode: signature\n",
			[]string{"webhooks/w.yaml:1:11: /authMode: signatureScheme is required with authMode: signature"}},
		{"scheme needs signature mode", "authMode: token\nsignatureScheme: github\n",
			[]string{"webhooks/w.yaml:2:18: /signatureScheme: signatureScheme is allowed only with authMode: signature"}},
		{"provider schemes need a secretName", "authMode: signature\nsignatureScheme: stripe\n",
			[]string{"webhooks/w.yaml:2:18: /signatureScheme: secretName is required for this signatureScheme: name the managed secret that holds the provider's signing secret"}},
		{"standard-webhooks may generate", "authMode: signature\nsignatureScheme: standard-webhooks\n", nil},
		{"unknown scheme", "authMode: signature\nsignatureScheme: paypal\nsecretName: x\n",
			[]string{"webhooks/w.yaml:2:18: /signatureScheme: must be one of github, pagerduty, sentry, standard_webhooks, stripe, vercel (extensions: slack, shopify, linear, gitlab, azure_devops, standard-webhooks)"}},
		{"unknown key points at the key", "authMode: token\n  \nsecretname: x\n",
			[]string{`webhooks/w.yaml:3:1: /secretname: unknown key "secretname"; did you mean "secretName"?`}},
		{"wrong type", "enabled: maybe\n", []string{"webhooks/w.yaml:1:10: /enabled: must be boolean, not string"}},
		{"bad header name", "deliveryIdHeader: \"X Id\"\n", []string{"webhooks/w.yaml:1:19: /deliveryIdHeader: must be an HTTP header name, such as X-Event-Id"}},
		{"duplicate key", "authMode: token\nauthMode: token\n", []string{`webhooks/w.yaml:2:1: duplicate key "authMode"`}},
		{"syntax error", "authMode: [token\n", []string{"webhooks/w.yaml:1:1: invalid YAML: did not find expected ',' or ']'"}},
		{"two documents", "authMode: token\n---\nauthMode: token\n", []string{"webhooks/w.yaml:2:1: a second YAML document: a definition file holds exactly one"}},
		{"not an object", "- a\n- b\n", []string{"webhooks/w.yaml:1:1: must be object, not array"}},
		{"non-UTF-8 on line 2", "name: a\nname2: \xff\n", []string{"webhooks/w.yaml:2:1: file is not valid UTF-8"}},
		{"all errors at once", "authMode: x\nenabled: 3\nfoo: 1\n", []string{
			"webhooks/w.yaml:1:11: /authMode: must be one of token, url_token, signature",
			"webhooks/w.yaml:2:10: /enabled: must be boolean, not number",
			`webhooks/w.yaml:3:1: /foo: unknown key "foo"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, ds := schema.ParseWebhook("webhooks/w.yaml", "w", []byte(tt.yaml))
			ds.Sort()
			var got []string
			for _, d := range ds {
				got = append(got, d.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
			if len(tt.want) == 0 && w == nil {
				t.Fatal("no webhook for valid input")
			}
			if len(tt.want) > 0 && w != nil {
				t.Fatal("a webhook for invalid input")
			}
		})
	}
}

func TestWebhookDefaults(t *testing.T) {
	w, ds := schema.ParseWebhook("webhooks/ci.yaml", "ci", []byte("description: builds\n"))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	if w.Name != "ci" || w.AuthMode != "token" || !w.Enabled || !w.GeneratesSecret() {
		t.Fatalf("defaults not applied: %+v", w)
	}
	w, _ = schema.ParseWebhook("webhooks/ci.yaml", "ci", []byte("enabled: false\nsecretName: s\n"))
	if w.Enabled || w.GeneratesSecret() {
		t.Fatalf("explicit values lost: %+v", w)
	}
}

const automationHead = "---\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [wh_0000000000000000gh01]\n"

func TestParseAutomationErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"valid", automationHead + "---\nDo it.\n", nil},
		{"no front matter", "Do it.\n", []string{`automations/a.md:1:1: an automation file starts with a "---" line, then YAML front matter, then "---" and the prompt`}},
		{"unclosed", automationHead + "Do it.\n", []string{`automations/a.md:1:1: front matter is not closed: add a "---" line between the YAML and the prompt`}},
		{"empty prompt", automationHead + "---\n\n  \n", []string{`automations/a.md:8:1: the prompt is empty: write it after the closing "---" line`}},
		{"positions are file lines", "---\ntitle: t\ntriggers: []\n---\nx\n", []string{"automations/a.md:3:11: /triggers: minimum 1 items required, but found 0 items"}},
		{"missing triggers", "---\ntitle: t\n---\nx\n", []string{"automations/a.md:2:1: missing required key triggers"}},
		{"wrong provider", strings.Replace(automationHead, "provider: webhook", "provider: cron", 1) + "---\nx\n",
			[]string{"automations/a.md:3:15: /triggers/0/provider: must be one of webhook, schedule, github, gitlab, linear, slack, jira, teams, azure_devops, factory"}},
		{"file name instead of UID", strings.Replace(automationHead, "wh_0000000000000000gh01", "github", 1) + "---\nx\n",
			[]string{"automations/a.md:6:21: /triggers/0/filter/webhook_ids/0: must be a webhook UID such as wh_5f3k9x2m7q1z8c4v6b0n (factory status shows them), not a file name"}},
		{"scalar filter value", automationHead + "      payload:\n        action: opened\n---\nx\n",
			[]string{`automations/a.md:8:17: /triggers/0/filter/payload/action: a condition is a list of allowed values, not a single value: write ["opened"]`}},
		{"empty in", automationHead + "      payload:\n        action: []\n---\nx\n",
			[]string{`automations/a.md:8:17: /triggers/0/filter/payload/action: an empty list matches nothing: list at least one allowed value, or remove the key`}},
		{"mixed operator object", automationHead + "      payload:\n        issue: {exists: true, labels: [bug]}\n---\nx\n",
			[]string{`automations/a.md:8:16: /triggers/0/filter/payload/issue: mixes operators (exists) with field names (labels): put nested fields in their own object`}},
		{"operator of wrong type", automationHead + "      payload:\n        issue: {exists: yes-please}\n---\nx\n",
			[]string{`automations/a.md:8:16: /triggers/0/filter/payload/issue: exists: must be true or false`}},
		{"nested error is reported deep", automationHead + "      payload:\n        issue:\n          user:\n            login: octocat\n---\nx\n",
			[]string{`automations/a.md:10:20: /triggers/0/filter/payload/issue/user/login: a condition is a list of allowed values, not a single value: write ["octocat"]`}},
		{"too deep", automationHead + "      payload:\n        a: {b: {c: {d: {e: {f: {g: {h: {i: {j: {k: [1]}}}}}}}}}}\n---\nx\n",
			[]string{`automations/a.md:8:48: /triggers/0/filter/payload/a/b/c/d/e/f/g/h/i/j: payload filter nested too deeply: at most 10 levels`}},
		{"in and not_in share a value", automationHead + "      payload:\n        action: {in: [opened, closed], not_in: [closed]}\n---\nx\n",
			[]string{`automations/a.md:8:17: /triggers/0/filter/payload/action: "closed" is in both in and not_in: keep it in one`}},
		{"exists false with in", automationHead + "      payload:\n        action: {exists: false, in: [opened]}\n---\nx\n",
			[]string{`automations/a.md:8:17: /triggers/0/filter/payload/action: exists: false with a non-empty in matches nothing: a missing field equals no value`}},
		{"config limits", automationHead + "config:\n  idle_timeout_minutes: 90\n  skill_spec: nope\n---\nx\n", []string{
			"automations/a.md:8:25: /config/idle_timeout_minutes: must be <= 60 but found 90",
			"automations/a.md:9:15: /config/skill_spec: must be <owner>/<repo>:<skill-name> or <owner>/<repo>:<path>/SKILL.md",
		}},
		{"mcp server needs one of command or url", automationHead + "config:\n  mcp_servers:\n    gh: {command: gh-mcp, url: https://x}\n---\nx\n",
			[]string{"automations/a.md:9:9: /config/mcp_servers/gh: an MCP server has exactly one of command (with args, env) or url (with headers)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ds := schema.ParseAutomation("automations/a.md", "a", []byte(tt.text))
			ds.Sort()
			var got []string
			for _, d := range ds {
				got = append(got, d.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
			if (a == nil) != (len(tt.want) > 0) {
				t.Fatalf("automation %v for %d diagnostics", a, len(tt.want))
			}
		})
	}
}

func TestAutomationPromptAndCanonicalJSON(t *testing.T) {
	text := automationHead + "      payload: {b: [2], a: {in: [1.0]}}\nconfig: {name: x, model_id: m}\n---\n\nLine one.\nLine two.\n"
	a, ds := schema.ParseAutomation("automations/a.md", "a", []byte(text))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	if a.Prompt != "Line one.\nLine two.\n" {
		t.Fatalf("prompt %q", a.Prompt)
	}
	if got := string(a.Triggers[0].Filter.Payload); got != `{"a":{"in":[1]},"b":[2]}` {
		t.Fatalf("payload not canonical: %s", got)
	}
	if got := string(a.Config); got != `{"model_id":"m","name":"x"}` {
		t.Fatalf("config not canonical: %s", got)
	}
	if a.Title != "a" || !a.Enabled {
		t.Fatalf("defaults: %+v", a)
	}
}

func TestSplitFrontMatter(t *testing.T) {
	tests := []struct {
		name, in         string
		front, body      string
		frontLine, bLine int
		err              error
	}{
		{"simple", "---\na: 1\n---\nbody\n", "a: 1\n", "body\n", 2, 4, nil},
		{"crlf", "---\r\na: 1\r\n---\r\nbody", "a: 1\r\n", "body", 2, 4, nil},
		{"bom and trailing spaces", "\xef\xbb\xbf---  \na: 1\n--- \nb", "a: 1\n", "b", 2, 4, nil},
		{"empty front", "---\n---\nb", "", "b", 2, 3, nil},
		{"fence without newline at end", "---\na: 1\n---", "a: 1\n", "", 2, 4, nil},
		{"dashes inside a value are not a fence", "---\na: ----\n---\nb", "a: ----\n", "b", 2, 4, nil},
		{"no fence", "a: 1\n", "", "", 0, 0, schema.ErrNoFrontMatter},
		{"empty file", "", "", "", 0, 0, schema.ErrNoFrontMatter},
		{"unclosed", "---\na: 1\n", "", "", 0, 0, schema.ErrUnclosedFrontMatter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			front, fl, body, bl, err := schema.SplitFrontMatter([]byte(tt.in))
			if err != tt.err {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if string(front) != tt.front || string(body) != tt.body || fl != tt.frontLine || bl != tt.bLine {
				t.Fatalf("got (%q, %d, %q, %d), want (%q, %d, %q, %d)", front, fl, body, bl, tt.front, tt.frontLine, tt.body, tt.bLine)
			}
		})
	}
}

func TestSchemasCompileAndPrint(t *testing.T) {
	for _, k := range schema.Kinds {
		b, err := schema.Source(k)
		if err != nil || !strings.Contains(string(b), "draft/2020-12") {
			t.Fatalf("%s: %v", k, err)
		}
	}
	// ValidateDocument compiles every schema; a broken schema panics here.
	if _, ds := schema.ValidateDocument("server.yaml", []byte("listen: 127.0.0.1:9\nruntime: {maxConcurrentRuns: 0}\n"), schema.KindServer); len(ds) != 1 ||
		ds[0].String() != "server.yaml:2:30: /runtime/maxConcurrentRuns: must be >= 1 but found 0" {
		t.Fatalf("server config: %v", ds)
	}
}

// TestAliasBombBytes: a 100 KB "string alias bomb" passes a limit that
// counts values, not bytes; it is refused before anything expands it,
// pointing at the alias that takes it over. The attack: reconcile
// --dry-run reached 3.6 GB and died; a server watching the directory died
// within 25 s, and again on restart.
func TestAliasBombBytes(t *testing.T) {
	bomb := "name: x\ndescription: &a \"" + strings.Repeat("A", 100_000) + "\"\n" +
		"y: &b [" + strings.TrimSuffix(strings.Repeat("*a, ", 100), ", ") + "]\n" +
		"z: &c [" + strings.TrimSuffix(strings.Repeat("*b, ", 50), ", ") + "]\n"
	for _, k := range []schema.Kind{schema.KindWebhook, schema.KindFactory} {
		_, ds := schema.ValidateDocument("webhooks/bomb.yaml", []byte(bomb), k)
		if len(ds) != 1 || ds[0].String() != "webhooks/bomb.yaml:3:172: document too large: with alias *a it expands to more than 4194304 bytes" {
			t.Errorf("%s: %v", k, ds)
		}
	}
	// An ampersand in plain text is no anchor: such a file still parses.
	w, ds := schema.ParseWebhook("webhooks/a.yaml", "a", []byte("description: builds & deploys\n"))
	if len(ds) > 0 || w.Description != "builds & deploys" {
		t.Fatalf("%v %+v", ds, w)
	}
	// Aliases within the limits still work.
	w, ds = schema.ParseWebhook("webhooks/b.yaml", "b", []byte("name: &n hooks\ndescription: *n\n"))
	if len(ds) > 0 || w.Description != "hooks" {
		t.Fatalf("%v %+v", ds, w)
	}
}

// TestSuggestionsAndHints: typos get "did you mean" (case first), the
// common YAML mistakes a hint, and YAML 1.1 booleans in a list a warning.
func TestSuggestionsAndHints(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"key, another case", "deliveryIDHeader: X-Id\n", `webhooks/w.yaml:1:1: /deliveryIDHeader: unknown key "deliveryIDHeader"; did you mean "deliveryIdHeader"?`},
		{"key, a typo", "autMode: token\n", `webhooks/w.yaml:1:1: /autMode: unknown key "autMode"; did you mean "authMode"?`},
		{"key, nothing close", "colour: red\n", `webhooks/w.yaml:1:1: /colour: unknown key "colour"`},
		{"enum, another case", "authMode: signature\nsignatureScheme: GitHub\nsecretName: s\n",
			`webhooks/w.yaml:2:18: /signatureScheme: must be one of github, pagerduty, sentry, standard_webhooks, stripe, vercel (extensions: slack, shopify, linear, gitlab, azure_devops, standard-webhooks); did you mean "github"?`},
		{"enum, a typo", "authMode: tokne\n", `webhooks/w.yaml:1:11: /authMode: must be one of token, url_token, signature; did you mean "token"?`},
		{"indentation", "name: a\n  description: b\n", `webhooks/w.yaml:2:1: invalid YAML: mapping values are not allowed in this context (a line is indented deeper than the key above it, or a value holding ": " needs quotes)`},
	} {
		_, ds := schema.ParseWebhook("webhooks/w.yaml", "w", []byte(c.yaml))
		if len(ds) != 1 || ds[0].String() != c.want {
			t.Errorf("%s: %v\nwant %s", c.name, ds, c.want)
		}
	}
	a, ds := schema.ParseAutomation("automations/a.md", "a", []byte("---\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [wh_0000000000000000gh01]\n      payload:\n        action: [on, \"off\", opened]\n---\nGo.\n"))
	if a == nil || len(ds) != 1 || ds[0].Severity != schema.Warning ||
		ds[0].String() != `automations/a.md:8:18: on is read as the boolean true (YAML 1.1): write "on" if you mean the word` {
		t.Fatalf("YAML 1.1 boolean: %v %v", a, ds)
	}
}
