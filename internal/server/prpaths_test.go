package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/codehost/github/githubtest"
)

// TestPullRequestPathsFromTheCodeHost: an automation that filters a
// pull request event on paths fires on the files its code host lists, the
// fake GitHub's pull request files endpoint, read over loopback: a pull
// request that changes docs/ starts a run, one that changes only src/
// does not, and one whose files GitHub will not list starts nothing, its
// delivery saying why. Without the host's credential, the plan says that
// such a trigger never fires.
func TestPullRequestPathsFromTheCodeHost(t *testing.T) {
	f := githubtest.New(t)
	f.AddRepo("acme", "widgets", map[string]string{"README.md": "# Widgets\n"})
	f.SetPullFiles("acme/widgets", 11, []githubtest.PullFile{{Name: "src/x.go"}, {Name: "docs/guide.md", Status: "added"}})
	f.SetPullFiles("acme/widgets", 12, []githubtest.PullFile{{Name: "src/x.go"}})
	h, hook, _ := codeHostServerTree(t, f, map[string]string{
		"factory.yaml":         "schemaVersion: v1alpha1\nname: Widgets\nrepositories:\n  - owner: acme\n    name: widgets\nagentDefaults:\n  model: auto\n",
		"agents/lead/agent.md": "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"webhooks/github.yaml": "authMode: signature\nsignatureScheme: github\nsecretName: gh\n",
		"automations/docs/automation.md": "---\ntriggers:\n  - provider: github\n    event: pull_request_opened\n    filter:\n      paths: [\"docs/**\"]\n" +
			"---\nReview the documentation change.\n",
	})
	post := func(id string, number int) *factory.Delivery {
		t.Helper()
		p := githubtest.Payload(t, "pull_request", "opened", "acme", "widgets", nil)
		p["number"] = number
		p["pull_request"].(map[string]any)["number"] = number
		body, _ := json.Marshal(p)
		did := deliveryID(t, ghPost(t, hook, "pull_request", id, string(body)))
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			d, err := h.store.Delivery(h.status("acme").Webhooks[0].UID, did)
			if err == nil && d.Event != nil {
				return d
			}
		}
		t.Fatalf("delivery %s of pull request #%d was not evaluated", did, number)
		return nil
	}
	if d := post("pr-11", 11); len(d.RunIDs) != 1 {
		t.Errorf("pull request #11 changes docs/guide.md: runs %v, outcome %q", d.RunIDs, d.Outcome)
	} else if paths := d.Event.Fields["paths"]; len(paths) != 2 {
		t.Errorf("the delivery keeps the files read: %v", paths)
	}
	if d := post("pr-12", 12); len(d.RunIDs) != 0 {
		t.Errorf("pull request #12 changes src/ only: runs %v, outcome %q", d.RunIDs, d.Outcome)
	}
	f.SetUnavailable(true)
	d := post("pr-13", 13)
	if len(d.RunIDs) != 0 || !strings.Contains(d.Outcome, "not read") {
		t.Errorf("files GitHub would not list: runs %v, outcome %q", d.RunIDs, d.Outcome)
	}
}
