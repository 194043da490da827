package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"factory"
	"factory/internal/gateway"
	"factory/internal/harness"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/store"
)

// CodeIntegrationNotConfigured is the error code of a run whose harness's
// provider the gateway has no key for.
const CodeIntegrationNotConfigured = "integration_not_configured"

// modelGateway is a server's model gateway (docs/harnesses.md) and what
// each harness's turn gets from it: the gateway's address, the run's
// token, the harness's settings.
type modelGateway struct {
	cfg       server.GatewayConfig
	tokens    *gateway.Tokens
	url       string // <server>/v1/gateway
	harnesses string // <data>/harnesses
	secret    func(name string) ([]byte, error)
}

// newModelGateway sets the gateway up from the configuration: its run
// tokens signed with a key derived from the secrets key, its address the
// configured one, else the server's public URL.
func newModelGateway(cfg *server.FileConfig, s *store.Store, kr *secrets.Keyring, dataDir, publicURL string) (*modelGateway, error) {
	g := &modelGateway{tokens: &gateway.Tokens{Key: kr.Derive("the model gateway's run tokens")},
		secret: func(name string) ([]byte, error) { return secrets.Current(s, kr, name) }}
	if cfg.Gateway != nil {
		g.cfg = *cfg.Gateway
	}
	base := strings.TrimRight(g.cfg.URL, "/")
	if base == "" {
		base = strings.TrimRight(publicURL, "/")
	}
	g.url = base + strings.TrimSuffix(gateway.Prefix, "/")
	dir, err := filepath.Abs(filepath.Join(dataDir, "harnesses"))
	g.harnesses = dir
	return g, err
}

// keySecret is the managed secret holding the key of a run's calls to a
// provider: its agent's harness's own (harness.auth), else the provider's
// configured one; "" when there is none.
func (g *modelGateway) keySecret(r *factory.Run, provider string) string {
	if r != nil && r.Setup != nil && r.Setup.Harness != nil {
		h, hok := harness.Lookup(r.Setup.Harness.Type)
		if a := r.Setup.Harness.Auth; hok && h.Provider == provider && a != nil && a.Source == "managedSecret" && a.SecretName != "" {
			return a.SecretName
		}
	}
	return g.cfg.Providers[provider].KeySecret
}

// key is gateway.Config.Key: the real key of a run's calls to a provider.
func (g *modelGateway) key(r *factory.Run, provider string) ([]byte, error) {
	if r != nil && r.Setup != nil && r.Setup.Harness != nil {
		// A run's token spends its own harness's provider's key only.
		if h, ok := harness.Lookup(r.Setup.Harness.Type); ok && h.Provider != provider {
			return nil, fmt.Errorf("the run's harness (%s) calls %s, not %s", h.Name, h.Provider, provider)
		}
	}
	name := g.keySecret(r, provider)
	if name == "" {
		return nil, fmt.Errorf("the model gateway has no key for %s: set gateway.providers.%s.keySecret in the server's configuration, or the agent's harness.auth", provider, provider)
	}
	v, err := g.secret(name)
	if err != nil {
		return nil, fmt.Errorf("the key for %s (secret %s) cannot be read: %v", provider, name, err)
	}
	return v, nil
}

// problem says why a harness's runs would fail for want of a key, ""
// when its provider has one (or it is no harness of the gateway's): the
// reconciler's plan warning.
func (g *modelGateway) problem(h *factory.Harness) string {
	hh, ok := harness.Lookup(h.Type)
	if !ok {
		return ""
	}
	r := &factory.Run{Setup: &factory.RunSetup{Harness: h}}
	if g.keySecret(r, hh.Provider) != "" {
		return ""
	}
	return fmt.Sprintf("the %s harness calls %s through the model gateway, which has no key for it: its runs will fail (integration_not_configured); set gateway.providers.%s.keySecret in the server's configuration, or harness.auth",
		h.Type, hh.Provider, hh.Provider)
}

// hooks gives a run manager's configuration the gateway's setup of each
// harness's turn.
func (g *modelGateway) hooks(c *runs.Config) { c.HarnessSetup = g.setup }

// setup is runs.Config.HarnessSetup: a harness's turn gets its model and
// reasoning level, the gateway's address for its provider and the run's
// token as its key, its settings in the run's HOME, and where the
// harnesses are installed; a provider with no key ends the turn first.
func (g *modelGateway) setup(r *factory.Run, name string) ([]string, map[string][]byte, *runtime.Result) {
	h, ok := harness.Lookup(name)
	if !ok {
		return nil, nil, nil
	}
	if _, err := g.key(r, h.Provider); err != nil {
		return nil, nil, &runtime.Result{State: factory.StateFailed, Code: CodeIntegrationNotConfigured, Message: fmt.Sprintf("the %s harness cannot reach its model: %v", name, err)}
	}
	model, reasoning := modelOf(r)
	env, home := h.Setup(harness.Turn{Model: model, Reasoning: reasoning, GatewayURL: g.url + "/" + h.Provider, Token: g.tokens.Mint(r.ID)})
	return append(env, HarnessesEnv+"="+g.harnesses), home, nil
}

// modelOf is the model and reasoning level a run asks of its harness: its
// agent's (harness.model, reasoningLevel), else the run's config.model_id;
// "auto" and the like leave the harness's own default.
func modelOf(r *factory.Run) (model, reasoning string) {
	if r.Setup != nil && r.Setup.Harness != nil {
		model, reasoning = r.Setup.Harness.Model, r.Setup.Harness.ReasoningLevel
	}
	if model == "" {
		var cfg struct {
			Model string `json:"model_id"`
		}
		_ = json.Unmarshal(r.Config, &cfg)
		model = cfg.Model
	}
	if model == "auto" || model == "default" {
		model = ""
	}
	return model, reasoning
}

// handler is the gateway over the run manager: what the server serves at
// /v1/gateway/.
func (g *modelGateway) handler(m *runs.Manager, observed func(*factory.Run, *factory.ModelCall), log *slog.Logger) *gateway.Gateway {
	providers := map[string]gateway.Provider{}
	for name, p := range g.cfg.Providers {
		providers[name] = gateway.Provider{URL: p.URL}
	}
	return gateway.New(gateway.Config{Providers: providers, Prices: g.cfg.Prices, Tokens: g.tokens, Runs: m, Key: g.key,
		Observed: observed, Log: log})
}
