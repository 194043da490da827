// Package talkback finds where a factory's runs from chats and trackers
// report (docs/spec/talkback.md): Slack, Linear, Jira and Microsoft Teams, each
// reached with the credentials the factory names (factory.yaml's
// integration entries, the server config's factories[].integrations over
// them), read from the managed secrets at each use so that a rotated
// credential acts at once. It also verifies the Bot Framework's tokens on
// the Teams activities a factory receives, and resolves Slack channel
// names. Each provider's API stays in its own package.
package talkback

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"factory"
	"factory/internal/store"
	"factory/internal/talkback/jira"
	"factory/internal/talkback/linear"
	"factory/internal/talkback/slack"
	"factory/internal/talkback/teams"
	"factory/internal/writeback"
)

// APIs are where the providers' APIs are reached ("" their public ones).
type APIs struct {
	SlackURL, LinearURL, JiraURL  string
	TeamsOpenIDURL, TeamsTokenURL string
}

// Registry is the factories' chats and trackers.
type Registry struct {
	Store *store.Store
	// Secret reads a managed secret's current value.
	Secret func(name string) ([]byte, error)
	// Configured are the server config's credentials, by factory name and
	// integration type.
	Configured map[string]map[string]factory.Credentials
	APIs       APIs
	HTTP       *http.Client

	mu       sync.Mutex
	bots     map[[32]byte]*teams.Client // by app ID and password: their tokens are kept
	verifier *teams.Verifier
}

// Credentials are a factory's credentials for an integration type:
// factory.yaml's entry, the server config's over it.
func (g *Registry) Credentials(factoryName, typ string) factory.Credentials {
	var c factory.Credentials
	if f, err := g.Store.Factory(factoryName); err == nil {
		if in := f.Settings.Integration(typ); in != nil {
			c = in.Credentials()
		}
	}
	return c.Over(g.Configured[factoryName][typ])
}

// secret reads a credential named by a field of the factory's integration.
func (g *Registry) secret(factoryName, typ, field, name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: factory %s's %s integration names no %s (factory.yaml's integrations, or the server config's factories[].integrations)",
			writeback.ErrNoCredential, factoryName, typ, field)
	}
	if g.Secret == nil {
		return "", fmt.Errorf("%w: no managed secrets here", writeback.ErrNoCredential)
	}
	v, err := g.Secret(name)
	if err != nil {
		return "", fmt.Errorf("%w: factory %s's %s %s (secret %s): %v", writeback.ErrNoCredential, factoryName, typ, field, name, err)
	}
	return strings.TrimSpace(string(v)), nil
}

// For is the provider a factory's runs from a chat or tracker report to
// (writeback.Providers); writeback.ErrNoCredential when the factory names
// no credential for it, or the secret cannot be read.
func (g *Registry) For(_ context.Context, factoryName, provider string) (writeback.Provider, error) {
	typ := factory.IntegrationOf(provider)
	c := g.Credentials(factoryName, typ)
	switch provider {
	case factory.ProviderSlack:
		tok, err := g.secret(factoryName, typ, "botTokenSecret", c.BotTokenSecret)
		if err != nil {
			return nil, err
		}
		return slack.New(tok, g.APIs.SlackURL, g.HTTP), nil
	case factory.ProviderLinear:
		tok, err := g.secret(factoryName, typ, "apiKeySecret", c.APIKeySecret)
		if err != nil {
			return nil, err
		}
		return linear.Reporter{Client: linear.New(tok, g.APIs.LinearURL, g.HTTP)}, nil
	case factory.ProviderJira:
		return g.jira(factoryName, c)
	case factory.ProviderTeams:
		bot, err := g.bot(factoryName, c)
		if err != nil {
			return nil, err
		}
		return teams.Reporter{Client: bot}, nil
	}
	return nil, fmt.Errorf("%w: runs from %s do not report back", writeback.ErrNoCredential, provider)
}

func (g *Registry) jira(factoryName string, c factory.Credentials) (writeback.Provider, error) {
	if c.BaseURL == "" {
		return nil, fmt.Errorf("%w: factory %s's jira integration names no baseURL", writeback.ErrNoCredential, factoryName)
	}
	email, err := g.secret(factoryName, "jira", "emailSecret", c.EmailSecret)
	if err != nil {
		return nil, err
	}
	tok, err := g.secret(factoryName, "jira", "apiTokenSecret", c.APITokenSecret)
	if err != nil {
		return nil, err
	}
	return jira.Reporter{Client: jira.New(c.BaseURL, g.APIs.JiraURL, email, tok, g.HTTP)}, nil
}

// bot is a factory's Teams bot, the same client for the same app ID and
// password (its app token is kept).
func (g *Registry) bot(factoryName string, c factory.Credentials) (*teams.Client, error) {
	if c.AppID == "" {
		return nil, fmt.Errorf("%w: factory %s's microsoft-teams integration names no appId", writeback.ErrNoCredential, factoryName)
	}
	pw, err := g.secret(factoryName, factory.IntegrationTeams, "appPasswordSecret", c.AppPasswordSecret)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256([]byte(c.AppID + "\x00" + pw + "\x00" + c.TenantID))
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bots == nil {
		g.bots = map[[32]byte]*teams.Client{}
	}
	if b := g.bots[key]; b != nil {
		return b, nil
	}
	b := teams.New(c.AppID, pw, c.TenantID, g.APIs.TeamsTokenURL, g.HTTP)
	g.bots[key] = b
	return b, nil
}

// TeamsApp is the app ID of a factory's Teams bot; "" when it has none.
func (g *Registry) TeamsApp(factoryName string) string {
	return g.Credentials(factoryName, factory.IntegrationTeams).AppID
}

// VerifyTeams checks the Bot Framework's token on an activity to a
// factory's bot (docs/spec/talkback.md, Microsoft Teams): the error says why it
// is refused.
func (g *Registry) VerifyTeams(ctx context.Context, factoryName, authorization string, activity []byte) error {
	app := g.TeamsApp(factoryName)
	if app == "" {
		return fmt.Errorf("factory %s has no Teams bot (microsoft-teams appId)", factoryName)
	}
	serviceURL, channelID, err := activityEndpoint(activity)
	if err != nil {
		return err
	}
	g.mu.Lock()
	if g.verifier == nil {
		g.verifier = &teams.Verifier{MetadataURL: g.APIs.TeamsOpenIDURL, HTTP: g.HTTP}
	}
	v := g.verifier
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return v.Verify(ctx, authorization, app, serviceURL, channelID)
}

// activityEndpoint is an activity's serviceUrl and channelId read by their
// exact keys, as the event and its replies read them. A key that differs
// from either only in case is refused: a case-blind reading would check
// one address while the replies went to another (with the bot's token).
func activityEndpoint(activity []byte) (serviceURL, channelID string, err error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(activity, &keys); err != nil {
		return "", "", fmt.Errorf("the activity is not a JSON object")
	}
	for k := range keys {
		for _, want := range []string{"serviceUrl", "channelId"} {
			if k != want && strings.EqualFold(k, want) {
				return "", "", fmt.Errorf("the activity has %q beside %q: refused", k, want)
			}
		}
	}
	if json.Unmarshal(keys["serviceUrl"], &serviceURL) != nil || serviceURL == "" {
		return "", "", fmt.Errorf("the activity names no serviceUrl")
	}
	_ = json.Unmarshal(keys["channelId"], &channelID)
	return serviceURL, channelID, nil
}

// listTimeout bounds the listing of a workspace's channels.
const listTimeout = 30 * time.Second

// SlackChannels are the channels a factory's Slack token sees, ID by name
// (reconciler.ChannelLister): the token of the revision being synced (its
// factory.yaml's Slack credentials, the server config's over them); nil,
// nil when it names none.
func (g *Registry) SlackChannels(ctx context.Context, factoryName string, fromFile factory.Credentials) (map[string]string, error) {
	c := fromFile.Over(g.Configured[factoryName][factory.IntegrationSlack])
	if c.BotTokenSecret == "" {
		return nil, nil
	}
	tok, err := g.secret(factoryName, factory.IntegrationSlack, "botTokenSecret", c.BotTokenSecret)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	return slack.New(tok, g.APIs.SlackURL, g.HTTP).Channels(ctx)
}
