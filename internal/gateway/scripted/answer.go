package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

var ids atomic.Int64

func nextID(prefix string) string { return fmt.Sprintf("%s_%06d", prefix, ids.Add(1)) }

// stream writes server-sent events, flushed one by one, pausing between
// them.
type stream struct {
	w         http.ResponseWriter
	pace      time.Duration
	n         int
	hold      <-chan struct{}
	holdAfter int
}

func newStream(w http.ResponseWriter, reply Reply) *stream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &stream{w: w, pace: reply.Pace, hold: reply.Hold, holdAfter: reply.HoldAfter}
}

// event writes one event (name may be empty) with v as its JSON data.
func (s *stream) event(name string, v any) {
	if s.n > 0 && s.pace > 0 {
		time.Sleep(s.pace)
	}
	if s.hold != nil && s.n == s.holdAfter {
		<-s.hold
	}
	s.n++
	b, _ := json.Marshal(v)
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *stream) raw(line string) {
	fmt.Fprintf(s.w, "data: %s\n\n", line)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// answer writes the reply in the API's shape.
func answer(w http.ResponseWriter, req *Request, reply Reply) {
	switch req.API {
	case "messages":
		answerMessages(w, req, reply)
	case "responses":
		answerResponses(w, req, reply)
	case "chat":
		answerChat(w, req, reply)
	default:
		answerGemini(w, req, reply)
	}
}

func argsJSON(in map[string]any) string {
	if in == nil {
		in = map[string]any{}
	}
	b, _ := json.Marshal(in)
	return string(b)
}

// Anthropic Messages.

func anthropicUsage(u Usage) map[string]any {
	return map[string]any{"input_tokens": u.Input, "output_tokens": u.Output, "cache_read_input_tokens": u.Cached, "cache_creation_input_tokens": 0}
}

func answerMessages(w http.ResponseWriter, req *Request, reply Reply) {
	stop := "end_turn"
	if len(reply.Tools) > 0 {
		stop = "tool_use"
	}
	var content []map[string]any
	if reply.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": reply.Text})
	}
	for _, t := range reply.Tools {
		content = append(content, map[string]any{"type": "tool_use", "id": nextID("toolu"), "name": t.Name, "input": orEmpty(t.Input)})
	}
	id := nextID("msg")
	if !req.Stream {
		writeJSON(w, map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": orEmptyList(content),
			"stop_reason": stop, "stop_sequence": nil, "usage": anthropicUsage(reply.Usage)})
		return
	}
	s := newStream(w, reply)
	start := anthropicUsage(Usage{Input: reply.Usage.Input, Cached: reply.Usage.Cached, Output: 1})
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message", "role": "assistant",
		"model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start}})
	for i, c := range content {
		if c["type"] == "text" {
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, piece := range chunks(reply.Text, reply.ChunkSize) {
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": piece}})
			}
		} else {
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use",
				"id": c["id"], "name": c["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(c["input"])
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	s.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": reply.Usage.Output}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func orEmptyList(l []map[string]any) []map[string]any {
	if l == nil {
		return []map[string]any{}
	}
	return l
}

// OpenAI Responses.

func responsesUsage(u Usage) map[string]any {
	return map[string]any{"input_tokens": u.Input + u.Cached, "input_tokens_details": map[string]any{"cached_tokens": u.Cached},
		"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": u.Input + u.Cached + u.Output}
}

// responsesOutput is the reply's output items.
func responsesOutput(req *Request, reply Reply) []map[string]any {
	var out []map[string]any
	if reply.Text != "" {
		out = append(out, map[string]any{"type": "message", "id": nextID("msg"), "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}}})
	}
	for _, t := range reply.Tools {
		if req.toolKinds[t.Name] == "custom" {
			in, _ := t.Input["input"].(string)
			out = append(out, map[string]any{"type": "custom_tool_call", "id": nextID("ctc"), "call_id": nextID("call"), "name": t.Name,
				"input": in, "status": "completed"})
			continue
		}
		out = append(out, map[string]any{"type": "function_call", "id": nextID("fc"), "call_id": nextID("call"), "name": t.Name,
			"arguments": argsJSON(t.Input), "status": "completed"})
	}
	return out
}

func answerResponses(w http.ResponseWriter, req *Request, reply Reply) {
	id := nextID("resp")
	out := responsesOutput(req, reply)
	resp := func(status string, output []map[string]any, usage any) map[string]any {
		return map[string]any{"id": id, "object": "response", "created_at": time.Now().Unix(), "status": status, "model": req.Model,
			"output": orEmptyList(output), "usage": usage}
	}
	if !req.Stream {
		writeJSON(w, resp("completed", out, responsesUsage(reply.Usage)))
		return
	}
	s := newStream(w, reply)
	seq := 0
	ev := func(typ string, v map[string]any) {
		v["type"], v["sequence_number"] = typ, seq
		seq++
		s.event(typ, v)
	}
	ev("response.created", map[string]any{"response": resp("in_progress", nil, nil)})
	ev("response.in_progress", map[string]any{"response": resp("in_progress", nil, nil)})
	for i, item := range out {
		streamResponsesItem(ev, i, item, reply)
	}
	ev("response.completed", map[string]any{"response": resp("completed", out, responsesUsage(reply.Usage))})
}

// streamResponsesItem streams one output item: added, its deltas, done.
func streamResponsesItem(ev func(string, map[string]any), i int, item map[string]any, reply Reply) {
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	added["status"] = "in_progress"
	switch item["type"] {
	case "message":
		added["content"] = []any{}
		ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
		ev("response.content_part.added", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		for _, piece := range chunks(reply.Text, reply.ChunkSize) {
			ev("response.output_text.delta", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "delta": piece})
		}
		ev("response.output_text.done", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "text": reply.Text})
		ev("response.content_part.done", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}})
	case "function_call":
		added["arguments"] = ""
		ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
		ev("response.function_call_arguments.delta", map[string]any{"item_id": item["id"], "output_index": i, "delta": item["arguments"]})
		ev("response.function_call_arguments.done", map[string]any{"item_id": item["id"], "output_index": i, "arguments": item["arguments"]})
	default:
		added["input"] = ""
		ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
		ev("response.custom_tool_call_input.delta", map[string]any{"item_id": item["id"], "output_index": i, "delta": item["input"]})
		ev("response.custom_tool_call_input.done", map[string]any{"item_id": item["id"], "output_index": i, "input": item["input"]})
	}
	ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
}

// OpenAI Chat Completions.

func chatUsage(u Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.Input + u.Cached, "completion_tokens": u.Output, "total_tokens": u.Input + u.Cached + u.Output,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.Cached}}
}

func answerChat(w http.ResponseWriter, req *Request, reply Reply) {
	id := nextID("chatcmpl")
	finish := "stop"
	var calls []map[string]any
	for i, t := range reply.Tools {
		finish = "tool_calls"
		calls = append(calls, map[string]any{"index": i, "id": nextID("call"), "type": "function",
			"function": map[string]any{"name": t.Name, "arguments": argsJSON(t.Input)}})
	}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": reply.Text}
		if calls != nil {
			msg["tool_calls"] = calls
		}
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": chatUsage(reply.Usage)})
		return
	}
	s := newStream(w, reply)
	chunk := func(delta map[string]any, finish any) {
		s.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, piece := range chunks(reply.Text, reply.ChunkSize) {
		chunk(map[string]any{"content": piece}, nil)
	}
	if calls != nil {
		chunk(map[string]any{"tool_calls": calls}, nil)
	}
	chunk(map[string]any{}, finish)
	if req.includeUsage {
		s.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{}, "usage": chatUsage(reply.Usage)})
	}
	s.raw("[DONE]")
}

// Gemini.

func geminiUsage(u Usage, final bool) map[string]any {
	m := map[string]any{"promptTokenCount": u.Input + u.Cached, "totalTokenCount": u.Input + u.Cached}
	if u.Cached > 0 {
		m["cachedContentTokenCount"] = u.Cached
	}
	if final {
		m["candidatesTokenCount"], m["totalTokenCount"] = u.Output, u.Input+u.Cached+u.Output
	}
	return m
}

func answerGemini(w http.ResponseWriter, req *Request, reply Reply) {
	pieces := chunks(reply.Text, reply.ChunkSize)
	if !req.Stream && reply.Text != "" {
		pieces = []string{reply.Text} // one text part, as the API answers
	}
	var parts []any
	for _, piece := range pieces {
		parts = append(parts, map[string]any{"text": piece})
	}
	for _, t := range reply.Tools {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": t.Name, "args": orEmpty(t.Input)}})
	}
	if len(parts) == 0 {
		parts = []any{map[string]any{"text": ""}}
	}
	chunk := func(ps []any, final bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": ps}, "index": 0}
		if final {
			cand["finishReason"] = "STOP"
		}
		return map[string]any{"candidates": []any{cand}, "usageMetadata": geminiUsage(reply.Usage, final), "modelVersion": req.Model,
			"responseId": nextID("gem")}
	}
	if !req.Stream {
		writeJSON(w, chunk(parts, true))
		return
	}
	var out []map[string]any
	for i, p := range parts {
		out = append(out, chunk([]any{p}, i == len(parts)-1))
	}
	if req.sse {
		s := newStream(w, reply)
		for _, c := range out {
			s.event("", c)
		}
		return
	}
	// A JSON array, streamed element by element.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	for i, c := range out {
		if i > 0 && reply.Pace > 0 {
			time.Sleep(reply.Pace)
		}
		b, _ := json.Marshal(c)
		sep := ",\r\n"
		if i == 0 {
			sep = "["
		}
		fmt.Fprintf(w, "%s%s", sep, b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	fmt.Fprint(w, "]")
}
