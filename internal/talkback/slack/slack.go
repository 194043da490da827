// Package slack is the factory's Slack (docs/spec/talkback.md): a 👀 on the
// message that asked for a run, a reply in its thread made when the run
// starts and edited as it goes, and the channels a token sees, by name. It
// is the only importer of slack-go/slack.
package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/slack-go/slack"

	"factory"
	"factory/internal/writeback"
)

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// Client is a Slack workspace as a bot token reaches it.
type Client struct {
	api *slack.Client
}

// New is a client of the Web API at apiURL ("" for Slack's) with a bot
// token.
func New(token, apiURL string, hc *http.Client) *Client {
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	opts := []slack.Option{slack.OptionAPIURL(apiURL)}
	if hc != nil {
		opts = append(opts, slack.OptionHTTPClient(hc))
	}
	return &Client{api: slack.New(token, opts...)}
}

// React puts 👀 on the message that asked (reactions.add); a message that
// has it already is no error.
func (c *Client) React(ctx context.Context, o *factory.Origin) error {
	if o.Message == "" || o.Channel == "" {
		return nil
	}
	err := c.api.AddReactionContext(ctx, "eyes", slack.NewRefToMessage(o.Channel, o.Message))
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && se.Err == "already_reacted" {
		return nil
	}
	return err
}

// Post replies in the message's thread (chat.postMessage with thread_ts)
// and returns the reply's ts.
func (c *Client) Post(ctx context.Context, o *factory.Origin, rep *writeback.Report) (string, error) {
	_, ts, err := c.api.PostMessageContext(ctx, o.Channel, slack.MsgOptionText(Text(rep), false), slack.MsgOptionTS(o.Thread),
		slack.MsgOptionDisableLinkUnfurl())
	if err != nil {
		return "", fmt.Errorf("slack chat.postMessage: %w", err)
	}
	return ts, nil
}

// Update edits the reply (chat.update).
func (c *Client) Update(ctx context.Context, o *factory.Origin, ts string, rep *writeback.Report) error {
	if _, _, _, err := c.api.UpdateMessageContext(ctx, o.Channel, ts, slack.MsgOptionText(Text(rep), false)); err != nil {
		return fmt.Errorf("slack chat.update: %w", err)
	}
	return nil
}

// maxChannelPages bounds conversations.list's pages (of 1,000 channels).
const maxChannelPages = 50

// Channels are the workspace's public and private channels the token sees
// (conversations.list), ID by name.
func (c *Client) Channels(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	cursor := ""
	for page := 0; page < maxChannelPages; page++ {
		chans, next, err := c.api.GetConversationsContext(ctx, &slack.GetConversationsParameters{Cursor: cursor, Limit: 1000,
			Types: []string{"public_channel", "private_channel"}, ExcludeArchived: true})
		if err != nil {
			return nil, fmt.Errorf("slack conversations.list: %w", err)
		}
		for _, ch := range chans {
			out[ch.Name] = ch.ID
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
	return out, fmt.Errorf("slack conversations.list: more than %d pages of channels", maxChannelPages)
}

// Text is a report in Slack's mrkdwn: the state, a link to the run, its
// follow-ups, and at the end the outcome, the agent's last message, the
// branch and the pull requests. Every text of the run's is escaped, so no
// word of an agent's can make a link or a mention.
func Text(rep *writeback.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s *%s* · %s\n<%s|Run %s>", writeback.Mark(rep.State), esc(rep.Title), rep.State, rep.URL, rep.RunID)
	for _, f := range rep.FollowUps {
		fmt.Fprintf(&b, "\n↪ Follow-up: %s", esc(f))
	}
	if rep.Outcome != "" {
		fmt.Fprintf(&b, "\n*Outcome:* %s", esc(rep.Outcome))
	}
	if rep.Final != "" {
		fmt.Fprintf(&b, "\n> %s", strings.ReplaceAll(esc(rep.Final), "\n", "\n> "))
	}
	if rep.Branch != "" {
		fmt.Fprintf(&b, "\n*Branch:* `%s`", esc(rep.Branch))
	}
	for _, pr := range rep.PullRequests {
		fmt.Fprintf(&b, "\n*Pull request:* <%s|%s>", escURL(pr.URL), esc(pr.Title))
		if pr.Status != "" {
			fmt.Fprintf(&b, " (%s)", esc(pr.Status))
		}
	}
	return b.String()
}

// esc escapes what Slack's mrkdwn gives a meaning to: &, < and >.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// escURL keeps a URL from ending the link it is in.
func escURL(s string) string {
	return strings.NewReplacer("|", "%7C", ">", "%3E", "<", "%3C", " ", "%20").Replace(s)
}
