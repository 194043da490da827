package factory

import "encoding/json"

// PageInfo says whether more items follow a page, and where
// (docs/spec/agents-api.md).
type PageInfo struct {
	HasNextPage bool   `json:"has_next_page"`
	NextCursor  string `json:"next_cursor,omitempty"`
}

// DeliveryView is a delivery as the admin API shows it; Payload is set when
// one delivery of the Accepted label is read.
type DeliveryView struct {
	Delivery
	Payload json.RawMessage `json:"payload,omitempty"`
}

// SecretResponse is a created or rotated secret's metadata and, once, a
// value the server generated.
type SecretResponse struct {
	Secret *Secret `json:"secret"`
	Value  string  `json:"value,omitempty"`
}
