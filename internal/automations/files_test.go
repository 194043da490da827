package automations

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"factory"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
	"factory/internal/trigger"
)

const prOpened = `{"action":"opened","number":3,"pull_request":{"number":3,"html_url":"https://github.com/acme/widgets/pull/3",` +
	`"base":{"ref":"main"},"head":{"sha":"abc"},"user":{"login":"octocat"},"labels":[]},"repository":{"full_name":"acme/widgets"}}`

// TestPullRequestFiles: a pull request's delivery reads its changed files
// once, whatever the number of automations filtering on paths, and only
// when one does; a filter that matches them fires, one that does not
// stays unfired; files that cannot be read fire no automation that
// filters on paths (the others fire) and are the delivery's outcome.
func TestPullRequestFiles(t *testing.T) {
	onPaths := func(in ...string) []factory.Trigger {
		t := factory.Trigger{Provider: factory.ProviderGitHub, Event: "pull_request_opened"}
		if len(in) > 0 {
			t.Filter.Keys = map[string]factory.ValueSet{"paths": {In: in}}
		}
		return []factory.Trigger{t}
	}
	all := map[string][]factory.Trigger{"src": onPaths("src/**"), "docs": onPaths("docs/**"), "any": onPaths()}
	for _, c := range []struct {
		name    string
		autos   []string
		files   *trigger.Files // nil: no reader
		fired   []string
		reads   int
		outcome string
		kept    []string
	}{
		{"a changed file matches one filter", []string{"src", "docs", "any"}, &trigger.Files{Paths: []string{"src/a.go", "README.md"}},
			[]string{"any", "src"}, 1, "", []string{"src/a.go", "README.md"}},
		{"the files cannot be read", []string{"src", "docs", "any"}, &trigger.Files{Unread: "paths: could not read the pull request's files: boom"},
			[]string{"any"}, 1, "paths: could not read the pull request's files: boom", nil},
		{"the host's cap", []string{"src"}, &trigger.Files{Paths: []string{"src/a.go"}, Capped: true},
			[]string{"src"}, 1, "paths: matched against the first 1 files the pull request changes: its code host lists no more", []string{"src/a.go"}},
		{"no automation filters on paths", []string{"any"}, &trigger.Files{Paths: []string{"src/a.go"}}, []string{"any"}, 0, "", nil},
		{"no reader", []string{"src", "any"}, nil, []string{"any"}, 0, trigger.NoReader, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			const uid = "wh_0000000000000000pr01"
			s, m := setUpProvider(t, uid, all, c.autos)
			e := &Evaluator{Store: s, Runs: m, Log: slog.New(slog.DiscardHandler)}
			reads := 0
			if c.files != nil {
				e.Files = func(_ context.Context, factoryName string, ev *factory.ProviderEvent) trigger.Files {
					reads++
					if factoryName != "acme" || ev.Repository != "acme/widgets" || ev.Subject == nil || ev.Subject.Number != 3 {
						t.Errorf("read %s %+v", factoryName, ev)
					}
					return *c.files
				}
			}
			d := &factory.Delivery{ID: "dlv_0001", WebhookUID: uid, Label: factory.LabelAccepted, Time: time.Now(), RunIDs: []string{}, EventType: "pull_request"}
			if err := s.RecordDelivery(d, []byte(prOpened), nil); err != nil {
				t.Fatal(err)
			}
			if err := e.Drain(); err != nil {
				t.Fatal(err)
			}
			got, err := s.Delivery(uid, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			var fired []string
			for _, key := range c.autos {
				if slices.Contains(got.RunIDs, RunID(d.ID, autoUID(key))) {
					fired = append(fired, key)
				}
			}
			slices.Sort(fired)
			if !slices.Equal(fired, c.fired) || reads != c.reads || got.Outcome != c.outcome {
				t.Errorf("fired %v, %d reads, outcome %q; want %v, %d, %q", fired, reads, got.Outcome, c.fired, c.reads, c.outcome)
			}
			if paths := got.Event.Fields["paths"]; !slices.Equal(paths, c.kept) {
				t.Errorf("the delivery keeps paths %q, want %q", paths, c.kept)
			}
		})
	}
}

func autoUID(key string) string { return "au_" + key + "000000000000000000"[:21-len(key)] }

// setUpProvider makes a store with a factory of no repositories list, a
// GitHub webhook, and the automations named, with their triggers.
func setUpProvider(t *testing.T, uid string, triggers map[string][]factory.Trigger, keys []string) (*store.Store, *runs.Manager) {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := s.NewBatch()
	b.PutFactory(&factory.Factory{Name: "acme", UID: "fc_0000000000000000ac01"})
	b.PutWebhook(&factory.Webhook{Factory: "acme", Key: "gh", UID: uid, Spec: factory.WebhookSpec{Name: "gh", AuthMode: factory.AuthSignature,
		SignatureScheme: "github", Enabled: true}})
	for _, key := range keys {
		b.PutAutomation(&factory.Automation{Factory: "acme", Key: key, UID: autoUID(key),
			Spec: factory.AutomationSpec{Title: key, Enabled: true, Prompt: "Go.\n", Triggers: triggers[key]}})
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	m := runs.NewManager(runs.Config{Store: s, DataDir: dir, DefaultEnvironment: "sh", Log: slog.New(slog.DiscardHandler),
		Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}})
	return s, m
}
