// Package factory is the domain: the records users see (factories,
// webhooks, automations, runs and their states, deliveries and their
// labels, API keys and scopes, the status of a factory), the limits the
// specification sets, IDs, and the errors every layer speaks. It depends on
// the standard library only, so that every other package, the Go client
// included, can use it without linking the store, git or the agent
// protocol (TestDependencies keeps it so).
//
// The packages below it are one concern each: schema (definition files and
// their validation), reconciler (sources → load → plan → apply), store (the
// pebble state store, which persists these records), runtime (runs),
// ingress, server (the HTTP listener) and cmd/factory (the command line).
package factory

import "time"

// Limits of the seed specification (section 8) and of the definition format.
const (
	// MaxWebhooksPerFactory: seed-spec §8 "Webhooks per factory: 20".
	MaxWebhooksPerFactory = 20
	// MaxDefinitionFileBytes: docs/spec/definitions.md "a file over 1 MiB" is refused.
	MaxDefinitionFileBytes = 1 << 20
	// MaxRevisionFiles and MaxRevisionBytes bound one revision of a
	// factory repository in all: a commit of many large files cannot make
	// a reader hold more (the per-file limit alone allowed 300 files of
	// 1 MiB, 523 MB of memory to dry-run).
	MaxRevisionFiles = 5_000
	MaxRevisionBytes = 32 << 20
	// MaxYAMLNodes bounds a YAML document after alias expansion, so that an
	// alias bomb is refused before it is expanded (docs/spec/definitions.md).
	MaxYAMLNodes = 100_000
	// MaxWebhookBodyBytes: seed-spec §8 "Webhook request body: 256 KB" (docs/spec/ingress.md: 262,144 bytes).
	MaxWebhookBodyBytes = 256 << 10
	// DeliveriesPerMinute: seed-spec §8 "60 per minute, then 429 with Retry-After".
	DeliveriesPerMinute = 60
	// FailedAuthPerMinute: docs/spec/ingress.md, the failed-auth budget per webhook and client.
	FailedAuthPerMinute = 10
	// RejectedPerMinute bounds the refused requests (401, 400, 413) each
	// logged per webhook and client: past it a client is answered 429 and
	// its refusals are counted, not logged, so that no sender can fill the
	// disk or bury real deliveries in the log.
	RejectedPerMinute = 30
	// SignatureMaxAge: seed-spec §5.3 and §8, "Signature age accepted: 5 minutes".
	SignatureMaxAge = 5 * time.Minute
	// DeliveryLogKeep and DeliveryLogAge: seed-spec §6.5, "at least the most
	// recent 50 deliveries and 7 days of history".
	DeliveryLogKeep = 50
	DeliveryLogAge  = 7 * 24 * time.Hour
	// FilterMaxDepth, FilterMaxKeys (leaf fields in all), FilterMaxValues
	// (per set): docs/spec/filters.md, as docs/spec/v1alpha1.md corrects them.
	FilterMaxDepth  = 10
	FilterMaxKeys   = 64
	FilterMaxValues = 32
	// GeneratedSecretBytes: docs/spec/definitions.md, generated secrets carry at least
	// 32 URL-safe characters (token, url_token) or 32 random bytes (Standard Webhooks).
	GeneratedSecretBytes = 32
	// UIDRandomBytes: docs/spec/definitions.md, UIDs carry at least 96 random bits.
	UIDRandomBytes = 15
	// MinScheduleInterval: a schedule fires at most once a minute, as cron
	// does (five fields cannot say more often); an @every shorter is
	// refused, in files and through the Agents API.
	MinScheduleInterval = time.Minute
	// MaxSchedulesPerFactory bounds the schedule triggers of a factory's
	// automations, and MaxSchedulesWithoutFactory the Agents API's
	// schedules, which belong to no factory, on one server. The server's
	// configuration may set others (schedules.maxPerFactory,
	// schedules.maxWithoutFactory).
	MaxSchedulesPerFactory     = 100
	MaxSchedulesWithoutFactory = 100
	// MaxMessageBytes, MaxTurnMessages, MaxTurnMessageBytes,
	// MaxRunMessages and MaxRunMessageBytes bound what an agent's output
	// makes the server keep (docs/security.md): a status message (a line
	// of an exec agent's stdout, a line of an ACP agent's text) is cut at
	// MaxMessageBytes; a turn keeps at most MaxTurnMessages of them and
	// MaxTurnMessageBytes in all, a run MaxRunMessages and
	// MaxRunMessageBytes; the rest are dropped, said once on the timeline
	// and counted in the turn's end. (122 MB of output once made a store
	// of 1.2 GB and a timeline of 1.46 GB.)
	MaxMessageBytes     = 16 << 10
	MaxTurnMessages     = 5_000
	MaxTurnMessageBytes = 4 << 20
	MaxRunMessages      = 20_000
	MaxRunMessageBytes  = 16 << 20
	// TimelinePage is the most entries one read of a run's timeline or
	// conversation returns (the API's limit, the dashboard's run page).
	TimelinePage = 500
)

// OutputLimited heads the timeline's note that a turn's status messages
// passed their bounds and the rest are not kept.
const OutputLimited = "[output limit] "
