package gateway

import (
	"strings"
	"testing"
)

// The providers' usage, as their APIs report it.
var usageCases = []struct {
	name, provider, body string
	sse                  bool
	want                 Usage
}{
	{"anthropic stream", Anthropic, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":100,\"cache_read_input_tokens\":30,\"cache_creation_input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":42}}\n\n", true,
		Usage{Model: "claude-sonnet-4-5", Input: 105, Cached: 30, Output: 42, Seen: true}},
	{"anthropic message", Anthropic, `{"model":"claude-haiku-4-5","usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":0}}`, false,
		Usage{Model: "claude-haiku-4-5", Input: 7, Output: 3, Seen: true}},
	{"responses stream", OpenAI, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"model\":\"gpt-5.3-codex\",\"usage\":null}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"gpt-5.3-codex\",\"usage\":{\"input_tokens\":500,\"input_tokens_details\":{\"cached_tokens\":200},\"output_tokens\":60}}}\n\n", true,
		Usage{Model: "gpt-5.3-codex", Input: 300, Cached: 200, Output: 60, Seen: true}},
	{"chat stream, CRLF", OpenAI, "data: {\"model\":\"gpt-4.1\",\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}\r\n\r\n" +
		"data: {\"model\":\"gpt-4.1\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":10}}}\r\n\r\ndata: [DONE]\r\n\r\n", true,
		Usage{Model: "gpt-4.1", Input: 40, Cached: 10, Output: 5, Seen: true}},
	{"gemini sse, cumulative", Gemini, "data: {\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":90,\"totalTokenCount\":90},\"modelVersion\":\"gemini-2.5-flash\"}\n\n" +
		"data: {\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":90,\"cachedContentTokenCount\":40,\"candidatesTokenCount\":8,\"thoughtsTokenCount\":12}}\n\n", true,
		Usage{Model: "gemini-2.5-flash", Input: 50, Cached: 40, Output: 20, Seen: true}},
	{"gemini json array", Gemini, `[{"usageMetadata":{"promptTokenCount":3},"modelVersion":"models/gemini-2.5-pro"},` + "\r\n" + `{"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4}}]`, false,
		Usage{Model: "gemini-2.5-pro", Input: 3, Output: 4, Seen: true}},
	{"no usage", OpenAI, `{"error":{"message":"bad"}}`, false, Usage{}},
	{"negative counts are none", OpenAI, `{"usage":{"input_tokens":-5,"output_tokens":-1}}`, false, Usage{Seen: true}},
	{"garbage", Anthropic, "data: {\"usage\": nope\n\n", true, Usage{}},
}

func TestUsage(t *testing.T) {
	for _, c := range usageCases {
		t.Run(c.name, func(t *testing.T) {
			var sink usageSink = &jsonUsage{provider: c.provider}
			if c.sse {
				sink = &sseUsage{provider: c.provider}
			}
			// Fed in pieces of 7 bytes: lines cut anywhere.
			for b := c.body; b != ""; {
				n := min(7, len(b))
				sink.Write([]byte(b[:n]))
				b = b[n:]
			}
			if got := sink.Usage(); got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestUsageBounded: a line over the bound is passed over (its usage
// unknown), and the next ones are read; a JSON answer over its bound
// gives none.
func TestUsageBounded(t *testing.T) {
	s := &sseUsage{provider: OpenAI}
	s.Write([]byte("data: {\"usage\":{\"input_tokens\":9}," + strings.Repeat("x", maxEventLine) + "\n"))
	s.Write([]byte("data: {\"usage\":{\"input_tokens\":4,\"output_tokens\":2}}\n"))
	if got := s.Usage(); got.Input != 4 || cap(s.line) > 2*maxEventLine {
		t.Fatalf("%+v, holding %d", got, cap(s.line))
	}
	j := &jsonUsage{provider: OpenAI}
	j.Write([]byte(`{"usage":{"input_tokens":4},"x":"`))
	j.Write(make([]byte, maxJSONBody))
	if got := j.Usage(); got.Seen || j.buf.Cap() > 2*maxJSONBody {
		t.Fatalf("%+v", got)
	}
}

func TestCost(t *testing.T) {
	p := Prices{"claude-sonnet-4-5": {Input: 3, Output: 15, CachedInput: 0.3}, "gpt-4.1": {Input: 2, Output: 8}}
	u := Usage{Input: 1_000_000, Cached: 1_000_000, Output: 1_000_000}
	for _, c := range []struct {
		model string
		want  float64
		ok    bool
	}{{"claude-sonnet-4-5", 18.3, true}, {"openai/gpt-4.1", 12, true}, {"gpt-5", 0, false}} {
		got := p.Cost(c.model, u)
		if (got != nil) != c.ok || got != nil && *got != c.want {
			t.Errorf("%s: %v, want %v", c.model, got, c.want)
		}
	}
}

func TestTokens(t *testing.T) {
	k := &Tokens{Key: []byte("k")}
	tok := k.Mint("run_abc")
	if id, ok := k.Run(tok); !ok || id != "run_abc" {
		t.Fatal(tok)
	}
	for _, bad := range []string{"", "fgw_", "fgw_run_abc", tok + "x", "fgw_run_other." + strings.Split(tok, ".")[1], (&Tokens{Key: []byte("other")}).Mint("run_abc")} {
		if _, ok := k.Run(bad); ok {
			t.Errorf("%q taken", bad)
		}
	}
	if _, ok := (&Tokens{}).Run((&Tokens{}).Mint("r")); ok {
		t.Error("a token under no key")
	}
}

// FuzzUsage: whatever a provider (or something in between) sends, the
// readers hold at most their bounds, and never report negative counts.
func FuzzUsage(f *testing.F) {
	for _, c := range usageCases {
		f.Add(c.provider, c.body, 7)
	}
	f.Fuzz(func(t *testing.T, provider, body string, piece int) {
		piece = max(1, piece%64)
		for _, sink := range []usageSink{&sseUsage{provider: provider}, &jsonUsage{provider: provider}} {
			for b := body; b != ""; {
				n := min(piece, len(b))
				sink.Write([]byte(b[:n]))
				b = b[n:]
			}
			if u := sink.Usage(); u.Input < 0 || u.Output < 0 || u.Cached < 0 {
				t.Fatalf("%+v", u)
			}
		}
	})
}
