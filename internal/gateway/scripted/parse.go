package scripted

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// parse reads a call of an API into a Request.
func parse(api string, r *http.Request, body []byte) (*Request, error) {
	req := &Request{API: api, Body: body, Auth: authOf(r), toolKinds: map[string]string{}}
	var err error
	switch api {
	case "messages":
		req.Provider = Anthropic
		err = parseMessages(req, body)
	case "responses":
		req.Provider = OpenAI
		err = parseResponses(req, body)
	case "chat":
		req.Provider = OpenAI
		err = parseChat(req, body)
	default:
		req.Provider = Gemini
		err = parseGemini(req, r, body)
	}
	return req, err
}

// authOf is the credential a call came with.
func authOf(r *http.Request) string {
	for _, h := range []string{"x-api-key", "x-goog-api-key"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return v
	}
	return r.URL.Query().Get("key")
}

// text is a message's content as text: a string, or the text of its
// blocks (type text, input_text or output_text).
func text(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(content, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == "text" || bl.Type == "input_text" || bl.Type == "output_text" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

func parseMessages(req *Request, body []byte) error {
	var m struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Tools    []struct{ Name string }
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return err
	}
	req.Model, req.Stream = m.Model, m.Stream
	for _, t := range m.Tools {
		req.Tools = append(req.Tools, t.Name)
	}
	for _, msg := range m.Messages {
		if msg.Role != "user" {
			continue
		}
		var blocks []struct{ Type string }
		_ = json.Unmarshal(msg.Content, &blocks)
		for _, b := range blocks {
			if b.Type == "tool_result" {
				req.ToolResults++
			}
		}
		if t := text(msg.Content); t != "" {
			req.UserTexts = append(req.UserTexts, t)
		}
	}
	return nil
}

func parseResponses(req *Request, body []byte) error {
	var m struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
		Tools  []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return err
	}
	req.Model, req.Stream = m.Model, m.Stream
	for _, t := range m.Tools {
		name := t.Name
		if name == "" {
			name = t.Type
		}
		req.Tools = append(req.Tools, name)
		req.toolKinds[name] = t.Type
	}
	var s string
	if json.Unmarshal(m.Input, &s) == nil {
		req.UserTexts = append(req.UserTexts, s)
		return nil
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(m.Input, &items); err != nil {
		return err
	}
	for _, it := range items {
		switch {
		case strings.HasSuffix(it.Type, "_call_output"):
			req.ToolResults++
		case it.Role == "user":
			if t := text(it.Content); t != "" {
				req.UserTexts = append(req.UserTexts, t)
			}
		}
	}
	return nil
}

func parseChat(req *Request, body []byte) error {
	var m struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
		Tools  []struct {
			Function struct{ Name string } `json:"function"`
		} `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return err
	}
	req.Model, req.Stream = m.Model, m.Stream
	req.includeUsage = m.StreamOptions != nil && m.StreamOptions.IncludeUsage
	for _, t := range m.Tools {
		req.Tools = append(req.Tools, t.Function.Name)
	}
	for _, msg := range m.Messages {
		switch msg.Role {
		case "tool":
			req.ToolResults++
		case "user":
			if t := text(msg.Content); t != "" {
				req.UserTexts = append(req.UserTexts, t)
			}
		}
	}
	return nil
}

func parseGemini(req *Request, r *http.Request, body []byte) error {
	p := r.URL.Path
	i := strings.LastIndex(p, "/models/")
	j := strings.LastIndexByte(p, ':')
	if i < 0 || j < i {
		return errors.New("not a model's path: " + p)
	}
	req.Model = p[i+len("/models/") : j]
	req.Stream = strings.HasSuffix(p, ":streamGenerateContent")
	req.sse = r.URL.Query().Get("alt") == "sse"
	var m struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text             *string         `json:"text"`
				FunctionResponse json.RawMessage `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct{ Name string } `json:"functionDeclarations"`
		} `json:"tools"`
		GenerationConfig struct {
			ResponseMimeType string `json:"responseMimeType"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return err
	}
	req.JSON = m.GenerationConfig.ResponseMimeType == "application/json"
	for _, t := range m.Tools {
		for _, f := range t.FunctionDeclarations {
			req.Tools = append(req.Tools, f.Name)
		}
	}
	for _, c := range m.Contents {
		if c.Role != "user" {
			continue
		}
		var b strings.Builder
		for _, part := range c.Parts {
			switch {
			case part.FunctionResponse != nil:
				req.ToolResults++
			case part.Text != nil:
				b.WriteString(*part.Text)
			}
		}
		if b.Len() > 0 {
			req.UserTexts = append(req.UserTexts, b.String())
		}
	}
	return nil
}
