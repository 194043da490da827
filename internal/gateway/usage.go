package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Usage is what a call consumed, as its provider reported it, in one
// shape: input tokens not read from a cache, cached input tokens, output
// tokens (reasoning included), and the model that answered.
type Usage struct {
	Model                 string
	Input, Cached, Output int64
	// Seen says a usage was reported at all.
	Seen bool
}

// usageDoc is any of the providers' documents that report usage: an
// Anthropic message (or its message_start and message_delta events), an
// OpenAI response (or its response.completed event) or chat completion
// (or its last chunk), a Gemini GenerateContentResponse.
type usageDoc struct {
	Type     string          `json:"type"`
	Model    string          `json:"model"`
	Usage    json.RawMessage `json:"usage"`
	Message  *usageDoc       `json:"message"`
	Response *usageDoc       `json:"response"`
	// Gemini's.
	ModelVersion  string `json:"modelVersion"`
	UsageMetadata *struct {
		Prompt     int64 `json:"promptTokenCount"`
		Candidates int64 `json:"candidatesTokenCount"`
		Cached     int64 `json:"cachedContentTokenCount"`
		Thoughts   int64 `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
}

// tokenCounts is a usage object of any of the providers' APIs.
type tokenCounts struct {
	// Anthropic Messages.
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_input_tokens"`
	// OpenAI Responses (input_tokens, output_tokens above).
	InputDetails *struct {
		Cached int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	// OpenAI Chat Completions.
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	PromptDetails    *struct {
		Cached int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// add reads one document's usage into u: the provider's own meaning of
// its counts turned into Usage's (Anthropic's input excludes cache reads;
// OpenAI's and Gemini's include them). A later document of a stream
// replaces what an earlier one said, except that an Anthropic
// message_delta's output (cumulative) keeps message_start's input.
func (u *Usage) add(provider string, d *usageDoc) {
	switch {
	case d.Message != nil: // Anthropic's message_start
		u.add(provider, d.Message)
		return
	case d.Response != nil: // OpenAI's response.completed (and .incomplete, .failed)
		u.add(provider, d.Response)
		return
	}
	if m := firstNonEmpty(d.Model, d.ModelVersion); m != "" {
		u.Model = strings.TrimPrefix(m, "models/")
	}
	if g := d.UsageMetadata; g != nil {
		u.Seen = true
		u.Cached = nonNegative(g.Cached)
		u.Input = nonNegative(g.Prompt - g.Cached)
		u.Output = nonNegative(g.Candidates) + nonNegative(g.Thoughts)
		return
	}
	if len(d.Usage) == 0 || bytes.Equal(d.Usage, []byte("null")) {
		return
	}
	var c tokenCounts
	if json.Unmarshal(d.Usage, &c) != nil {
		return
	}
	u.Seen = true
	switch {
	case provider == Anthropic && d.Type == "message_delta":
		u.Output = nonNegative(c.OutputTokens)
		if c.InputTokens > 0 { // newer API versions say it here too
			u.Input = nonNegative(c.InputTokens + c.CacheCreationTokens)
			u.Cached = nonNegative(c.CacheReadTokens)
		}
	case provider == Anthropic:
		u.Input = nonNegative(c.InputTokens + c.CacheCreationTokens)
		u.Cached = nonNegative(c.CacheReadTokens)
		u.Output = nonNegative(c.OutputTokens)
	case c.PromptTokens > 0 || c.CompletionTokens > 0: // Chat Completions
		cached := int64(0)
		if c.PromptDetails != nil {
			cached = c.PromptDetails.Cached
		}
		u.Cached = nonNegative(cached)
		u.Input = nonNegative(c.PromptTokens - cached)
		u.Output = nonNegative(c.CompletionTokens)
	default: // Responses
		cached := int64(0)
		if c.InputDetails != nil {
			cached = c.InputDetails.Cached
		}
		u.Cached = nonNegative(cached)
		u.Input = nonNegative(c.InputTokens - cached)
		u.Output = nonNegative(c.OutputTokens)
	}
}

func nonNegative(v int64) int64 { return max(v, 0) }

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// maxEventLine bounds one line of a stream the usage is read from: a
// longer line is passed on, not read.
const maxEventLine = 4 << 20

// sseUsage reads the usage of a stream of server-sent events as it
// passes, one line at a time: each data line that may report usage is a
// document of its own. It holds at most one line (maxEventLine).
type sseUsage struct {
	provider string
	u        Usage
	line     []byte
	skip     bool // the line being read is over maxEventLine
}

// Write takes the next bytes of the stream.
func (s *sseUsage) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.take(p)
			break
		}
		s.take(p[:i])
		s.endLine()
		p = p[i+1:]
	}
	return n, nil
}

func (s *sseUsage) take(p []byte) {
	if s.skip {
		return
	}
	if len(s.line)+len(p) > maxEventLine {
		s.skip, s.line = true, s.line[:0]
		return
	}
	s.line = append(s.line, p...)
}

// endLine reads a complete line.
func (s *sseUsage) endLine() {
	line := bytes.TrimRight(s.line, "\r")
	skip := s.skip
	s.line, s.skip = s.line[:0], false
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if skip || !ok {
		return
	}
	data = bytes.TrimSpace(data)
	// Only a document that may report usage is decoded: the stream's
	// deltas pass untouched.
	if !bytes.Contains(data, []byte(`"usage`)) {
		return
	}
	var d usageDoc
	if json.Unmarshal(data, &d) == nil {
		s.u.add(s.provider, &d)
	}
}

// Usage is the stream's usage so far (a last line without its newline
// read too).
func (s *sseUsage) Usage() Usage {
	if len(s.line) > 0 {
		s.endLine()
	}
	return s.u
}

// maxJSONBody bounds an answer that is one JSON document (not streamed)
// the usage is read from: a longer one is passed on, its usage unknown.
const maxJSONBody = 8 << 20

// jsonUsage reads the usage of an answer that is one JSON document (an
// object, or Gemini's array of chunks), keeping at most maxJSONBody of it.
type jsonUsage struct {
	provider string
	buf      bytes.Buffer
	over     bool
}

func (j *jsonUsage) Write(p []byte) (int, error) {
	if !j.over && j.buf.Len()+len(p) <= maxJSONBody {
		j.buf.Write(p)
	} else {
		j.over = true
		j.buf.Reset()
	}
	return len(p), nil
}

// Usage is the document's usage; none when it was over the bound or is
// not a document of the provider's.
func (j *jsonUsage) Usage() Usage {
	var u Usage
	if j.over {
		return u
	}
	return parseJSONUsage(j.provider, j.buf.Bytes())
}

// parseJSONUsage reads the usage of a JSON answer: an object, or an array
// of chunks (the last that reports usage wins).
func parseJSONUsage(provider string, b []byte) Usage {
	var u Usage
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var docs []usageDoc
		if json.Unmarshal(b, &docs) == nil {
			for i := range docs {
				u.add(provider, &docs[i])
			}
		}
		return u
	}
	var d usageDoc
	if json.Unmarshal(b, &d) == nil {
		u.add(provider, &d)
	}
	return u
}
