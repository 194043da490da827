// Package jira is the factory's Jira Cloud (docs/spec/talkback.md): a comment
// on the issue a run came from, in Atlassian Document Format, made when
// the run starts and edited as it goes (REST v3, an account's e-mail and
// API token).
package jira

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"factory"
	"factory/internal/writeback"
)

// Client is a Jira Cloud site as an account reaches it.
type Client struct {
	// Site is the site's URL (https://acme.atlassian.net): only issues
	// of it are commented on. API is where its REST API is reached (the
	// site, unless configured otherwise).
	Site, API    string
	email, token string
	hc           *http.Client
}

// New is a client of a site's REST API.
func New(site, api, email, token string, hc *http.Client) *Client {
	if api == "" {
		api = site
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{Site: strings.TrimRight(site, "/"), API: strings.TrimRight(api, "/"), email: email, token: token, hc: hc}
}

// maxAnswer bounds an answer read.
const maxAnswer = 1 << 20

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.API+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.SetBasicAuth(c.email, c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("jira: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("jira: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("jira: %s %s: HTTP %d: %s", method, path, resp.StatusCode, shorten(string(raw), 200))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// Comment comments on an issue and returns the comment's ID.
func (c *Client) Comment(ctx context.Context, issue string, doc Doc) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	err := c.do(ctx, http.MethodPost, "/rest/api/3/issue/"+url.PathEscape(issue)+"/comment", map[string]any{"body": doc}, &out)
	if err == nil && out.ID == "" {
		err = fmt.Errorf("jira: the comment on %s has no id", issue)
	}
	return out.ID, err
}

// EditComment replaces a comment's body.
func (c *Client) EditComment(ctx context.Context, issue, id string, doc Doc) error {
	return c.do(ctx, http.MethodPut, "/rest/api/3/issue/"+url.PathEscape(issue)+"/comment/"+url.PathEscape(id), map[string]any{"body": doc}, nil)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Reporter is Jira as a write-back provider.
type Reporter struct{ *Client }

// React does nothing: Jira has no reactions.
func (Reporter) React(context.Context, *factory.Origin) error { return nil }

// Post comments on the issue.
func (p Reporter) Post(ctx context.Context, o *factory.Origin, rep *writeback.Report) (string, error) {
	if err := p.sameSite(o); err != nil {
		return "", err
	}
	return p.Comment(ctx, o.Issue, ADF(rep))
}

// Update edits the comment.
func (p Reporter) Update(ctx context.Context, o *factory.Origin, id string, rep *writeback.Report) error {
	if err := p.sameSite(o); err != nil {
		return err
	}
	return p.EditComment(ctx, o.Issue, id, ADF(rep))
}

// sameSite refuses an issue of another site than the credential's: its key
// would name another issue here.
func (p Reporter) sameSite(o *factory.Origin) error {
	if o.Site != "" && !strings.EqualFold(strings.TrimRight(o.Site, "/"), p.Site) {
		return fmt.Errorf("%w: the issue %s is on %s; the factory's Jira is %s", writeback.ErrNoCredential, o.Issue, o.Site, p.Site)
	}
	return nil
}
