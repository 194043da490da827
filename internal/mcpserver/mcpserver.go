// Package mcpserver is the Factory MCP server (docs/spec/foreman.md): the
// tools a coding agent uses to work with a factory, over MCP's streamable
// HTTP transport. A local agent connects with an API key and gets the
// product's public tools; a run's agent connects with its run's token and
// gets the orchestration tools too, scoped to its factory and its task.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"factory"
	"factory/internal/foreman"
	"factory/internal/store"
)

// Config is what the tools work with.
type Config struct {
	Store   *store.Store
	Foreman *foreman.Foreman
	// PublicURL is the server's base URL, for the links tools give.
	PublicURL func() string
	// Validate checks factory files as POST /v1/factory-files/validate
	// does; Schema is a schema document of the format (the list of them
	// for "").
	Validate func(ctx context.Context, files map[string][]byte) (any, error)
	Schema   func(document string) (any, error)
	// WaitMax bounds how long dispatch_agent with wait holds the call
	// (default 20 minutes): a child still running then is told to its
	// parent as a follow-up when it ends.
	WaitMax time.Duration
	Version string
}

// Caller is who calls a tool: an API key, or a run (its token).
type Caller struct {
	Key *factory.APIKey
	Run *factory.Run
}

// may reports whether the caller may use a tool that needs scope: a read
// tool takes a read or a runs key, as the API's reads do.
func (c *Caller) may(scope string) bool {
	switch {
	case c.Run != nil:
		return true // a run acts within its factory and task
	case c.Key == nil:
		return false
	case scope == factory.ScopeRead:
		return c.Key.Allows(factory.ScopeRead, factory.ScopeRuns)
	}
	return c.Key.Allows(scope)
}

// Handler serves the MCP server: streamable HTTP, every request
// authenticated by its bearer token (401 without one that is valid).
func Handler(cfg Config) http.Handler {
	if cfg.WaitMax <= 0 {
		cfg.WaitMax = 20 * time.Minute
	}
	t := &tools{cfg: cfg}
	impl := &mcp.Implementation{Name: "factory", Title: "Factory", Version: cfg.Version}
	instructions := "Work with this server's software factories: list_factories first; its uid is the factory_uid the other tools take."
	public := mcp.NewServer(impl, &mcp.ServerOptions{Instructions: instructions})
	t.addPublic(public)
	run := mcp.NewServer(impl, &mcp.ServerOptions{Instructions: runInstructions})
	t.addPublic(run)
	t.addOrchestration(run)
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if info := auth.TokenInfoFromContext(r.Context()); info != nil && strings.HasPrefix(info.UserID, "run:") {
			return run
		}
		return public
	}, &mcp.StreamableHTTPOptions{MaxRequestBodyBytes: maxBody})
	return auth.RequireBearerToken(t.verify, nil)(h)
}

// maxBody bounds a request's bytes (validate_factory_files carries a
// tree).
const maxBody = 8 << 20

const runInstructions = "You are an agent of a software factory, working on one task. dispatch_agent starts another agent " +
	"of the factory as your child run (wait: true answers when it ends); set_stage moves the task; ask_human asks a person " +
	"and parks your run until the answer comes as your next message (end your turn after asking); complete_task ends the task."

// verify authenticates a request: a run token while its run has not
// ended, or an API key that is not revoked. Every request is checked, not
// only the one that opened the session.
func (t *tools) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	exp := time.Now().Add(time.Hour)
	if foreman.IsRunToken(token) {
		r, err := t.cfg.Foreman.VerifyRunToken(token)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{UserID: "run:" + r.ID, Expiration: exp, Extra: map[string]any{"caller": &Caller{Run: r}}}, nil
	}
	k, err := t.cfg.Store.APIKeyByValue(token)
	if errors.Is(err, store.ErrNotFound) || err == nil && k.RevokedAt != nil {
		return nil, fmt.Errorf("%w: unknown or revoked API key", auth.ErrInvalidToken)
	}
	if err != nil {
		return nil, err
	}
	return &auth.TokenInfo{UserID: "key:" + k.Prefix, Scopes: []string{k.Scope}, Expiration: exp, Extra: map[string]any{"caller": &Caller{Key: k}}}, nil
}

// tools holds the tools' handlers.
type tools struct{ cfg Config }

// caller is who made a call.
func caller(req *mcp.CallToolRequest) *Caller {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return &Caller{}
	}
	c, _ := req.Extra.TokenInfo.Extra["caller"].(*Caller)
	if c == nil {
		return &Caller{}
	}
	return c
}

// toolError is an error a model can act on: the domain error's message.
func toolError(err error) error {
	var e *factory.Error
	if errors.As(err, &e) {
		return errors.New(e.Message)
	}
	return err
}

// factoryFor reads a factory a caller may act on: a run's own, or any for
// an API key.
func (t *tools) factoryFor(c *Caller, uid string) (*factory.Factory, error) {
	if uid == "" && c.Run != nil {
		uid = c.Run.FactoryUID
	}
	if uid == "" {
		return nil, errors.New("factory_uid: required (list_factories gives them)")
	}
	if c.Run != nil && uid != c.Run.FactoryUID {
		return nil, fmt.Errorf("factory %s: a run's token acts on its own factory (%s) only", uid, c.Run.FactoryUID)
	}
	fs, err := t.cfg.Store.Factories()
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.UID == uid || f.Name == uid {
			return f, nil
		}
	}
	return nil, fmt.Errorf("factory_uid: no factory %s (list_factories gives them)", uid)
}

// need refuses a caller without a scope.
func need(c *Caller, scope string) error {
	if !c.may(scope) {
		return fmt.Errorf("this API key has scope %s; this tool needs %s", c.Key.Scope, scope)
	}
	return nil
}

// runURL links to a run in the dashboard.
func (t *tools) runURL(id string) string {
	return strings.TrimRight(t.cfg.PublicURL(), "/") + "/ui/runs/" + id
}
