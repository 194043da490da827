package factory

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Budget bounds what a run may consume (docs/spec/harnesses.md, an
// extension): the tokens of its model calls, their cost in USD, and the
// time its agent runs. A zero limit is no limit.
type Budget struct {
	MaxTokens   int64   `json:"maxTokens,omitempty"`
	MaxCostUSD  float64 `json:"maxCostUsd,omitempty"`
	MaxDuration string  `json:"maxDuration,omitempty"` // a duration: 30m, 1h30m
}

// Budget limits, as the timeline names them.
const (
	LimitTokens   = "maxTokens"
	LimitCost     = "maxCostUsd"
	LimitDuration = "maxDuration"
)

// Duration is maxDuration, 0 when unset (the schema has checked it).
func (b *Budget) Duration() time.Duration {
	if b == nil {
		return 0
	}
	d, err := time.ParseDuration(b.MaxDuration)
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// Tighter is the budget of both: each limit the smaller of the two (a
// limit one leaves unset is the other's). nil when neither has one.
func (b *Budget) Tighter(o *Budget) *Budget {
	switch {
	case b == nil:
		return o
	case o == nil:
		return b
	}
	out := *b
	if o.MaxTokens > 0 && (out.MaxTokens == 0 || o.MaxTokens < out.MaxTokens) {
		out.MaxTokens = o.MaxTokens
	}
	if o.MaxCostUSD > 0 && (out.MaxCostUSD == 0 || o.MaxCostUSD < out.MaxCostUSD) {
		out.MaxCostUSD = o.MaxCostUSD
	}
	if d := o.Duration(); d > 0 && (out.Duration() == 0 || d < out.Duration()) {
		out.MaxDuration = o.MaxDuration
	}
	return &out
}

// Spent is what a run consumed against its budget: its model calls'
// tokens and cost (through the gateway), and its agents' time over its
// turns.
type Spent struct {
	Calls     int           `json:"calls"`
	Tokens    int64         `json:"tokens"`
	CostUSD   float64       `json:"cost_usd"`
	AgentTime time.Duration `json:"agent_time_ns"`
	// Unpriced counts the calls of models the price table has not: their
	// tokens count, their cost is unknown.
	Unpriced int        `json:"unpriced,omitempty"`
	LastCall *time.Time `json:"last_call,omitempty"`
}

// BudgetExceeded is the limit a run ran past: which, its maximum, and
// what the run had used.
type BudgetExceeded struct {
	Limit string    `json:"limit"`
	Max   string    `json:"max"`
	Used  string    `json:"used"`
	At    time.Time `json:"at"`
}

// Message says it as the run's status message does.
func (e *BudgetExceeded) Message() string {
	return fmt.Sprintf("the run's budget ran out: %s %s (used %s)", e.Limit, e.Max, e.Used)
}

// Exceeded says which of the budget's limits what was spent has reached
// (tokens, then cost, then time, with elapsed the time of the turn in
// progress); nil while every one leaves room.
func (b *Budget) Exceeded(s *Spent, elapsed time.Duration) *BudgetExceeded {
	if b == nil {
		return nil
	}
	var sp Spent
	if s != nil {
		sp = *s
	}
	now := time.Now().UTC()
	switch {
	case b.MaxTokens > 0 && sp.Tokens >= b.MaxTokens:
		return &BudgetExceeded{Limit: LimitTokens, Max: strconv.FormatInt(b.MaxTokens, 10), Used: strconv.FormatInt(sp.Tokens, 10), At: now}
	case b.MaxCostUSD > 0 && sp.CostUSD >= b.MaxCostUSD:
		return &BudgetExceeded{Limit: LimitCost, Max: usd(b.MaxCostUSD), Used: usd(sp.CostUSD), At: now}
	case b.Duration() > 0 && sp.AgentTime+elapsed >= b.Duration():
		return &BudgetExceeded{Limit: LimitDuration, Max: b.Duration().String(), Used: (sp.AgentTime + elapsed).Round(time.Second).String(), At: now}
	}
	return nil
}

func usd(v float64) string { return "$" + strconv.FormatFloat(v, 'f', -1, 64) }

// ModelCall is one call of a run's agent to its model, through the
// gateway: the model, the tokens the provider reported (input without the
// cached part, cached input, output), the cost by the configured prices
// (nil: the model has no price), how long it took and how it ended.
type ModelCall struct {
	Seq          int       `json:"seq"`
	Time         time.Time `json:"time"`
	Provider     string    `json:"provider"`
	API          string    `json:"api"`
	Model        string    `json:"model"`
	Stream       bool      `json:"stream"`
	Status       int       `json:"status"`
	LatencyMS    int64     `json:"latency_ms"`
	FirstByteMS  int64     `json:"first_byte_ms"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	CachedTokens int64     `json:"cached_tokens"`
	CostUSD      *float64  `json:"cost_usd"`
	// Error is why the gateway answered the call itself (a budget run
	// out, a provider with no key).
	Error string `json:"error,omitempty"`
}

// Tokens are the call's tokens in all.
func (c *ModelCall) Tokens() int64 { return c.InputTokens + c.OutputTokens + c.CachedTokens }

// Token categories of a run's request_usage.
const (
	TokensInput       = "input"
	TokensOutput      = "output"
	TokensCachedInput = "cached_input"
)

// UsageBYOK is the usage type of calls through the gateway: the
// operator's own keys.
const UsageBYOK = "byok"

// AddCall adds a model call to what the run consumed: its request_usage
// (tokens per model and category, the inference cost) and what it spent
// against its budget.
func (r *Run) AddCall(c *ModelCall) {
	if r.Spent == nil {
		r.Spent = &Spent{}
	}
	s := r.Spent
	s.Calls++
	s.Tokens += c.Tokens()
	at := c.Time
	s.LastCall = &at
	if c.CostUSD != nil {
		s.CostUSD += *c.CostUSD
	} else if c.Tokens() > 0 {
		s.Unpriced++
	}
	if c.Tokens() == 0 {
		return
	}
	if r.Usage == nil {
		r.Usage = &RequestUsage{}
	}
	u := r.Usage
	total := c.Tokens()
	if u.TotalTokens != nil {
		total += *u.TotalTokens
	}
	u.TotalTokens = &total
	if c.CostUSD != nil {
		cost := *c.CostUSD
		if u.InferenceCostUSD != nil {
			cost += *u.InferenceCostUSD
		}
		cost = math.Round(cost*1e9) / 1e9
		u.InferenceCostUSD = &cost
	}
	i := 0
	for i < len(u.ModelTokenUsage) && u.ModelTokenUsage[i].ModelID != c.Model {
		i++
	}
	if i == len(u.ModelTokenUsage) {
		u.ModelTokenUsage = append(u.ModelTokenUsage, ModelTokenUsage{ModelID: c.Model, UsageType: UsageBYOK, TokensByCategory: map[string]int64{}})
	}
	m := &u.ModelTokenUsage[i]
	m.TotalTokens += c.Tokens()
	m.TokensByCategory[TokensInput] += c.InputTokens
	m.TokensByCategory[TokensOutput] += c.OutputTokens
	m.TokensByCategory[TokensCachedInput] += c.CachedTokens
}
