// Package teams is the factory's Microsoft Teams (docs/spec/talkback.md):
// the Bot Framework's tokens on inbound activities verified (RS256, the
// keys of its OpenID metadata), and replies in the thread an activity came
// from, through the Bot Connector (an app token from the identity
// platform), edited as the run goes.
package teams

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"factory"
	"factory/internal/writeback"
)

// The identity platform's token endpoint of multi-tenant bots (TenantID
// names a single-tenant bot's tenant instead), and the scope of the Bot
// Connector's tokens.
const (
	DefaultTokenURL = "https://login.microsoftonline.com/botframework.com/oauth2/v2.0/token"
	Scope           = "https://api.botframework.com/.default"
)

// TokenURLOf is the token endpoint of a bot: its tenant's when it is
// single-tenant.
func TokenURLOf(tenantID string) string {
	if tenantID == "" {
		return DefaultTokenURL
	}
	return "https://login.microsoftonline.com/" + url.PathEscape(tenantID) + "/oauth2/v2.0/token"
}

// Client is a bot as the Bot Connector knows it: its app ID and password,
// and the app token it gets with them (kept until shortly before it
// expires).
type Client struct {
	AppID, password, tokenURL string
	hc                        *http.Client

	mu      sync.Mutex
	token   string
	expires time.Time
}

// New is a bot's client; tokenURL "" is TokenURLOf(tenantID).
func New(appID, password, tenantID, tokenURL string, hc *http.Client) *Client {
	if tokenURL == "" {
		tokenURL = TokenURLOf(tenantID)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{AppID: appID, password: password, tokenURL: tokenURL, hc: hc}
}

const maxAnswer = 1 << 20

// appToken is a token for the Bot Connector (client credentials).
func (c *Client) appToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && time.Now().Before(c.expires) {
		return c.token, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {c.AppID}, "client_secret": {c.password}, "scope": {Scope}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("teams: the app token: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err := json.Unmarshal(raw, &out); err != nil || resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		return "", fmt.Errorf("teams: the app token: HTTP %d %s", resp.StatusCode, out.Error)
	}
	c.token = out.AccessToken
	c.expires = time.Now().Add(time.Duration(max(out.ExpiresIn-300, 30)) * time.Second)
	return c.token, nil
}

// Activity is what the bot sends: a message in Markdown.
type Activity struct {
	Type       string `json:"type"`
	ID         string `json:"id,omitempty"`
	Text       string `json:"text"`
	TextFormat string `json:"textFormat"`
	ReplyToID  string `json:"replyToId,omitempty"`
}

// send sends an activity to the Bot Connector of serviceURL.
func (c *Client) send(ctx context.Context, method, serviceURL, path string, a Activity) (string, error) {
	tok, err := c.appToken(ctx)
	if err != nil {
		return "", err
	}
	body, _ := json.Marshal(a)
	u := strings.TrimRight(serviceURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("teams: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("teams: %s %s: HTTP %d: %.200s", method, path, resp.StatusCode, raw)
	}
	var out struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &out)
	return out.ID, nil
}

// Reply answers an activity in its conversation (ReplyToActivity) and
// returns the reply's ID.
func (c *Client) Reply(ctx context.Context, serviceURL, conversation, activity, text string) (string, error) {
	path := "/v3/conversations/" + url.PathEscape(conversation) + "/activities/" + url.PathEscape(activity)
	id, err := c.send(ctx, http.MethodPost, serviceURL, path, Activity{Type: "message", Text: text, TextFormat: "markdown", ReplyToID: activity})
	if err == nil && id == "" {
		err = fmt.Errorf("teams: the reply to %s has no id", activity)
	}
	return id, err
}

// Update replaces an activity the bot sent (UpdateActivity).
func (c *Client) Update(ctx context.Context, serviceURL, conversation, activity, text string) error {
	path := "/v3/conversations/" + url.PathEscape(conversation) + "/activities/" + url.PathEscape(activity)
	_, err := c.send(ctx, http.MethodPut, serviceURL, path, Activity{Type: "message", ID: activity, Text: text, TextFormat: "markdown"})
	return err
}

// Reporter is Teams as a write-back provider.
type Reporter struct{ *Client }

// React does nothing: bots cannot react to messages in Teams.
func (Reporter) React(context.Context, *factory.Origin) error { return nil }

// Post replies in the thread of the message that asked.
func (p Reporter) Post(ctx context.Context, o *factory.Origin, rep *writeback.Report) (string, error) {
	return p.Reply(ctx, o.Site, o.Channel, o.Message, Markdown(rep))
}

// Update edits the reply.
func (p Reporter) Update(ctx context.Context, o *factory.Origin, id string, rep *writeback.Report) error {
	return p.Client.Update(ctx, o.Site, o.Channel, id, Markdown(rep))
}

// Markdown is a report as Teams shows it (textFormat markdown).
func Markdown(rep *writeback.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s **%s** · %s\n\n[Run %s](%s)", writeback.Mark(rep.State), mdEsc(rep.Title), rep.State, rep.RunID, rep.URL)
	for _, f := range rep.FollowUps {
		fmt.Fprintf(&b, "\n\n↪ Follow-up: %s", mdEsc(f))
	}
	if rep.Outcome != "" {
		fmt.Fprintf(&b, "\n\n**Outcome:** %s", mdEsc(rep.Outcome))
	}
	if rep.Final != "" {
		fmt.Fprintf(&b, "\n\n> %s", strings.ReplaceAll(mdEsc(rep.Final), "\n", "\n> "))
	}
	if rep.Branch != "" {
		fmt.Fprintf(&b, "\n\n**Branch:** `%s`", rep.Branch)
	}
	for _, pr := range rep.PullRequests {
		fmt.Fprintf(&b, "\n\n**Pull request:** [%s](%s)", mdEsc(pr.Title), pr.URL)
		if pr.Status != "" {
			fmt.Fprintf(&b, " (%s)", pr.Status)
		}
	}
	return b.String()
}

func mdEsc(s string) string {
	return strings.NewReplacer("[", "\\[", "]", "\\]", "*", "\\*", "_", "\\_", "`", "\\`", "<", "&lt;").Replace(s)
}
