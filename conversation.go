package factory

import (
	"strconv"
	"strings"
	"time"
)

// Conversation is a run's turns as the agent's session streamed them
// (GET /v1/agent/runs/{id}/conversation): each turn's prompt (the run's
// prompt, then each follow-up), the agent's messages, its tool calls and
// plans, and how the turn ended. Steps are the same turns as the newest
// SDKs type a conversation (ConversationStep); Turns stay for older
// clients.
type Conversation struct {
	RunID          string             `json:"run_id"`
	ConversationID string             `json:"conversation_id"`
	Steps          []ConversationStep `json:"steps"`
	Turns          []ConversationTurn `json:"turns"`
}

// ConversationStep is one turn as a step of the SDKs' conversation: its
// instruction (description), its messages in order, and how it ended
// (summary). A turn delegates no work to others here: steps is empty.
type ConversationStep struct {
	ID          string             `json:"id"`
	Description string             `json:"description,omitempty"`
	Messages    []StepMessage      `json:"messages"`
	Steps       []ConversationStep `json:"steps"`
	StartedAt   *time.Time         `json:"started_at,omitempty"`
	CompletedAt *time.Time         `json:"completed_at,omitempty"`
	Summary     string             `json:"summary,omitempty"`
}

// StepMessage is one message of a step: role user, assistant, tool or
// system, and its content blocks: {type: text, text} for what was said,
// {type: event, name, data} for the rest (a tool call as the agent
// reported it, a plan, a permission decision, the end of the turn).
type StepMessage struct {
	Role      string           `json:"role"`
	Content   []map[string]any `json:"content"`
	Timestamp time.Time        `json:"timestamp"`
}

// StepsOf are a run's turns as conversation steps.
func StepsOf(runID string, turns []ConversationTurn) []ConversationStep {
	out := make([]ConversationStep, 0, len(turns))
	for _, t := range turns {
		st := ConversationStep{ID: derivedUUID("step\x00" + runID + "\x00" + strconv.Itoa(t.Index)), Description: t.Prompt,
			Messages: []StepMessage{}, Steps: []ConversationStep{}, StartedAt: t.StartedAt, CompletedAt: t.EndedAt}
		for _, m := range t.Messages {
			sm := stepMessage(m)
			if m.Kind == "result" {
				st.Summary = m.Text
				sm.Content[0]["data"].(map[string]any)["state"] = t.State
			}
			st.Messages = append(st.Messages, sm)
		}
		if st.StartedAt == nil && len(t.Messages) > 0 {
			at := t.Messages[0].OccurredAt
			st.StartedAt = &at
		}
		out = append(out, st)
	}
	return out
}

// stepMessage is one of a turn's messages as the SDKs' message.
func stepMessage(m ConversationMessage) StepMessage {
	text := func(role string) StepMessage {
		return StepMessage{Role: role, Content: []map[string]any{{"type": "text", "text": m.Text}}, Timestamp: m.OccurredAt}
	}
	event := func(role, name string, data map[string]any) StepMessage {
		return StepMessage{Role: role, Content: []map[string]any{{"type": "event", "name": name, "data": data}}, Timestamp: m.OccurredAt}
	}
	switch m.Kind {
	case "prompt", "followup":
		return text("user")
	case "tool_call":
		return event("tool", "tool_call", map[string]any{"text": m.Text})
	case "plan":
		return event("assistant", "plan", map[string]any{"text": m.Text})
	case "permission_decision":
		return event("system", "permission_decision", map[string]any{"text": m.Text})
	case "result":
		return event("system", "turn_ended", map[string]any{"message": m.Text})
	}
	if m.Role == "system" {
		return text("system")
	}
	return text("assistant")
}

// ConversationTurn is one turn.
type ConversationTurn struct {
	Index     int                   `json:"index"`
	Prompt    string                `json:"prompt"`
	StartedAt *time.Time            `json:"started_at"`
	EndedAt   *time.Time            `json:"ended_at"`
	State     RunState              `json:"state,omitempty"`
	Messages  []ConversationMessage `json:"messages"`
	// Continued marks a turn that began on an earlier page of the
	// conversation (its prompt is there).
	Continued bool `json:"continued,omitempty"`
}

// ConversationMessage is one entry of a turn: role user, agent, tool or
// system; kind prompt, followup, message, tool_call, plan or result.
type ConversationMessage struct {
	Role       string    `json:"role"`
	Kind       string    `json:"kind"`
	Text       string    `json:"text"`
	OccurredAt time.Time `json:"occurred_at"`
}

// BuildConversation reads a run's conversation from its timeline.
// Follow-ups appear when their turn starts (a queued one is not yet part
// of the conversation).
func BuildConversation(r *Run, events []*RunEvent) Conversation {
	c, _ := BuildConversationPage(r, events, ConversationState{})
	return c
}

// ConversationState is where a page of a conversation ends: the turn then
// in progress, which the next page continues (it travels in the page's
// cursor).
type ConversationState struct {
	Turn       int        `json:"t,omitempty"` // its index; 0 before the first
	StartedAt  *time.Time `json:"s,omitempty"`
	EndedAt    *time.Time `json:"e,omitempty"`
	State      RunState   `json:"st,omitempty"`
	Dispatched bool       `json:"d,omitempty"`
}

// BuildConversationPage reads a page of a run's conversation from a page
// of its timeline that begins where from says the last one ended: a turn
// in progress there is the page's first, Continued (its prompt was on an
// earlier page), unless nothing of it is on this one. It returns where the
// page ends.
func BuildConversationPage(r *Run, events []*RunEvent, from ConversationState) (Conversation, ConversationState) {
	c := Conversation{RunID: r.ID, ConversationID: r.Conversation(), Turns: []ConversationTurn{}}
	var cur *ConversationTurn
	if from.Turn > 0 {
		c.Turns = append(c.Turns, ConversationTurn{Index: from.Turn, Continued: true, StartedAt: from.StartedAt, EndedAt: from.EndedAt,
			State: from.State, Messages: []ConversationMessage{}})
		cur = &c.Turns[0]
	}
	add := func(role, kind, text string, at time.Time) {
		if cur != nil {
			cur.Messages = append(cur.Messages, ConversationMessage{Role: role, Kind: kind, Text: text, OccurredAt: at})
		}
	}
	// A turn on a worker opens when it is handed over (dispatched), and
	// starts when its agent does; a turn here opens as it starts.
	dispatched := from.Dispatched
	for _, e := range events {
		switch e.Kind {
		case "created":
			c.Turns = append(c.Turns, ConversationTurn{Index: 1, Prompt: r.Prompt, Messages: []ConversationMessage{}})
			cur = &c.Turns[len(c.Turns)-1]
			add("user", "prompt", r.Prompt, e.Time)
		case "dispatched", "started":
			if e.Kind == "started" && dispatched && cur != nil {
				at := e.Time
				cur.StartedAt, dispatched = &at, false
				continue
			}
			if cur == nil || cur.StartedAt != nil || cur.EndedAt != nil {
				c.Turns = append(c.Turns, ConversationTurn{Index: nextIndex(cur), Prompt: e.Message, Messages: []ConversationMessage{}})
				cur = &c.Turns[len(c.Turns)-1]
				if e.Message != "" {
					add("user", "followup", e.Message, e.Time)
				}
			}
			if dispatched = e.Kind == "dispatched"; !dispatched {
				at := e.Time
				cur.StartedAt = &at
			}
		case "message":
			role, kind, text := messageRole(e.Message)
			add(role, kind, text, e.Time)
		case "finished":
			dispatched = false
			if cur != nil {
				at := e.Time
				cur.EndedAt, cur.State = &at, e.State
				add("system", "result", e.Message, e.Time)
			}
		}
	}
	end := ConversationState{Dispatched: dispatched}
	if cur != nil {
		end.Turn, end.StartedAt, end.EndedAt, end.State = cur.Index, cur.StartedAt, cur.EndedAt, cur.State
	}
	if len(c.Turns) > 0 && c.Turns[0].Continued && len(c.Turns[0].Messages) == 0 && sameTime(c.Turns[0].StartedAt, from.StartedAt) {
		c.Turns = c.Turns[1:] // nothing of it on this page
	}
	c.Steps = StepsOf(r.ID, c.Turns)
	return c, end
}

// nextIndex is the index of the turn after cur.
func nextIndex(cur *ConversationTurn) int {
	if cur == nil {
		return 1
	}
	return cur.Index + 1
}

func sameTime(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}

// messageRole tells a status message's speaker from the prefixes the
// executors write: "[tool] " for tool calls and their results, "[plan] "
// for plans, "artifacts: " for the server's own notes.
func messageRole(msg string) (role, kind, text string) {
	switch {
	case strings.HasPrefix(msg, "[tool] "):
		return "tool", "tool_call", strings.TrimPrefix(msg, "[tool] ")
	case strings.HasPrefix(msg, "[permission] "):
		return "system", "permission_decision", strings.TrimPrefix(msg, "[permission] ")
	case strings.HasPrefix(msg, "[plan] "):
		return "agent", "plan", strings.TrimPrefix(msg, "[plan] ")
	case strings.HasPrefix(msg, "artifacts: "):
		return "system", "message", msg
	}
	return "agent", "message", msg
}
