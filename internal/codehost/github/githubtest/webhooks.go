package githubtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"factory/internal/testnpm"
)

// WebhooksExamplesVersion is the @octokit/webhooks-examples release whose
// real payloads tests send.
const WebhooksExamplesVersion = "7.6.1"

var (
	examplesOnce sync.Once
	examples     []struct {
		Name     string           `json:"name"`
		Examples []map[string]any `json:"examples"`
	}
	examplesErr error
)

// Payload is a real GitHub webhook payload of an event with an action
// (@octokit/webhooks-examples), the first that has what match wants (nil:
// any), pointed at a repository: its owner, name and full name changed.
// Tests change what else they need.
func Payload(t testing.TB, event, action, owner, name string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	dir := testnpm.Package(t, "@octokit/webhooks-examples", WebhooksExamplesVersion)
	examplesOnce.Do(func() {
		b, err := os.ReadFile(filepath.Join(dir, "api.github.com", "index.json"))
		if err == nil {
			err = json.Unmarshal(b, &examples)
		}
		examplesErr = err
	})
	if examplesErr != nil {
		t.Fatal(examplesErr)
	}
	for _, e := range examples {
		if e.Name != event {
			continue
		}
		for _, ex := range e.Examples {
			if a, _ := ex["action"].(string); a != action && action != "" || match != nil && !match(ex) {
				continue
			}
			b, _ := json.Marshal(ex)
			var p map[string]any
			_ = json.Unmarshal(b, &p)
			if repo, ok := p["repository"].(map[string]any); ok {
				repo["name"], repo["full_name"] = name, owner+"/"+name
				if o, ok := repo["owner"].(map[string]any); ok {
					o["login"] = owner
				}
			}
			return p
		}
	}
	t.Fatalf("@octokit/webhooks-examples has no %s %s payload", event, action)
	return nil
}
