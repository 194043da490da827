package server

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"factory"
	"factory/internal/backup"
	"factory/internal/gateway"
	"factory/internal/schema"
	"factory/internal/tracing"
)

// FileConfig is the server's configuration file (factory serve --config),
// validated against the embedded "server" schema.
type FileConfig struct {
	Listen       string          `json:"listen"`
	PublicURL    string          `json:"publicUrl"`
	Data         string          `json:"data"`
	Factories    []FactoryConfig `json:"factories"`
	Schedules    ScheduleConfig  `json:"schedules"`
	Runtime      json.RawMessage `json:"runtime,omitempty"`
	Environments json.RawMessage `json:"environments,omitempty"`
	Backups      *BackupsConfig  `json:"backups,omitempty"`
	// CodeHosts are the code hosts runs reach (docs/codehosts.md).
	CodeHosts *CodeHosts `json:"codeHosts,omitempty"`
	// Gateway is the model gateway's (docs/harnesses.md).
	Gateway    *GatewayConfig `json:"gateway,omitempty"`
	Networking struct {
		EgressRanges []string `json:"egressRanges,omitempty"`
	} `json:"networking"`
	// Providers are where the chats' and trackers' APIs are reached;
	// Notifications bound the run-status webhooks (docs/spec/talkback.md).
	Providers     *ProvidersConfig     `json:"providers,omitempty"`
	Notifications *NotificationsConfig `json:"notifications,omitempty"`
	// Tracing exports OpenTelemetry traces over OTLP/HTTP (docs/server.md,
	// Tracing); without an endpoint here or in OTEL_EXPORTER_OTLP_ENDPOINT
	// it is off.
	Tracing tracing.Config `json:"tracing"`
}

// ProvidersConfig is where the providers' APIs are reached ("" their
// public ones).
type ProvidersConfig struct {
	Slack  APIConfig `json:"slack"`
	Linear APIConfig `json:"linear"`
	Jira   APIConfig `json:"jira"`
	Teams  struct {
		OpenIDMetadataURL string `json:"openIdMetadataURL"`
		TokenURL          string `json:"tokenURL"`
	} `json:"teams"`
}

// APIConfig is where one provider's API is reached.
type APIConfig struct {
	APIURL string `json:"apiURL"`
}

// NotificationsConfig bounds the run-status webhooks: the private ranges
// they may reach, and the waits between a delivery's attempts.
type NotificationsConfig struct {
	AllowedNetworks []string `json:"allowedNetworks,omitempty"`
	Retries         []string `json:"retries,omitempty"`
}

// RetrySchedule is the configured waits ("" entries are skipped); nil
// when none is configured.
func (c *NotificationsConfig) RetrySchedule() ([]time.Duration, error) {
	if c == nil {
		return nil, nil
	}
	var out []time.Duration
	for i, v := range c.Retries {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("notifications.retries[%d]: %q is not a positive duration", i, v)
		}
		out = append(out, d)
	}
	return out, nil
}

// Networks are the allowed private ranges, parsed.
func (c *NotificationsConfig) Networks() ([]netip.Prefix, error) {
	if c == nil {
		return nil, nil
	}
	var out []netip.Prefix
	for i, v := range c.AllowedNetworks {
		p, err := netip.ParsePrefix(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("notifications.allowedNetworks[%d]: %q is not a CIDR range", i, v)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// GatewayConfig is the model gateway's configuration: the address agents
// reach the server at, each provider's API and key, the prices.
type GatewayConfig struct {
	URL       string                     `json:"url,omitempty"`
	Providers map[string]GatewayProvider `json:"providers,omitempty"`
	Prices    gateway.Prices             `json:"prices,omitempty"`
}

// GatewayProvider is a provider's API (default: its public one) and the
// managed secret holding its key.
type GatewayProvider struct {
	URL       string `json:"url,omitempty"`
	KeySecret string `json:"keySecret,omitempty"`
}

// BackupsConfig is the configuration's schedule of backups
// (docs/operations.md): one every Every into Dir, the newest Keep kept.
type BackupsConfig struct {
	Every string `json:"every"`
	Keep  int    `json:"keep,omitempty"`
	Dir   string `json:"dir"`
}

// Schedule is the backups' schedule, Dir taken relative to base when it is
// relative.
func (b *BackupsConfig) Schedule(base string) (*backup.Schedule, error) {
	every, err := time.ParseDuration(b.Every)
	if err != nil || every < time.Second {
		return nil, fmt.Errorf("backups.every %q: a duration of at least 1s, such as 1h", b.Every)
	}
	keep := b.Keep
	if keep == 0 {
		keep = backup.DefaultKeep
	}
	dir := b.Dir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(base, dir)
	}
	return &backup.Schedule{Every: every, Keep: keep, Dir: dir}, nil
}

// ScheduleConfig is the configuration file's bounds of schedules; unset
// fields take the defaults (factory.ScheduleLimits).
type ScheduleConfig struct {
	MinInterval       string `json:"minInterval,omitempty"`
	MaxPerFactory     int    `json:"maxPerFactory,omitempty"`
	MaxWithoutFactory int    `json:"maxWithoutFactory,omitempty"`
}

// Limits are the configured bounds, with the defaults where unset.
func (c ScheduleConfig) Limits() factory.ScheduleLimits {
	l := factory.ScheduleLimits{PerFactory: c.MaxPerFactory, WithoutFactory: c.MaxWithoutFactory}
	if d, err := time.ParseDuration(c.MinInterval); err == nil && d > 0 {
		l.MinInterval = d
	}
	return l.OrDefaults()
}

// Model is a model an environment's agent offers, as the server config
// lists it (environments.<name>.models).
type Model struct {
	ID             string `json:"id"`
	Name           string `json:"name,omitempty"`
	Provider       string `json:"provider,omitempty"`
	Description    string `json:"description,omitempty"`
	ReasoningLevel string `json:"reasoningLevel,omitempty"`
	Vision         bool   `json:"vision,omitempty"`
}

// Models are the models the environments offer, by environment, and the
// configured default model (runtime.defaultModel; "" when unset).
func (c *FileConfig) Models() (byEnv map[string][]Model, def string) {
	var envs map[string]struct {
		Models []Model `json:"models"`
	}
	_ = json.Unmarshal(c.Environments, &envs) // validated by the schema
	byEnv = map[string][]Model{}
	for name, e := range envs {
		byEnv[name] = e.Models
	}
	var rt struct {
		DefaultModel string `json:"defaultModel"`
	}
	_ = json.Unmarshal(c.Runtime, &rt)
	return byEnv, rt.DefaultModel
}

// EgressRanges are networking.egressRanges, canonical (the network's
// address, IPv4 before IPv6, sorted) and without repeats; an entry that is
// not a CIDR is an error naming it.
func (c *FileConfig) EgressRanges() ([]string, error) {
	seen := map[netip.Prefix]bool{}
	var out []netip.Prefix
	for i, v := range c.Networking.EgressRanges {
		p, err := netip.ParsePrefix(strings.TrimSpace(v))
		if err != nil {
			if a, aerr := netip.ParseAddr(strings.TrimSpace(v)); aerr == nil {
				p, err = a.Prefix(a.BitLen())
			}
		}
		if err != nil {
			return nil, fmt.Errorf("networking.egressRanges[%d]: %q is not a CIDR range (203.0.113.0/24, 2001:db8::/48) or an address", i, v)
		}
		if p = p.Masked(); !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Addr().Is4() != out[j].Addr().Is4() {
			return out[i].Addr().Is4()
		}
		if c := out[i].Addr().Compare(out[j].Addr()); c != 0 {
			return c < 0
		}
		return out[i].Bits() < out[j].Bits()
	})
	cidrs := make([]string, len(out))
	for i, p := range out {
		cidrs[i] = p.String()
	}
	return cidrs, nil
}

// FactoryConfig is one factory of the configuration file.
type FactoryConfig struct {
	Name      string `json:"name"`
	Source    string `json:"source"`
	Ref       string `json:"ref,omitempty"`
	Interval  string `json:"interval,omitempty"`
	SecretRef string `json:"secretRef,omitempty"`
	// CodeHosts is the factory's own GitLab, over the server's.
	CodeHosts *CodeHosts `json:"codeHosts,omitempty"`
	// Integrations are the factory's credentials for chats and trackers,
	// over factory.yaml's (docs/spec/talkback.md).
	Integrations map[string]factory.Credentials `json:"integrations,omitempty"`
}

// CodeHosts configures the code hosts: a GitHub App, a GitLab token.
type CodeHosts struct {
	GitHub *GitHubApp    `json:"github,omitempty"`
	GitLab *GitLabConfig `json:"gitlab,omitempty"`
}

// GitHubApp is the GitHub App runs are given tokens of.
type GitHubApp struct {
	AppID            int64  `json:"appId"`
	PrivateKeySecret string `json:"privateKeySecret"`
	APIURL           string `json:"apiURL,omitempty"`
	CheckName        string `json:"checkName,omitempty"`
}

// GitLabConfig is a GitLab instance and the secret holding its token.
type GitLabConfig struct {
	URL         string `json:"url,omitempty"`
	TokenSecret string `json:"tokenSecret"`
}

// IntervalOr parses the factory's interval, or returns def when unset.
func (f FactoryConfig) IntervalOr(def time.Duration) time.Duration {
	if d, err := time.ParseDuration(f.Interval); err == nil && d > 0 {
		return d
	}
	return def
}

// LoadConfig reads and validates a configuration file. Every problem is
// reported at once, with its line and column.
func LoadConfig(path string) (*FileConfig, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if fi.Size() > factory.MaxDefinitionFileBytes {
		return nil, fmt.Errorf("config %s is over 1 MiB", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	js, ds := schema.ValidateDocument(path, data, schema.KindServer)
	var cfg FileConfig
	if !ds.HasErrors() {
		if err := json.Unmarshal(js, &cfg); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		if _, err := cfg.EgressRanges(); err != nil {
			ds = append(ds, schema.Diagnostic{File: path, Path: "/networking/egressRanges", Message: err.Error(), Severity: schema.Error})
		}
		if _, err := cfg.Notifications.Networks(); err != nil {
			ds = append(ds, schema.Diagnostic{File: path, Path: "/notifications/allowedNetworks", Message: err.Error(), Severity: schema.Error})
		}
		if _, _, _, err := cfg.Tracing.Resolve(func(string) string { return "" }); err != nil {
			ds = append(ds, schema.Diagnostic{File: path, Path: "/tracing", Message: err.Error(), Severity: schema.Error})
		}
		if _, err := cfg.Notifications.RetrySchedule(); err != nil {
			ds = append(ds, schema.Diagnostic{File: path, Path: "/notifications/retries", Message: err.Error(), Severity: schema.Error})
		}
		seen := map[string]bool{}
		for i, f := range cfg.Factories {
			if seen[f.Name] {
				ds = append(ds, schema.Diagnostic{File: path, Line: 0, Path: fmt.Sprintf("/factories/%d/name", i),
					Message: fmt.Sprintf("factory %q is listed twice", f.Name), Severity: schema.Error})
			}
			seen[f.Name] = true
		}
	}
	if ds.HasErrors() {
		ds.Sort()
		lines := make([]string, len(ds))
		for i, d := range ds {
			lines[i] = d.String()
		}
		return nil, fmt.Errorf("invalid config:\n  %s", strings.Join(lines, "\n  "))
	}
	return &cfg, nil
}
