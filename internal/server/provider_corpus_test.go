package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"factory"
)

// corpusCase is one delivery of internal/events/testdata/deliveries.json.
type corpusCase struct {
	Provider string              `json:"provider"`
	Kind     string              `json:"kind"`
	Payload  json.RawMessage     `json:"payload"`
	Events   []string            `json:"events"`
	Fields   map[string][]string `json:"fields"`
}

// TestProviderDeliveriesThroughServe posts every delivery of the events
// corpus to a real server, signed as its provider signs (GitHub's checked
// by go-github; Slack's v0 and Linear's HMAC as their documentation says;
// GitLab's token; Jira's through a token webhook that says eventSource:
// jira; Azure DevOps' service hook with HTTP Basic), and reads back from the delivery log the event each was
// normalized into, with every filter key's value.
func TestProviderDeliveriesThroughServe(t *testing.T) {
	b, err := os.ReadFile("../events/testdata/deliveries.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []corpusCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"factory.yaml":               "schemaVersion: v1alpha1\nname: All\nrepositories:\n  - {owner: acme, name: widgets}\n  - {owner: acme, name: api}\n  - {owner: fabrikam/Fabrikam, name: widgets}\nagentDefaults:\n  model: auto\n",
		"agents/lead/agent.md":       "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"webhooks/github.yaml":       "authMode: signature\nsignatureScheme: github\nsecretName: gh\n",
		"webhooks/gitlab.yaml":       "authMode: signature\nsignatureScheme: gitlab\nsecretName: gl\n",
		"webhooks/linear.yaml":       "authMode: signature\nsignatureScheme: linear\nsecretName: ln\n",
		"webhooks/slack.yaml":        "authMode: signature\nsignatureScheme: slack\nsecretName: sl\n",
		"webhooks/jira.yaml":         "authMode: token\nsecretName: jr\neventSource: jira\n",
		"webhooks/azure-devops.yaml": "authMode: signature\nsignatureScheme: azure_devops\nsecretName: az\n",
	})
	secretOf := map[string]string{"gh": ghSecret, "gl": "gitlab-token-0123456789", "ln": "lin_wh_secret_0123456789", "sl": "8f742231b10e8888abcd99yyyzzz85a5", "jr": "jira-token-0123456789abcdefghijklmn",
		"az": "azure-devops-hook-password-0123456789"}
	h := serveWithSecrets(t, root, secretOf)
	hooks := map[string]factory.WebhookStatus{}
	for _, w := range h.status("acme").Webhooks {
		hooks[w.Name] = w
	}
	for i, c := range cases {
		hook := hooks[strings.ReplaceAll(c.Provider, "_", "-")]
		id := deliveryID(t, postSigned(t, hook.IngressURL, c, fmt.Sprintf("corpus-%d", i), secretOf))
		var d *factory.Delivery
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			got, err := h.c.Delivery(context.Background(), hook.UID, id)
			if err == nil && (got.Event != nil || got.Outcome != "") {
				d = &got.Delivery
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("case %d (%s %v): not evaluated", i, c.Provider, c.Events)
			}
		}
		if d.Event == nil || d.Event.Event != c.Events[0] || c.Fields != nil && !reflect.DeepEqual(d.Event.Fields, c.Fields) {
			t.Fatalf("case %d (%s %s): the log has %+v (outcome %q), want %v with %v", i, c.Provider, c.Kind, d.Event, d.Outcome, c.Events, c.Fields)
		}
	}
}

// linearDated is a Linear payload with the webhookTimestamp Linear puts in
// every delivery (the corpus keeps payloads without it), dated now.
func linearDated(t *testing.T, payload json.RawMessage) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	m["webhookTimestamp"] = json.RawMessage(fmt.Sprint(time.Now().UnixMilli()))
	b, _ := json.Marshal(m)
	return string(b)
}

// postSigned posts a corpus delivery as its provider sends it.
func postSigned(t *testing.T, url string, c corpusCase, id string, secretOf map[string]string) answer {
	t.Helper()
	body := string(c.Payload)
	hexMAC := func(key, msg string) string {
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte(msg))
		return hex.EncodeToString(m.Sum(nil))
	}
	switch c.Provider {
	case "github":
		return ghPost(t, url, c.Kind, id, body)
	case "gitlab":
		return post(t, url, "", body, "X-Gitlab-Token", secretOf["gl"], "X-Gitlab-Event", c.Kind, "X-Gitlab-Event-UUID", id)
	case "linear":
		body = linearDated(t, c.Payload)
		return post(t, url, "", body, "Linear-Signature", hexMAC(secretOf["ln"], body), "Linear-Delivery", id)
	case "slack":
		ts := fmt.Sprint(time.Now().Unix())
		return post(t, url, "", body, "X-Slack-Request-Timestamp", ts, "X-Slack-Signature", "v0="+hexMAC(secretOf["sl"], "v0:"+ts+":"+body))
	case "azure_devops": // a service hook's Basic authentication; its identity is the payload's id
		return post(t, url, "", body, "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("factory:"+secretOf["az"])))
	default: // jira
		return post(t, url, "", body, "Authorization", "Bearer "+secretOf["jr"], "X-Atlassian-Webhook-Identifier", id)
	}
}
