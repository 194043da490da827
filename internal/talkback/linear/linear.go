// Package linear is the factory's Linear (docs/spec/talkback.md), through a
// small typed client of Linear's GraphQL API whose every operation is
// checked against the schema @linear/sdk is generated from: a run from an
// agent session answers in the session with activities (a thought when it
// starts, the response or the error at its end); a run from an issue event
// comments on the issue, then edits the comment; the pull requests a run
// opened are linked to the issue as attachments.
package linear

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"factory"
	"factory/internal/writeback"
)

// DefaultAPIURL is Linear's GraphQL endpoint.
const DefaultAPIURL = "https://api.linear.app/graphql"

// The operations the client sends (Operations lists them for the schema
// check).
const (
	activityCreate = `mutation FactoryActivity($input: AgentActivityCreateInput!) {
  agentActivityCreate(input: $input) { success agentActivity { id } }
}`
	commentCreate = `mutation FactoryComment($input: CommentCreateInput!) {
  commentCreate(input: $input) { success comment { id } }
}`
	commentUpdate = `mutation FactoryCommentUpdate($id: String!, $input: CommentUpdateInput!) {
  commentUpdate(id: $id, input: $input) { success comment { id } }
}`
	linkURL = `mutation FactoryLink($issueId: String!, $url: String!, $title: String) {
  attachmentLinkURL(issueId: $issueId, url: $url, title: $title) { success attachment { id } }
}`
)

// Operations are every GraphQL document the client sends.
var Operations = []string{activityCreate, commentCreate, commentUpdate, linkURL}

// ActivityInput is AgentActivityCreateInput as the client fills it.
type ActivityInput struct {
	AgentSessionID string          `json:"agentSessionId"`
	Content        ActivityContent `json:"content"`
}

// ActivityContent is an activity's content (a JSONObject in the schema;
// Linear's agent interaction guide types it): thought, response or error,
// with a Markdown body.
type ActivityContent struct {
	Type string `json:"type"`
	Body string `json:"body"`
}

// CommentCreateInput and CommentUpdateInput are the schema's inputs as the
// client fills them.
type CommentCreateInput struct {
	IssueID string `json:"issueId"`
	Body    string `json:"body"`
}

// CommentUpdateInput is the schema's CommentUpdateInput as the client fills it.
type CommentUpdateInput struct {
	Body string `json:"body"`
}

// Client is Linear's API with a token.
type Client struct {
	url, token string
	hc         *http.Client
}

// New is a client of the API at apiURL ("" for Linear's). token is an
// OAuth actor token (sent as a bearer) or a personal API key (lin_api_...,
// sent as it is, as Linear takes those).
func New(token, apiURL string, hc *http.Client) *Client {
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{url: apiURL, token: token, hc: hc}
}

// maxAnswer bounds an answer read.
const maxAnswer = 1 << 20

// do sends an operation and decodes its data into out.
func (c *Client) do(ctx context.Context, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	auth := c.token
	if !strings.HasPrefix(auth, "lin_api_") {
		auth = "Bearer " + auth
	}
	req.Header.Set("Authorization", auth)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("linear: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("linear: %w", err)
	}
	var ans struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil || resp.StatusCode/100 != 2 && len(ans.Errors) == 0 {
		return fmt.Errorf("linear: HTTP %d: %s", resp.StatusCode, shorten(string(raw), 200))
	}
	if len(ans.Errors) > 0 {
		return fmt.Errorf("linear: %s", ans.Errors[0].Message)
	}
	return json.Unmarshal(ans.Data, out)
}

// Activity adds an activity to an agent session and returns its ID.
func (c *Client) Activity(ctx context.Context, in ActivityInput) (string, error) {
	var out struct {
		AgentActivityCreate struct {
			Success       bool `json:"success"`
			AgentActivity struct {
				ID string `json:"id"`
			} `json:"agentActivity"`
		} `json:"agentActivityCreate"`
	}
	if err := c.do(ctx, activityCreate, map[string]any{"input": in}, &out); err != nil {
		return "", err
	}
	if !out.AgentActivityCreate.Success {
		return "", errors.New("linear: agentActivityCreate did not succeed")
	}
	return out.AgentActivityCreate.AgentActivity.ID, nil
}

type commentAnswer struct {
	Success bool `json:"success"`
	Comment struct {
		ID string `json:"id"`
	} `json:"comment"`
}

// Comment comments on an issue and returns the comment's ID.
func (c *Client) Comment(ctx context.Context, in CommentCreateInput) (string, error) {
	var out struct {
		CommentCreate commentAnswer `json:"commentCreate"`
	}
	if err := c.do(ctx, commentCreate, map[string]any{"input": in}, &out); err != nil {
		return "", err
	}
	if !out.CommentCreate.Success {
		return "", errors.New("linear: commentCreate did not succeed")
	}
	return out.CommentCreate.Comment.ID, nil
}

// EditComment replaces a comment's body.
func (c *Client) EditComment(ctx context.Context, id string, in CommentUpdateInput) error {
	var out struct {
		CommentUpdate commentAnswer `json:"commentUpdate"`
	}
	if err := c.do(ctx, commentUpdate, map[string]any{"id": id, "input": in}, &out); err != nil {
		return err
	}
	if !out.CommentUpdate.Success {
		return errors.New("linear: commentUpdate did not succeed")
	}
	return nil
}

// Link attaches a URL to an issue (attachmentLinkURL: the same URL again
// updates the attachment it made).
func (c *Client) Link(ctx context.Context, issueID, url, title string) error {
	var out struct {
		AttachmentLinkURL struct {
			Success bool `json:"success"`
		} `json:"attachmentLinkURL"`
	}
	if err := c.do(ctx, linkURL, map[string]any{"issueId": issueID, "url": url, "title": title}, &out); err != nil {
		return err
	}
	if !out.AttachmentLinkURL.Success {
		return errors.New("linear: attachmentLinkURL did not succeed")
	}
	return nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Reporter is Linear as a write-back provider.
type Reporter struct{ *Client }

// React does nothing: a session's first thought is its answer at once.
func (Reporter) React(context.Context, *factory.Origin) error { return nil }

// Post says the run started: a thought in the agent session ("Working on
// it", with the run's link), or a comment on the issue. A run that has
// ended already says so at once.
func (p Reporter) Post(ctx context.Context, o *factory.Origin, rep *writeback.Report) (string, error) {
	if o.Thread == "" {
		return p.Comment(ctx, CommentCreateInput{IssueID: o.Issue, Body: Markdown(rep)})
	}
	id, err := p.Activity(ctx, ActivityInput{AgentSessionID: o.Thread, Content: ActivityContent{Type: "thought",
		Body: fmt.Sprintf("Working on it: [run %s](%s)", rep.RunID, rep.URL)}})
	if err != nil || !rep.FirstEnd {
		return id, err
	}
	return id, p.ended(ctx, o, rep)
}

// Update edits the issue's comment; in an agent session it says the end of
// a turn once: the pull requests linked to the issue, then the response
// (or the error) as an activity.
func (p Reporter) Update(ctx context.Context, o *factory.Origin, id string, rep *writeback.Report) error {
	if o.Thread == "" {
		if err := p.EditComment(ctx, id, CommentUpdateInput{Body: Markdown(rep)}); err != nil {
			return err
		}
		if rep.FirstEnd {
			return p.links(ctx, o, rep)
		}
		return nil
	}
	if !rep.FirstEnd {
		return nil
	}
	return p.ended(ctx, o, rep)
}

func (p Reporter) ended(ctx context.Context, o *factory.Origin, rep *writeback.Report) error {
	if err := p.links(ctx, o, rep); err != nil {
		return err
	}
	typ := "response"
	if rep.Failed {
		typ = "error"
	}
	_, err := p.Activity(ctx, ActivityInput{AgentSessionID: o.Thread, Content: ActivityContent{Type: typ, Body: Markdown(rep)}})
	return err
}

// links attaches the run's pull requests to the issue (idempotent: a
// retried report links them again harmlessly).
func (p Reporter) links(ctx context.Context, o *factory.Origin, rep *writeback.Report) error {
	if o.Issue == "" {
		return nil
	}
	for _, pr := range rep.PullRequests {
		if err := p.Link(ctx, o.Issue, pr.URL, pr.Title); err != nil {
			return err
		}
	}
	return nil
}

// Markdown is a report as Linear shows it.
func Markdown(rep *writeback.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** · %s %s\n\n[Run %s](%s)", mdEsc(rep.Title), writeback.Mark(rep.State), rep.State, rep.RunID, rep.URL)
	for _, f := range rep.FollowUps {
		fmt.Fprintf(&b, "\n\n↪ Follow-up: %s", mdEsc(f))
	}
	if rep.Outcome != "" {
		fmt.Fprintf(&b, "\n\n**Outcome:** %s", mdEsc(rep.Outcome))
	}
	if rep.Final != "" {
		fmt.Fprintf(&b, "\n\n> %s", strings.ReplaceAll(rep.Final, "\n", "\n> "))
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

// mdEsc keeps a one-line text from opening Markdown's links and emphasis.
func mdEsc(s string) string {
	return strings.NewReplacer("[", "\\[", "]", "\\]", "*", "\\*", "_", "\\_", "`", "\\`", "<", "&lt;").Replace(s)
}
