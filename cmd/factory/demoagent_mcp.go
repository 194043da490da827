package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The demo agent's tool calls: it does no AI, so a prompt tells it which
// Factory MCP tools to call, a line each (docs/agents.md):
//
//	mcp: dispatch_agent {"agent": "triage", "prompt": "...", "wait": true}
//	mcp on approve: set_stage {"stage": "IMPLEMENT"}
//
// "mcp:" lines run on a turn without a follow-up; "mcp on WORD:" lines on
// a turn whose follow-up says WORD (any case). Each call and its answer is
// said on the timeline, in order; a tool's error is said and the next line
// runs.

// mcpLine is one tool call of a prompt.
type mcpLine struct {
	tool string
	args map[string]any
}

// mcpScript reads the calls of a prompt for a turn: its first turn's
// (followUp ""), or those of a follow-up.
func mcpScript(prompt, followUp string) ([]mcpLine, error) {
	var out []mcpLine
	for _, line := range strings.Split(prompt, "\n") {
		line = strings.TrimSpace(line)
		head, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(head, "mcp") {
			continue
		}
		switch word, on := strings.CutPrefix(head, "mcp on "); {
		case head == "mcp" && followUp == "":
		case on && followUp != "" && strings.Contains(strings.ToLower(followUp), strings.ToLower(strings.TrimSpace(word))):
		default:
			continue
		}
		tool, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
		l := mcpLine{tool: tool, args: map[string]any{}}
		if strings.TrimSpace(args) != "" {
			if err := json.Unmarshal([]byte(args), &l.args); err != nil {
				return nil, fmt.Errorf("%s: the arguments are not a JSON object: %v", tool, err)
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// runMCPScript makes a turn's tool calls through the Factory MCP server
// the run was given (FACTORY_MCP_URL, FACTORY_RUN_TOKEN), saying each.
func runMCPScript(ctx context.Context, prompt, followUp string, say func(format string, v ...any) bool) {
	calls, err := mcpScript(prompt, followUp)
	if err != nil {
		say("could not read the prompt's tool calls: %v", err)
		return
	}
	if len(calls) == 0 {
		return
	}
	url, tok := os.Getenv("FACTORY_MCP_URL"), os.Getenv("FACTORY_RUN_TOKEN")
	if url == "" || tok == "" {
		say("the prompt asks for %d tool call(s), but this run was given no Factory MCP server", len(calls))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "factory-demo-agent", Version: version}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{tok}},
		DisableStandaloneSSE: true}, nil)
	if err != nil {
		say("could not reach the Factory MCP server: %v", err)
		return
	}
	defer session.Close()
	for _, c := range calls {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if !say("%s", toolAnswer(c.tool, res, err)) {
			return
		}
	}
}

// toolAnswer says what a tool answered: its text, or its error.
func toolAnswer(tool string, res *mcp.CallToolResult, err error) string {
	if err != nil {
		return fmt.Sprintf("mcp %s failed: %v", tool, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text.WriteString(t.Text)
		}
	}
	if res.IsError {
		return fmt.Sprintf("mcp %s refused: %s", tool, text.String())
	}
	return fmt.Sprintf("mcp %s: %s", tool, text.String())
}
