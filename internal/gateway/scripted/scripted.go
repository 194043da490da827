// Package scripted is a model server of the project's own for tests and
// benchmarks: it speaks the providers' APIs as the real agents call them
// (Anthropic Messages, OpenAI Responses and Chat Completions, Gemini
// generateContent and streamGenerateContent), streamed or not, and answers
// each call from a script: text, tool calls, and the usage it reports. It
// does no AI. A test decides each answer from what the agent sent so far
// (how many tool results, which user messages), so that the real agents
// (Claude Code, Codex, Gemini CLI) can be driven through whole turns.
package scripted

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Providers, as the gateway names them.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
	Gemini    = "gemini"
)

// Request is what a call asked, as far as a script needs it.
type Request struct {
	Provider string
	// API is messages, responses, chat or gemini.
	API    string
	Model  string
	Stream bool
	// Tools are the names of the tools the agent offered; a call without
	// tools is a side call of the agent's (a title, a check), answered
	// with SideText unless the script says otherwise.
	Tools []string
	// ToolResults counts the tool results in the conversation so far;
	// UserTexts are the user's text messages, in order (the prompt, then
	// each follow-up), without tool results.
	ToolResults int
	UserTexts   []string
	// JSON says the call asks for a JSON answer (Gemini's checks).
	JSON bool
	// Auth is the credential the call came with (x-api-key, a bearer
	// token, x-goog-api-key or ?key=).
	Auth string
	Body []byte

	toolKinds    map[string]string // a Responses tool's type, by name (function, custom)
	includeUsage bool              // a chat stream asked for its usage
	sse          bool              // a Gemini stream asked for server-sent events
}

// LastUser is the last user text, or "".
func (r *Request) LastUser() string {
	if len(r.UserTexts) == 0 {
		return ""
	}
	return r.UserTexts[len(r.UserTexts)-1]
}

// HasTool reports whether the agent offered a tool of that name.
func (r *Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t == name {
			return true
		}
	}
	return false
}

// Reply is the script's answer to one call.
type Reply struct {
	// Text is the assistant's text, streamed in Chunks pieces of about
	// ChunkSize bytes (default: one chunk per 16 bytes).
	Text      string
	ChunkSize int
	// Tools are the tool calls the answer makes, after the text.
	Tools []ToolCall
	Usage Usage
	// Delay waits before the answer's first byte; Pace between chunks.
	Delay, Pace time.Duration
	// Hold, when set, holds a streamed answer after its first HoldAfter
	// events until it is closed.
	Hold      <-chan struct{}
	HoldAfter int
	// Status, when not 200, answers with an error of the provider's
	// shape and this message.
	Status int
	Error  string
}

// ToolCall is one tool call of an answer.
type ToolCall struct {
	Name  string
	Input map[string]any
}

// Usage is what the answer reports it consumed: Input is the input
// tokens not read from a cache, Cached those that were (each provider's
// answer says them in its own way: OpenAI's and Gemini's input counts
// include the cached part, Anthropic's does not).
type Usage struct {
	Input, Output, Cached int64
}

// Script answers a call.
type Script func(r *Request) Reply

// SideText answers a side call (no tools offered).
const SideText = "ok"

// Call is a call the server answered: what it asked, and the usage it
// reported.
type Call struct {
	Request
	Path  string
	Usage Usage
	Reply Reply
}

// Server is a scripted model server on loopback.
type Server struct {
	URL string
	srv *httptest.Server

	mu     sync.Mutex
	script Script
	calls  []Call
	paths  []string // every path asked, answered or not
}

// New starts a server that answers with script.
func New(script Script) *Server {
	s := &Server{script: script}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// SetScript replaces the script.
func (s *Server) SetScript(script Script) {
	s.mu.Lock()
	s.script = script
	s.mu.Unlock()
}

// Calls are the calls answered so far (side calls too).
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Paths are every method and path asked so far.
func (s *Server) Paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.paths...)
}

// Reported is the usage the server reported over the calls that match
// keep (nil: every call).
func (s *Server) Reported(keep func(Call) bool) Usage {
	var u Usage
	for _, c := range s.Calls() {
		if keep == nil || keep(c) {
			u.Input, u.Output, u.Cached = u.Input+c.Usage.Input, u.Output+c.Usage.Output, u.Cached+c.Usage.Cached
		}
	}
	return u
}

// maxBody bounds a request's body.
const maxBody = 32 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	api, ok := apiOf(r)
	if !ok {
		s.other(w, r)
		return
	}
	req, err := parse(api, r, body)
	if err != nil {
		http.Error(w, "scripted: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	script := s.script
	s.mu.Unlock()
	reply := Reply{Text: SideText, Usage: Usage{Input: 10, Output: 1}}
	switch {
	case req.JSON:
		reply = Reply{Text: `{"reasoning": "the turn is done", "next_speaker": "user"}`, Usage: Usage{Input: 10, Output: 5}}
	case len(req.Tools) > 0 && script != nil:
		reply = script(req)
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Request: *req, Path: r.URL.Path, Usage: reply.Usage, Reply: reply})
	s.mu.Unlock()
	if reply.Delay > 0 {
		time.Sleep(reply.Delay)
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		writeError(w, req.Provider, reply.Status, reply.Error)
		return
	}
	answer(w, req, reply)
}

// apiOf tells the API a path is of.
func apiOf(r *http.Request) (string, bool) {
	p := r.URL.Path
	switch {
	case r.Method != http.MethodPost:
		return "", false
	case strings.HasSuffix(p, "/messages"):
		return "messages", true
	case strings.HasSuffix(p, "/responses"):
		return "responses", true
	case strings.HasSuffix(p, "/chat/completions"):
		return "chat", true
	case strings.Contains(p, ":generateContent") || strings.Contains(p, ":streamGenerateContent"):
		return "gemini", true
	}
	return "", false
}

// other answers what is not a model call: a token count (Anthropic's and
// Gemini's), a model list; anything else is 404.
func (s *Server) other(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(p, "/messages/count_tokens"):
		io.WriteString(w, `{"input_tokens": 10}`)
	case strings.Contains(p, ":countTokens"):
		io.WriteString(w, `{"totalTokens": 10}`)
	case strings.HasSuffix(p, "/models") && r.Method == http.MethodGet:
		io.WriteString(w, `{"data": [], "models": [], "object": "list"}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error": {"message": "the scripted model server has no `+jsonEscape(r.Method+" "+p)+`"}}`)
	}
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// writeError answers with an error of the provider's shape.
func writeError(w http.ResponseWriter, provider string, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var v any
	switch provider {
	case Anthropic:
		v = map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}}
	case Gemini:
		v = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": "INVALID_ARGUMENT"}}
	default:
		v = map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": nil}}
	}
	_ = json.NewEncoder(w).Encode(v)
}

// chunks splits text into pieces of about size bytes.
func chunks(text string, size int) []string {
	if size <= 0 {
		size = 16
	}
	var out []string
	for len(text) > size {
		cut := size
		for cut < len(text) && !isBoundary(text, cut) {
			cut++ // not inside a UTF-8 sequence
		}
		out = append(out, text[:cut])
		text = text[cut:]
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}

func isBoundary(s string, i int) bool { return s[i]&0xC0 != 0x80 }
