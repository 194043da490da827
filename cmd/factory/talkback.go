package main

import (
	"log/slog"

	"factory"
	"factory/internal/notify"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/store"
	"factory/internal/talkback"
)

// chatProviders are the factories' chats and trackers (Slack, Linear,
// Jira, Teams): their credentials from factory.yaml and the configuration's
// factories[].integrations, their APIs where the configuration's providers
// say.
func chatProviders(cfg *server.FileConfig, s *store.Store, kr *secrets.Keyring) *talkback.Registry {
	g := &talkback.Registry{Store: s, Secret: func(name string) ([]byte, error) { return secrets.Current(s, kr, name) },
		Configured: map[string]map[string]factory.Credentials{}}
	for _, f := range cfg.Factories {
		if len(f.Integrations) > 0 {
			g.Configured[f.Name] = f.Integrations
		}
	}
	if p := cfg.Providers; p != nil {
		g.APIs = talkback.APIs{SlackURL: p.Slack.APIURL, LinearURL: p.Linear.APIURL, JiraURL: p.Jira.APIURL,
			TeamsOpenIDURL: p.Teams.OpenIDMetadataURL, TeamsTokenURL: p.Teams.TokenURL}
	}
	return g
}

// notifications is the run-status webhooks' notifier, bounded as the
// configuration's notifications say.
func notifications(cfg *server.FileConfig, s *store.Store, kr *secrets.Keyring, log *slog.Logger, insecure bool) (*notify.Notifier, error) {
	nets, err := cfg.Notifications.Networks()
	if err != nil {
		return nil, err
	}
	retries, err := cfg.Notifications.RetrySchedule()
	if err != nil {
		return nil, err
	}
	return notify.New(notify.Config{Store: s, Keyring: kr, Log: log, AllowInsecure: insecure, AllowedNetworks: nets, Retries: retries})
}
