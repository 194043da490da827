package factory

import (
	"strings"
	"time"
)

// Chat is where an event of a chat or tracker happened (docs/spec/talkback.md):
// the thread, agent session or issue a run it starts reports to, and the
// message that asked. Each provider fills the fields it has:
//
//	         Slack          Linear              Jira            Teams
//	Team     team ID        -                   -               tenant ID
//	Site     -              -                   site URL        serviceUrl
//	Channel  channel ID     -                   -               conversation ID
//	Thread   thread_ts      agent session ID    -               reply chain ID
//	Issue    -              issue ID            issue key       -
//	Message  message ts     -                   -               activity ID
type Chat struct {
	// Key is the work item key (Slack's slack:<team>/<channel>/<thread_ts>,
	// ...): new activity on it continues the run it started.
	Key     string `json:"key,omitempty"`
	Team    string `json:"team,omitempty"`
	Site    string `json:"site,omitempty"`
	Channel string `json:"channel,omitempty"`
	Thread  string `json:"thread,omitempty"`
	Issue   string `json:"issue,omitempty"`
	Message string `json:"message,omitempty"`
	// Continues marks activity that continues its key's run whether or not
	// an automation matches it (a reply in a Slack or Teams thread, a
	// Linear prompted event); Text is what it says, the follow-up's message.
	Continues bool   `json:"continues,omitempty"`
	Text      string `json:"text,omitempty"`
}

// Target is the chat's place without the message's words: what a run keeps
// as its origin.
func (c Chat) Target() Chat {
	c.Continues, c.Text = false, ""
	return c
}

// MaxChatText bounds the words of a message an event keeps (the follow-up
// it becomes), in bytes.
const MaxChatText = 8 << 10

// Work item keys of chats and trackers (docs/spec/talkback.md).
func SlackKey(team, channel, threadTS string) string {
	return "slack:" + team + "/" + channel + "/" + threadTS
}

// LinearSessionKey is a Linear agent session's key; LinearIssueKey an issue's.
func LinearSessionKey(id string) string { return "linear:session/" + id }

// LinearIssueKey is a Linear issue's work item key.
func LinearIssueKey(id string) string { return "linear:" + id }

// JiraKey is a Jira issue's work item key: its site's host and its key.
func JiraKey(site, issueKey string) string {
	host := site
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	return "jira:" + strings.TrimRight(host, "/") + "/" + issueKey
}

// TeamsKey is a Teams reply chain's key: the conversation (without its
// ;messageid= part) and the chain's root message.
func TeamsKey(conversation, chain string) string {
	base, _, _ := strings.Cut(conversation, ";")
	return "teams:" + base + "/" + chain
}

// Talkback is what a run's write-back has said where the run came from
// (docs/spec/talkback.md): the message it reacted to, the last turn whose end it
// reported, a digest of its last report (an unchanged report is not sent
// again), and whether it gave up.
type Talkback struct {
	Reacted string `json:"reacted,omitempty"`
	// Ended is the run's Turns plus one when its end was last reported.
	Ended  int    `json:"ended,omitempty"`
	Digest string `json:"digest,omitempty"`
	// GaveUp: the write-back was given up for good (no credential).
	GaveUp bool `json:"gave_up,omitempty"`
}

// Integration types of factory.yaml (docs/spec/v1alpha1.md).
const (
	IntegrationSlack  = "slack"
	IntegrationLinear = "linear"
	IntegrationJira   = "jira"
	IntegrationTeams  = "microsoft-teams"
)

// Credentials are what a provider's API takes, by the managed secrets that
// hold them (never the values): factory.yaml's integration entries (an
// extension) or the server config's factories[].integrations.
type Credentials struct {
	// BotTokenSecret is Slack's bot token (xoxb-...).
	BotTokenSecret string `json:"botTokenSecret,omitempty"`
	// APIKeySecret is Linear's OAuth actor token or API key.
	APIKeySecret string `json:"apiKeySecret,omitempty"`
	// BaseURL, EmailSecret and APITokenSecret are a Jira Cloud site and
	// the account that comments there.
	BaseURL        string `json:"baseURL,omitempty"`
	EmailSecret    string `json:"emailSecret,omitempty"`
	APITokenSecret string `json:"apiTokenSecret,omitempty"`
	// AppID, AppPasswordSecret and TenantID are a Teams bot's Azure app
	// registration.
	AppID             string `json:"appId,omitempty"`
	AppPasswordSecret string `json:"appPasswordSecret,omitempty"`
	TenantID          string `json:"tenantId,omitempty"`
}

// Empty reports whether no credential is named.
func (c Credentials) Empty() bool { return c == Credentials{} }

// Over is c with the fields of o that are set.
func (c Credentials) Over(o Credentials) Credentials {
	for _, f := range []struct{ dst, src *string }{{&c.BotTokenSecret, &o.BotTokenSecret}, {&c.APIKeySecret, &o.APIKeySecret},
		{&c.BaseURL, &o.BaseURL}, {&c.EmailSecret, &o.EmailSecret}, {&c.APITokenSecret, &o.APITokenSecret},
		{&c.AppID, &o.AppID}, {&c.AppPasswordSecret, &o.AppPasswordSecret}, {&c.TenantID, &o.TenantID}} {
		if *f.src != "" {
			*f.dst = *f.src
		}
	}
	return c
}

// Missing are the settings the write-back of a provider's runs needs that
// the credentials do not name (none for a provider that reports nowhere).
func (c Credentials) Missing(provider string) []string {
	var need [][2]string
	switch provider {
	case ProviderSlack:
		need = [][2]string{{"botTokenSecret", c.BotTokenSecret}}
	case ProviderLinear:
		need = [][2]string{{"apiKeySecret", c.APIKeySecret}}
	case ProviderJira:
		need = [][2]string{{"baseURL", c.BaseURL}, {"emailSecret", c.EmailSecret}, {"apiTokenSecret", c.APITokenSecret}}
	case ProviderTeams:
		need = [][2]string{{"appId", c.AppID}, {"appPasswordSecret", c.AppPasswordSecret}}
	}
	var out []string
	for _, kv := range need {
		if kv[1] == "" {
			out = append(out, kv[0])
		}
	}
	return out
}

// Integration is a factory's entry of one integration type; nil when
// factory.yaml has none.
func (s *Settings) Integration(typ string) *Integration {
	for _, in := range s.IntegrationList() {
		if in.Type == typ {
			return &in
		}
	}
	return nil
}

// AutoRespond reports whether plain replies in a thread a run of the
// factory works in continue it (autoRespondToThreadReplies of the Slack or
// Teams integration; default true).
func (s *Settings) AutoRespond(provider string) bool {
	var flag *bool
	switch in := s.Integration(IntegrationOf(provider)); {
	case in == nil:
	case in.Slack != nil:
		flag = in.Slack.AutoRespondToThreadReplies
	case in.Teams != nil:
		flag = in.Teams.AutoRespondToThreadReplies
	}
	return flag == nil || *flag
}

// IntegrationOf is the integration type a trigger provider's events come
// through ("" for code hosts and webhooks).
func IntegrationOf(provider string) string {
	switch provider {
	case ProviderSlack, ProviderLinear, ProviderJira:
		return provider
	case ProviderTeams:
		return IntegrationTeams
	}
	return ""
}

// Run-status events (docs/spec/talkback.md, Run-status webhooks).
const (
	RunCreated   = "run.created"
	RunStarted   = "run.started"
	RunBlocked   = "run.blocked"
	RunSucceeded = "run.succeeded"
	RunFailed    = "run.failed"
	RunErrored   = "run.errored"
	RunCancelled = "run.cancelled"
)

// RunEventTypes are the run-status events, in the order a run may send them.
var RunEventTypes = []string{RunCreated, RunStarted, RunBlocked, RunSucceeded, RunFailed, RunErrored, RunCancelled}

// RunEventType is the run-status event of a run's change from prev (""
// when the run is new) to next; "" for a change that announces nothing
// (a claim, a follow-up queuing a run again).
func RunEventType(prev, next RunState, created bool) string {
	if created {
		return RunCreated
	}
	if prev == next {
		return ""
	}
	switch next {
	case StateInProgress:
		return RunStarted
	case StateBlocked:
		return RunBlocked
	case StateSucceeded:
		return RunSucceeded
	case StateFailed:
		return RunFailed
	case StateError:
		return RunErrored
	case StateCancelled:
		return RunCancelled
	}
	return ""
}

// NotificationRoute is one entry of factory.yaml's notifications
// (extension): where the run-status events of the factory's runs go.
type NotificationRoute struct {
	Name        string   `json:"name"`
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	SecretName  string   `json:"secretName,omitempty"`
	Automations []string `json:"automations,omitempty"`
}

// NotificationSecretName is the managed secret generated for a route that
// names none.
func NotificationSecretName(factoryName, route string) string {
	return "notification-" + factoryName + "-" + route
}

// RunWebhook is a run's own run-status webhook (run create's webhook): its
// URL and its secret, sealed with the server's key.
type RunWebhook struct {
	URL    string `json:"url"`
	Sealed []byte `json:"sealed"`
}

// RunWebhookRequest is run create's webhook: the URL, and the secret
// (whsec_...; generated and answered once when not given).
type RunWebhookRequest struct {
	URL    string `json:"url"`
	Secret string `json:"secret,omitempty"`
}

// Notification is one run-status event to one route, and how its delivery
// goes: the outbox entry and, once sent, the delivery log's.
type Notification struct {
	ID string `json:"id"`
	// Route names the route: a factory's by its name, a run's own as
	// run:<run id>; FactoryUID is the route's factory.
	Route      string    `json:"route"`
	FactoryUID string    `json:"factory_uid,omitempty"`
	RunID      string    `json:"run_id"`
	Type       string    `json:"type"`
	URL        string    `json:"url"`
	CreatedAt  time.Time `json:"created_at"`
	// Status is pending, delivered, failed (every attempt failed) or
	// disabled (the route answered 410).
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	// NextAt is when a pending delivery is tried next.
	NextAt        *time.Time `json:"next_at,omitempty"`
	LastAt        *time.Time `json:"last_at,omitempty"`
	LastStatus    int        `json:"last_status,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	RedeliveryOf  string     `json:"redelivery_of,omitempty"`
	MessageID     string     `json:"message_id"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`
	LastAttemptMS int64      `json:"last_attempt_ms,omitempty"`
}

// Notification statuses.
const (
	NotificationPending   = "pending"
	NotificationDelivered = "delivered"
	NotificationFailed    = "failed"
	NotificationDisabled  = "disabled"
)

// RunRoute is the route name of a run's own webhook.
func RunRoute(runID string) string { return "run:" + runID }

// TeamsWebhookKey is the key of the webhook no file defines that a
// factory's Teams bot's activities come through.
const TeamsWebhookKey = "microsoft-teams"

// TeamsWebhook is that webhook of a factory (POST /hooks/teams/<factory
// uid>; docs/spec/talkback.md): its deliveries are logged, deduplicated and
// evaluated as any provider's are.
func TeamsWebhook(f *Factory) *Webhook {
	return &Webhook{Factory: f.Name, Key: TeamsWebhookKey, UID: DerivedID(PrefixWebhook, TeamsWebhookKey, f.UID),
		Spec:      WebhookSpec{Name: "Microsoft Teams", AuthMode: AuthSignature, EventSource: ProviderTeams, Enabled: true},
		CreatedAt: f.CreatedAt, UpdatedAt: f.CreatedAt}
}

// RouteKey names a notification's route in the store: a run's own route
// as it is, a factory's by the factory's UID and the route's name.
func (n *Notification) RouteKey() string { return RouteKey(n.FactoryUID, n.Route) }

// RouteKey is the store's name of a route.
func RouteKey(factoryUID, route string) string {
	if strings.HasPrefix(route, "run:") {
		return route
	}
	return factoryUID + "|" + route
}
