package talkback

import (
	"strings"
	"testing"
)

// TestActivityEndpoint is the attack of an activity that names its
// serviceUrl twice, in two cases: a case-blind check saw the token's
// address while the replies, and the bot's token, went to the other.
func TestActivityEndpoint(t *testing.T) {
	for _, c := range []struct {
		name, body, url, problem string
	}{
		{"plain", `{"serviceUrl":"https://smba.example/","channelId":"msteams"}`, "https://smba.example/", ""},
		{"case variant", `{"serviceUrl":"https://evil.example/","serviceurl":"https://smba.example/"}`, "", `"serviceurl" beside "serviceUrl"`},
		{"channel variant", `{"serviceUrl":"https://smba.example/","ChannelId":"x"}`, "", `"ChannelId" beside "channelId"`},
		{"only the variant", `{"serviceurl":"https://smba.example/"}`, "", `"serviceurl" beside "serviceUrl"`},
		{"none", `{"channelId":"msteams"}`, "", "names no serviceUrl"},
		{"not a string", `{"serviceUrl":3}`, "", "names no serviceUrl"},
		{"not an object", `[1]`, "", "not a JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, _, err := activityEndpoint([]byte(c.body))
			switch {
			case c.problem == "" && (err != nil || url != c.url):
				t.Errorf("%q %v, want %q", url, err, c.url)
			case c.problem != "" && (err == nil || !strings.Contains(err.Error(), c.problem)):
				t.Errorf("%q %v, want an error saying %q", url, err, c.problem)
			}
		})
	}
}
