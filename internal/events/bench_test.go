package events_test

import (
	"fmt"
	"strings"
	"testing"

	"factory"
	"factory/internal/events"
	"factory/internal/filter"
	"factory/internal/trigger"
)

// prDelivery is a GitHub pull_request "opened" delivery of about 25 KB: a
// long description, labels, assignees, reviewers, and the repository and
// sender objects GitHub sends in full.
func prDelivery() []byte {
	var b strings.Builder
	b.WriteString(`{"action":"opened","number":4242,"pull_request":{"id":1,"number":4242,"state":"open","title":"Rework the pager",`)
	b.WriteString(`"html_url":"https://github.com/acme/widgets/pull/4242","user":{"login":"octocat","id":1,"type":"User","site_admin":false},`)
	b.WriteString(`"body":"` + strings.Repeat("This change reworks the pager so that the last page is never dropped. ", 320) + ` cc @factory-bot",`)
	b.WriteString(`"labels":[`)
	for i := 0; i < 12; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"label-%d","color":"ededed","default":false,"description":"Label number %d"}`, i, i, i)
	}
	b.WriteString(`],"assignees":[{"login":"hubot"},{"login":"octocat"}],"requested_reviewers":[{"login":"reviewer1"}],`)
	b.WriteString(`"head":{"ref":"rework-pager","sha":"6dcb09b5b57875f334f61aebed695e2e4193db5e","repo":{"full_name":"acme/widgets"}},`)
	b.WriteString(`"base":{"ref":"main","sha":"9049f1265b7d61be4a8904a9a27120d2064dab3b","repo":{"full_name":"acme/widgets"}},"merged":false,`)
	b.WriteString(`"commits":3,"additions":120,"deletions":40,"changed_files":5},`)
	b.WriteString(`"repository":{"id":1296269,"name":"widgets","full_name":"acme/widgets","private":false,"description":"` + strings.Repeat("Widgets for everyone. ", 60) + `",`)
	b.WriteString(`"owner":{"login":"acme","id":9,"type":"Organization"},"html_url":"https://github.com/acme/widgets","default_branch":"main","topics":["widgets","go"]},`)
	b.WriteString(`"sender":{"login":"octocat","id":1,"type":"User"}}`)
	return []byte(b.String())
}

// thousandAutomations: a factory's automations of every provider, most of
// which a pull request does not concern, a few that it matches.
func thousandAutomations(tb testing.TB) []*trigger.Set {
	in := func(v ...string) factory.ValueSet { return factory.ValueSet{In: v} }
	var sets []*trigger.Set
	for i := 0; i < 1000; i++ {
		var t factory.Trigger
		switch i % 5 {
		case 0:
			t = factory.Trigger{Provider: "github", Event: "pull_request_opened", Filter: factory.TriggerFilter{Keys: map[string]factory.ValueSet{
				"repos": in("acme/widgets"), "base_branches": in("main"), "labels": in(fmt.Sprintf("label-%d", i%40))}}}
		case 1:
			t = factory.Trigger{Provider: "github", Event: "issue_labeled", Filter: factory.TriggerFilter{Keys: map[string]factory.ValueSet{"labels": in("factory-ready")}}}
		case 2:
			t = factory.Trigger{Provider: "slack", Event: "app_mention", Filter: factory.TriggerFilter{Keys: map[string]factory.ValueSet{"keywords": in("deploy")}}}
		case 3:
			t = factory.Trigger{Provider: "linear", Event: "issue_created", Filter: factory.TriggerFilter{Keys: map[string]factory.ValueSet{"teams": in("ENG")}}}
		default:
			t = factory.Trigger{Provider: "github", Event: "pull_request_mentioned", Filter: factory.TriggerFilter{Keys: map[string]factory.ValueSet{
				"mentioned": in("factory-bot"), "authors": {NotIn: []string{"dependabot"}}},
				Payload: []byte(`{"pull_request":{"draft":{"not_in":[true]}}}`)}}
		}
		set, err := trigger.Compile([]factory.Trigger{t})
		if err != nil {
			tb.Fatal(err)
		}
		sets = append(sets, set)
	}
	return sets
}

// BenchmarkNormalizeAndMatch decodes, normalizes and matches one 25 KB
// pull_request delivery against 1,000 automations of mixed providers.
// Target: under 1 ms an op.
func BenchmarkNormalizeAndMatch(b *testing.B) {
	body := prDelivery()
	sets := thousandAutomations(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	fired := 0
	for i := 0; i < b.N; i++ {
		payload, err := filter.DecodePayload(body)
		if err != nil {
			b.Fatal(err)
		}
		evs, _ := events.Normalize("github", "pull_request", payload)
		fired = 0
		for _, set := range sets {
			for _, ev := range evs {
				if set.Match(trigger.Event{Source: trigger.ProviderDelivery("github", "wh_1"), Payload: payload, Provider: ev}) {
					fired++
					break
				}
			}
		}
	}
	if fired == 0 {
		b.Fatal("nothing matched: the benchmark measures no match")
	}
	b.ReportMetric(float64(fired), "fired")
	b.ReportMetric(float64(len(body))/1024, "KB")
}
