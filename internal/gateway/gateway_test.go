package gateway_test

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"factory"
	"factory/internal/gateway"
	"factory/internal/gateway/scripted"
)

// fakeRuns is the run manager as the gateway sees it: runs by ID, live or
// not, with budgets; the calls recorded.
type fakeRuns struct {
	mu       sync.Mutex
	runs     map[string]*factory.Run
	calls    []*factory.ModelCall
	exceeded map[string]*factory.BudgetExceeded
}

func (f *fakeRuns) Admit(id string) (*factory.Run, *factory.BudgetExceeded, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok || r.State.Terminal() {
		return nil, nil, errors.New("not live")
	}
	if r.Setup != nil {
		if e := r.Setup.Budget.Exceeded(r.Spent, 0); e != nil {
			return r, e, nil
		}
	}
	return r, nil, nil
}

func (f *fakeRuns) RecordCall(id string, c *factory.ModelCall) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[id].AddCall(c)
	f.calls = append(f.calls, c)
	return nil
}

func (f *fakeRuns) recorded() []*factory.ModelCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*factory.ModelCall(nil), f.calls...)
}

const realKey = "sk-real-provider-key-0123456789"

// rig is a gateway in front of a scripted model server, with one live run
// (run_live) and its token.
type rig struct {
	up    *scripted.Server
	gw    *httptest.Server
	runs  *fakeRuns
	token string
}

func newRig(t *testing.T, script scripted.Script) *rig {
	t.Helper()
	up := scripted.New(script)
	t.Cleanup(up.Close)
	tokens := &gateway.Tokens{Key: []byte("test key of the server")}
	runs := &fakeRuns{runs: map[string]*factory.Run{"run_live": {ID: "run_live", State: factory.StateInProgress},
		"run_done": {ID: "run_done", State: factory.StateSucceeded}}}
	g := gateway.New(gateway.Config{Tokens: tokens, Runs: runs,
		Providers: map[string]gateway.Provider{gateway.Anthropic: {URL: up.URL}, gateway.OpenAI: {URL: up.URL}, gateway.Gemini: {URL: up.URL}},
		Prices:    gateway.Prices{"claude-sonnet-4-5": {Input: 3, Output: 15, CachedInput: 0.3}, "gpt-5.3-codex": {Input: 1.25, Output: 10}},
		Key:       func(*factory.Run, string) ([]byte, error) { return []byte(realKey), nil }})
	mux := http.NewServeMux()
	mux.Handle(gateway.Prefix, g)
	gw := httptest.NewServer(mux)
	t.Cleanup(gw.Close)
	return &rig{up: up, gw: gw, runs: runs, token: tokens.Mint("run_live")}
}

// call is a model call as each provider's SDK makes it.
type call struct {
	name, provider, path, body string
	model                      string
}

var calls = []call{
	{"anthropic messages, streamed", "anthropic", "/v1/messages", `{"model":"claude-sonnet-4-5","stream":true,"tools":[{"name":"Write"}],"messages":[{"role":"user","content":"hi"}]}`, "claude-sonnet-4-5"},
	{"anthropic messages", "anthropic", "/v1/messages", `{"model":"claude-sonnet-4-5","tools":[{"name":"Write"}],"messages":[{"role":"user","content":"hi"}]}`, "claude-sonnet-4-5"},
	{"openai responses, streamed", "openai", "/v1/responses", `{"model":"gpt-5.3-codex","stream":true,"tools":[{"type":"function","name":"shell"}],"input":"hi"}`, "gpt-5.3-codex"},
	{"openai responses", "openai", "/v1/responses", `{"model":"gpt-5.3-codex","tools":[{"type":"function","name":"shell"}],"input":"hi"}`, "gpt-5.3-codex"},
	{"openai chat, streamed", "openai", "/v1/chat/completions", `{"model":"gpt-4.1","stream":true,"tools":[{"type":"function","function":{"name":"shell"}}],"messages":[{"role":"user","content":"hi"}]}`, "gpt-4.1"},
	{"openai chat", "openai", "/v1/chat/completions", `{"model":"gpt-4.1","tools":[{"type":"function","function":{"name":"shell"}}],"messages":[{"role":"user","content":"hi"}]}`, "gpt-4.1"},
	{"gemini, streamed (sse)", "gemini", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"write_file"}]}]}`, "gemini-2.5-flash"},
	{"gemini, streamed (json)", "gemini", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"write_file"}]}]}`, "gemini-2.5-flash"},
	{"gemini", "gemini", "/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"write_file"}]}]}`, "gemini-2.5-flash"},
}

// authHeader is how each provider's SDK sends its key.
func authHeader(req *http.Request, provider, key string) {
	switch provider {
	case "anthropic":
		req.Header.Set("x-api-key", key)
	case "gemini":
		req.Header.Set("x-goog-api-key", key)
	default:
		req.Header.Set("Authorization", "Bearer "+key)
	}
}

func (rg *rig) post(t *testing.T, c call, key string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", rg.gw.URL+gateway.Prefix+c.provider+c.path, strings.NewReader(c.body))
	req.Header.Set("Content-Type", "application/json")
	authHeader(req, c.provider, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestGatewayForwards: each provider's call reaches the provider with the
// real key (never the run's token), its answer comes back whole, and the
// call is recorded with the tokens the provider reported and the cost by
// the prices (none for a model without one).
func TestGatewayForwards(t *testing.T) {
	usage := scripted.Usage{Input: 1200, Cached: 300, Output: 45}
	rg := newRig(t, func(r *scripted.Request) scripted.Reply {
		return scripted.Reply{Text: "I will write it.", Tools: []scripted.ToolCall{{Name: r.Tools[0], Input: map[string]any{"file_path": "a.md"}}}, Usage: usage}
	})
	for i, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			resp, body := rg.post(t, c, rg.token)
			if resp.StatusCode != 200 || !strings.Contains(body, "I will write it.") && !strings.Contains(body, "I will w") {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if strings.Contains(body, realKey) {
				t.Fatal("the real key in the answer")
			}
			up := rg.up.Calls()[i]
			if up.Auth != realKey || strings.Contains(string(up.Body), rg.token) {
				t.Fatalf("the provider got %q", up.Auth)
			}
			got := rg.runs.recorded()[i]
			if got.Model != c.model || got.Provider != c.provider || got.Status != 200 || got.InputTokens != usage.Input ||
				got.CachedTokens != usage.Cached || got.OutputTokens != usage.Output {
				t.Fatalf("recorded %+v, the provider reported %+v", got, usage)
			}
			want := map[string]float64{"claude-sonnet-4-5": (1200*3 + 300*0.3 + 45*15) / 1e6, "gpt-5.3-codex": (1200*1.25 + 300*1.25 + 45*10) / 1e6}
			if w, priced := want[c.model]; priced != (got.CostUSD != nil) || priced && *got.CostUSD-w > 1e-9 {
				t.Fatalf("cost %v, want %v (priced %v)", got.CostUSD, w, priced)
			}
		})
	}
	r := rg.runs.runs["run_live"]
	if r.Usage == nil || *r.Usage.TotalTokens != int64(len(calls))*(1200+300+45) || len(r.Usage.ModelTokenUsage) != 4 {
		t.Fatalf("request_usage: %+v", r.Usage)
	}
}

// TestGatewayRefuses: a call without a run's token, or whose run has no
// live turn, or past its run's budget, is answered by the gateway in the
// provider's shape and never reaches the provider.
func TestGatewayRefuses(t *testing.T) {
	rg := newRig(t, func(*scripted.Request) scripted.Reply { return scripted.Reply{Text: "no"} })
	forged := strings.TrimSuffix(rg.token, rg.token[len(rg.token)-4:]) + "AAAA"
	done := (&gateway.Tokens{Key: []byte("test key of the server")}).Mint("run_done")
	for _, c := range []struct {
		name, key string
		status    int
		want      string
	}{
		{"no key", "", 401, "not one"},
		{"a provider's key", realKey, 401, "not one"},
		{"a forged token", forged, 401, "not one"},
		{"an ended run's token", done, 401, "no turn in progress"},
	} {
		for _, p := range []call{calls[0], calls[2], calls[6]} {
			resp, body := rg.post(t, p, c.key)
			if resp.StatusCode != c.status || !strings.Contains(body, c.want) || !strings.Contains(body, `"error"`) {
				t.Errorf("%s, %s: %d %s", c.name, p.provider, resp.StatusCode, body)
			}
		}
	}
	rg.runs.runs["run_live"].Setup = &factory.RunSetup{Budget: &factory.Budget{MaxTokens: 10}}
	rg.runs.runs["run_live"].Spent = &factory.Spent{Tokens: 12}
	resp, body := rg.post(t, calls[0], rg.token)
	if resp.StatusCode != 400 || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, "budget_exceeded") {
		t.Fatalf("past its budget: %d %s", resp.StatusCode, body)
	}
	if n := len(rg.up.Calls()); n != 0 {
		t.Fatalf("%d calls reached the provider", n)
	}
	if rec := rg.runs.recorded(); len(rec) != 1 || rec[0].Status != 400 || !strings.HasPrefix(rec[0].Error, "budget_exceeded") {
		t.Fatalf("the refused call is recorded: %+v", rec)
	}
}

// TestGatewayStreams: a streamed answer reaches the agent as the provider
// sends it: its first events while the provider holds the rest back.
func TestGatewayStreams(t *testing.T) {
	hold := make(chan struct{})
	rg := newRig(t, func(*scripted.Request) scripted.Reply {
		return scripted.Reply{Text: strings.Repeat("word ", 40), ChunkSize: 10, Hold: hold, HoldAfter: 4, Usage: scripted.Usage{Input: 5, Output: 40}}
	})
	req, _ := http.NewRequest("POST", rg.gw.URL+gateway.Prefix+"anthropic/v1/messages", strings.NewReader(calls[0].body))
	authHeader(req, "anthropic", rg.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), "text_delta") {
	}
	if !strings.Contains(sc.Text(), "text_delta") {
		t.Fatalf("the first delta did not come while the provider held the rest: %v", sc.Err())
	}
	close(hold)
	io.Copy(io.Discard, resp.Body)
	if rec := rg.runs.recorded(); len(rec) != 1 || rec[0].OutputTokens != 40 {
		t.Fatalf("recorded: %+v", rec)
	}
}
