package factory

// TestResult is the Test filter action's answer (docs/spec/filters.md): would a
// stored delivery trigger an automation, and why.
type TestResult struct {
	WouldTrigger bool         `json:"would_trigger"`
	WebhookCheck WebhookCheck `json:"webhook_check"`
	PayloadCheck PayloadCheck `json:"payload_check"`
	// Note explains a verdict the two checks do not: a delivery that
	// reaches no automation (an unlisted repository, a ping), a disabled
	// automation.
	Note string `json:"note,omitempty"`
}

// WebhookCheck says whether the delivery came through a selected, enabled
// webhook.
type WebhookCheck struct {
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

// PayloadCheck lists each condition's outcome.
type PayloadCheck struct {
	Passed bool        `json:"passed"`
	Keys   []KeyResult `json:"keys"`
}

// KeyResult is one condition's outcome, for the Test filter action: which
// key stopped a delivery (docs/spec/filters.md).
type KeyResult struct {
	Path          string `json:"path"`
	Operator      string `json:"operator"`
	Expected      any    `json:"expected"`
	Actual        any    `json:"actual,omitempty"`
	ActualPresent bool   `json:"actual_present"`
	Passed        bool   `json:"passed"`
}
