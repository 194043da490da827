package teams_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/talkback/teams"
	"factory/internal/talkback/teams/teamstest"
	"factory/internal/writeback"
)

// TestVerify: a token the Bot Framework signed for the bot and the
// activity's service URL passes; every way of being wrong fails, with the
// reason it is wrong.
func TestVerify(t *testing.T) {
	t.Parallel()
	f := teamstest.New(t)
	v := &teams.Verifier{MetadataURL: f.URL + "/openid"}
	svc := "https://smba.trafficmanager.net/emea/"
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	hour := time.Hour
	for _, c := range []struct {
		name, auth, channel string
		want                error
	}{
		{"good", "Bearer " + f.Sign(svc, nil), "msteams", nil},
		{"good, the older serviceUrl claim", "Bearer " + f.Sign(svc, func(c teamstest.Claims) { delete(c, "serviceurl"); c["serviceUrl"] = svc }), "msteams", nil},
		{"good, aud a list", "Bearer " + f.Sign(svc, func(c teamstest.Claims) { c["aud"] = []string{"x", teamstest.AppID} }), "msteams", nil},
		{"no header", "", "msteams", teams.ErrNoToken},
		{"not bearer", "Basic abc", "msteams", teams.ErrNoToken},
		{"not a JWT", "Bearer abc.def", "msteams", teams.ErrMalformed},
		{"too long", "Bearer " + strings.Repeat("a", 20000), "msteams", teams.ErrMalformed},
		{"alg none", "Bearer " + f.SignRaw(map[string]any{"alg": "none", "kid": teamstest.KeyID}, teamstest.Claims{}, other), "msteams", teams.ErrAlgorithm},
		{"alg HS256", "Bearer " + f.SignRaw(map[string]any{"alg": "HS256", "kid": teamstest.KeyID}, teamstest.Claims{}, other), "msteams", teams.ErrAlgorithm},
		{"unknown kid", "Bearer " + f.SignRaw(map[string]any{"alg": "RS256", "kid": "other"}, teamstest.Claims{}, other), "msteams", teams.ErrKey},
		{"signed by another key", "Bearer " + f.SignRaw(map[string]any{"alg": "RS256", "kid": teamstest.KeyID}, teamstest.Claims{"iss": teams.Issuer}, other), "msteams", teams.ErrSignature},
		{"expired", "Bearer " + f.Sign(svc, func(c teamstest.Claims) { c["exp"] = time.Now().Add(-hour).Unix() }), "msteams", teams.ErrExpired},
		{"not valid yet", "Bearer " + f.Sign(svc, func(c teamstest.Claims) { c["nbf"] = time.Now().Add(hour).Unix() }), "msteams", teams.ErrExpired},
		{"no exp", "Bearer " + f.Sign(svc, func(c teamstest.Claims) { delete(c, "exp") }), "msteams", teams.ErrExpired},
		{"another bot", "Bearer " + f.Sign(svc, func(c teamstest.Claims) { c["aud"] = "someone-else" }), "msteams", teams.ErrClaims},
		{"another issuer", "Bearer " + f.Sign(svc, func(c teamstest.Claims) { c["iss"] = "https://sts.windows.net/x/" }), "msteams", teams.ErrClaims},
		{"another service URL", "Bearer " + f.Sign("https://evil.example/", nil), "msteams", teams.ErrClaims},
		{"no service URL", "Bearer " + f.Sign(svc, func(c teamstest.Claims) { delete(c, "serviceurl") }), "msteams", teams.ErrClaims},
		{"a channel the key is not endorsed for", "Bearer " + f.Sign(svc, nil), "skype", teams.ErrKey},
	} {
		err := v.Verify(context.Background(), c.auth, teamstest.AppID, svc, c.channel)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	f.Snapshot(func() {
		// The keys were read once: an unknown kid within a minute of
		// that does not read them again.
		if f.KeyReads != 1 {
			t.Errorf("the keys were read %d times", f.KeyReads)
		}
	})
}

// TestKeyRefresh: an unknown kid reads the keys again, at most once a
// minute; keys a day old are read again.
func TestKeyRefresh(t *testing.T) {
	t.Parallel()
	f := teamstest.New(t)
	start := time.Now()
	now := start
	v := &teams.Verifier{MetadataURL: f.URL + "/openid", Now: func() time.Time { return now }}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	unknown := "Bearer " + f.SignRaw(map[string]any{"alg": "RS256", "kid": "rotated"}, teamstest.Claims{}, other)
	for _, step := range []struct {
		after time.Duration
		auth  string
		reads int
	}{{0, unknown, 1}, {30 * time.Second, unknown, 1}, {2 * time.Minute, unknown, 2}, {130 * time.Second, unknown, 2}, {25 * time.Hour, unknown, 3}} {
		now = start.Add(step.after)
		_ = v.Verify(context.Background(), step.auth, teamstest.AppID, "https://s/", "msteams")
		f.Snapshot(func() {
			if f.KeyReads != step.reads {
				t.Errorf("after %s: the keys were read %d times, want %d", step.after, f.KeyReads, step.reads)
			}
		})
	}
}

// TestVerifyWithoutKeys: keys that cannot be read fail verification.
func TestVerifyWithoutKeys(t *testing.T) {
	t.Parallel()
	v := &teams.Verifier{MetadataURL: "http://127.0.0.1:1/openid"}
	f := teamstest.New(t)
	if err := v.Verify(context.Background(), "Bearer "+f.Sign("https://s/", nil), teamstest.AppID, "https://s/", "msteams"); err == nil ||
		!strings.Contains(err.Error(), "keys") {
		t.Fatalf("%v", err)
	}
}

// TestReply: a reply in the thread of the activity that asked, made with an
// app token of the bot's, edited; every request as the Bot Connector's
// description allows.
func TestReply(t *testing.T) {
	t.Parallel()
	f := teamstest.New(t)
	p := teams.Reporter{Client: teams.New(teamstest.AppID, teamstest.Password, "", f.URL+"/token", nil)}
	o := &factory.Origin{Provider: "teams", Chat: factory.Chat{Site: f.URL + "/", Channel: "19:orders@thread.tacv2;messageid=1751364000437",
		Thread: "1751364000437", Message: "1751364000437"}}
	ctx := context.Background()
	rep := &writeback.Report{RunID: "run_1", Title: "Export [times] out", State: factory.StateInProgress, URL: "https://f.example/ui/runs/run_1"}
	id, err := p.Post(ctx, o, rep)
	if err != nil {
		t.Fatal(err)
	}
	rep.State, rep.Outcome = factory.StateSucceeded, "done"
	if err := p.Update(ctx, o, id, rep); err != nil {
		t.Fatal(err)
	}
	f.Snapshot(func() {
		if len(f.Replies) != 1 || f.Replies[0].Conversation != o.Channel || f.Replies[0].ReplyTo != o.Message || f.Replies[0].Edits != 1 {
			t.Fatalf("replies %+v", f.Replies)
		}
		if txt := f.Replies[0].Text; !strings.Contains(txt, "✅ **Export \\[times\\] out** · SUCCEEDED") || !strings.Contains(txt, "[Run run_1](https://f.example/ui/runs/run_1)") {
			t.Errorf("reply %q", txt)
		}
	})
	bad := teams.Reporter{Client: teams.New(teamstest.AppID, "wrong", "", f.URL+"/token", nil)}
	if _, err := bad.Post(ctx, o, rep); err == nil || !strings.Contains(err.Error(), "app token") {
		t.Errorf("a wrong password: %v", err)
	}
	if got := teams.TokenURLOf("contoso.onmicrosoft.com"); got != "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token" {
		t.Errorf("single-tenant token URL %s", got)
	}
}
