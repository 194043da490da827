package gateway

import (
	"math"
	"strings"
)

// Price is a model's price in USD per million tokens, per category
// (gateway.prices in the server's configuration). CachedInput, when 0,
// is Input's.
type Price struct {
	Input       float64 `json:"input"`
	Output      float64 `json:"output"`
	CachedInput float64 `json:"cachedInput,omitempty"`
}

// Prices are the prices by model.
type Prices map[string]Price

// Cost is what a call cost by the prices; nil for a model that has no
// price (its tokens are recorded, its cost is unknown). A model is looked
// up as the provider named it, then without a "models/" or provider
// prefix.
func (p Prices) Cost(model string, u Usage) *float64 {
	price, ok := p[model]
	if !ok {
		if _, bare, cut := strings.Cut(model, "/"); cut {
			price, ok = p[bare]
		}
	}
	if !ok {
		return nil
	}
	cached := price.CachedInput
	if cached == 0 {
		cached = price.Input
	}
	c := (float64(u.Input)*price.Input + float64(u.Cached)*cached + float64(u.Output)*price.Output) / 1e6
	c = math.Round(c*1e9) / 1e9 // to the nano-dollar: sums stay exact enough to compare
	return &c
}
