package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"factory"

	"github.com/spf13/cobra"

	"factory/internal/backup"
	"factory/internal/codehost"
	"factory/internal/confine"
	"factory/internal/notify"
	"factory/internal/reconciler"
	"factory/internal/reconciler/gitsource"
	"factory/internal/reconciler/watch"
	"factory/internal/runs"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/service"
	"factory/internal/store"
	"factory/internal/talkback"
	"factory/internal/tracing"
	"factory/internal/writeback"
)

// Defaults of serve (docs/spec/runtime.md): git remotes are polled; directories are
// watched, and read again at the resync interval as a safety net.
const (
	defaultGitInterval = time.Minute
	dirResync          = 10 * time.Minute
	watchDebounce      = 100 * time.Millisecond
)

type serveOpts struct {
	reconcileOpts
	config, listen, publicURL string
	interval                  time.Duration
	rateLimit, failedAuth     int
	rejectedLimit             int
	metricsListen             string
	logFormat, logLevel       string
	pushSecret                string
	workers                   workersOpts
	insecureNotifications     bool
}

func (a *app) serveCmd() *cobra.Command {
	o := &serveOpts{}
	cmd := &cobra.Command{
		Use:   "serve --source DIR|GIT_URL | --config FILE",
		Short: "Keep factories reconciled from their sources and serve the HTTP API",
		Long: `Reconcile factories continuously and serve /healthz, /readyz, /metrics and the API on
one listener (/metrics needs a read or admin API key there; --metrics-listen serves it without one
on an address of its own). SIGINT or SIGTERM shut it down gracefully.

--source serves one factory: a directory, which is watched (a change is applied within
a fraction of a second), or a git URL (https://, ssh:// or git@host:path), polled every
--interval at --ref. --config FILE serves several (see docs/server.md for the format).

Each new valid revision is applied; an invalid one is refused, logged with file:line,
shown in status, and the last good revision keeps serving. A git remote that cannot be
reached is retried with backoff.

On a new store it creates an admin API key, prints it once and writes it to
<data>/admin-api-key (mode 0600). While it runs, the other commands go through it.`,
		Example: `  factory serve --source examples/factory --name example
  factory serve --source https://github.com/acme/factory.git --ref main --interval 30s
  factory serve --config /etc/factory/server.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return a.serve(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.source, "source", "", "the factory repository: a directory or a git URL")
	f.StringVar(&o.ref, "ref", "", "branch, tag or full commit SHA of a git source (default: the remote's HEAD)")
	f.StringVar(&o.name, "name", "", "the factory's name (default: the factory already applied from this source, else its directory's or repository's name)")
	f.StringVar(&o.config, "config", "", "a configuration file with several factories (instead of --source)")
	f.DurationVar(&o.interval, "interval", defaultGitInterval, "how often a git source is polled")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&o.publicURL, "public-url", "", "base URL senders reach this server at, for ingress URLs (default http://<listen>)")
	f.IntVar(&o.rateLimit, "ingress-rate-limit", 60, "deliveries per minute per webhook before 429 (-1: no limit)")
	f.IntVar(&o.failedAuth, "ingress-failed-auth-limit", 10, "failed authentications per minute per webhook and client before 429")
	f.StringVar(&o.logFormat, "log-format", "text", "the server log's format: text or json")
	f.StringVar(&o.logLevel, "log-level", "info", "the least severe lines logged: debug, info, warn or error")
	f.StringVar(&o.pushSecret, "push-secret", "", "enable the push receiver (POST /hooks/push) with this managed secret: a signed push notification syncs its factories at once")
	f.StringVar(&o.metricsListen, "metrics-listen", "", "also serve /metrics without an API key on this address (e.g. 127.0.0.1:9090, for a scraper)")
	f.IntVar(&o.rejectedLimit, "ingress-rejected-limit", 30, "refused requests logged per minute per webhook and client before 429 (-1: no limit)")
	f.BoolVar(&o.insecureNotifications, "allow-insecure-notifications", false, "let run-status webhooks go over http to loopback addresses (for local receivers and tests)")
	o.workers.flags(cmd)
	return cmd
}

func (a *app) serve(cmd *cobra.Command, o *serveOpts) error {
	tuneGC()
	cfg, err := a.serveConfig(cmd, o)
	if err != nil {
		return err
	}
	if err := o.workers.check(); err != nil {
		return err
	}
	backups, err := backupSchedule(cfg)
	if err != nil {
		return err
	}
	log, err := newLogger(a.stderr, o.logFormat, o.logLevel)
	if err != nil {
		return err
	}
	a.log = log
	s, kr, err := a.serveStore()
	if err != nil {
		return err
	}
	defer s.Close()
	sources, err := factorySources(cfg, s, kr, log)
	if err != nil {
		return err
	}
	if err := a.ensureAdminKey(s); err != nil {
		return err
	}
	ln, publicURL, err := listen(cfg, s)
	if err != nil {
		return err
	}
	o.workers.listenSet = cmd.Flags().Changed("nats-listen")
	cp, err := startControlPlane(cmd.Context(), &o.workers, maxConcurrentRuns(cfg), s, kr, a.dataDir(), log)
	if err != nil {
		ln.Close()
		return err
	}
	defer cp.close()
	rt, err := a.serveRuntime(cmd.Context(), cfg, o, s, kr, cp, publicURL, log)
	if err != nil {
		ln.Close()
		return err
	}
	runs, hosts, chats, mg := rt.runs, rt.hosts, rt.chats, rt.gateway
	var ml net.Listener
	if o.metricsListen != "" {
		if ml, err = net.Listen("tcp", o.metricsListen); err != nil {
			ln.Close()
			return fmt.Errorf("listen on %s for metrics: %w", o.metricsListen, err)
		}
	}
	tracer, err := startTracing(cfg, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopTracing(tracer, log)
	egress, _ := cfg.EgressRanges() // LoadConfig has checked them
	models, defaultModel := cfg.Models()
	var srv *server.Server
	gw := mg.handler(runs, func(r *factory.Run, c *factory.ModelCall) { srv.ObserveModelCall(r, c) }, log)
	srv = server.New(server.Config{PublicURL: publicURL, Factories: sources, Runs: runs, Workers: cp.workers(), CodeHosts: hosts, CheckName: checkNameOf(cfg),
		IngressPerMinute: o.rateLimit, IngressFailedAuthPerMinute: o.failedAuth,
		IngressRejectedPerMinute: o.rejectedLimit, MetricsListener: ml, PushSecret: o.pushSecret, Schedules: cfg.Schedules.Limits(),
		Backups: backups, Version: versionString(), EgressRanges: egress, Models: models, DefaultModel: defaultModel, Talkback: chats,
		Notify: rt.notifier, Gateway: gw, Tracer: tracer},
		serveApplier(s, kr, runs, chats, mg), log)
	return srv.Run(cmd.Context(), ln)
}

// startTracing is the tracer of the configuration's tracing section and
// the standard OTEL_ environment variables: nil (tracing off) without an
// endpoint.
func startTracing(cfg *server.FileConfig, log *slog.Logger) (*tracing.Tracer, error) {
	t, err := tracing.New(cfg.Tracing, os.Getenv, versionString())
	if err != nil {
		return nil, err
	}
	if t != nil {
		tracing.LogErrors(log)
		endpoint, ratio, service, _ := cfg.Tracing.Resolve(os.Getenv)
		log.Info("tracing", "otlp_endpoint", endpoint, "sample_ratio", ratio, "service_name", service)
	}
	return t, nil
}

// stopTracing exports the spans not exported yet, within 5 seconds.
func stopTracing(t *tracing.Tracer, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("exporting the last spans", "err", err)
	}
}

// serveRuntime is what runs and reports the server's runs.
type serveRuntime struct {
	runs     *runs.Manager
	hosts    *codehost.Hosts
	chats    *talkback.Registry
	gateway  *modelGateway
	notifier *notify.Notifier
}

// serveRuntime makes serve's run manager, with what its runs report to
// (code hosts, chats and trackers, run-status webhooks) and the model
// gateway their harnesses reach models through; the reporter runs until
// ctx ends.
func (a *app) serveRuntime(ctx context.Context, cfg *server.FileConfig, o *serveOpts, s *store.Store, kr *secrets.Keyring, cp *controlPlane,
	publicURL string, log *slog.Logger) (*serveRuntime, error) {
	notifier, err := notifications(cfg, s, kr, log, o.insecureNotifications)
	if err != nil {
		return nil, err
	}
	hosts, chats := codeHosts(cfg, s, kr, log), chatProviders(cfg, s, kr)
	reporter := &writeback.Reporter{Store: s, Hosts: hosts, Chats: chats, PublicURL: publicURL, Log: log}
	mg, err := newModelGateway(cfg, s, kr, a.dataDir(), publicURL)
	if err != nil {
		return nil, err
	}
	// The server's own memory and environment are out of its agents'
	// reach (a process that cannot be dumped cannot be read through /proc
	// by another of its user), and so are its configuration and its NATS
	// credentials files (hidden from confined agents).
	confine.HideProcess()
	hidden := []string{o.config, o.workers.natsAuth.creds, o.workers.natsAuth.nkey, o.workers.natsAuth.passwordFile}
	m, err := runManager(cfg, s, kr, a.dataDir(), hidden, log, func(c *runs.Config) { cp.hosts(c); codeHostHooks(hosts, s, kr, reporter)(c); mg.hooks(c) })
	if err != nil {
		return nil, err
	}
	cp.claims(m)
	m.Observe(func(*factory.Run) { notifier.Wake() })
	go reporter.Run(ctx)
	return &serveRuntime{runs: m, hosts: hosts, chats: chats, gateway: mg, notifier: notifier}, nil
}

// serveApplier applies revisions for serve, its plans warning of what only
// this server knows: agents whose harness it does not run or whose runs it
// does not keep apart or whose model it has no key for, and chats or
// trackers it cannot answer in.
func serveApplier(s *store.Store, kr *secrets.Keyring, m *runs.Manager, chats *talkback.Registry, mg *modelGateway) *reconciler.Applier {
	return &reconciler.Applier{Store: s, Keyring: kr, Loader: &reconciler.Loader{}, Harness: func(h string) bool {
		_, ok := m.HarnessEnvironment(h)
		return ok
	}, Isolation: func(h string) string {
		env, _ := m.HarnessEnvironment(h)
		return m.EnvironmentIsolation(env)
	}, Credentials: func(name string) map[string]factory.Credentials { return chats.Configured[name] }, HarnessKey: mg.problem,
		SlackChannels: chats.SlackChannels}
}

// serveStore opens the store for serve (migrating an older format, which
// the log shows) and the secrets key it needs, and logs both.
func (a *app) serveStore() (*store.Store, *secrets.Keyring, error) {
	s, err := a.openStore()
	if err != nil {
		return nil, nil, err
	}
	kr, err := a.keyring(s)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	a.log.Info("store", "dir", a.dataDir(), "format", store.FormatVersion, "secrets_key", kr.Fingerprint())
	return s, kr, nil
}

// backupSchedule is the configuration's schedule of backups; nil when it
// has none.
func backupSchedule(cfg *server.FileConfig) (*backup.Schedule, error) {
	if cfg.Backups == nil {
		return nil, nil
	}
	return cfg.Backups.Schedule("")
}

// factorySources are the sources of the configuration's factories.
func factorySources(cfg *server.FileConfig, s *store.Store, kr *secrets.Keyring, log *slog.Logger) ([]server.FactorySource, error) {
	known, err := s.Factories()
	if err != nil {
		return nil, err
	}
	var sources []server.FactorySource
	for _, fc := range cfg.Factories {
		fs, err := factorySource(fc, s, kr, known, log)
		if err != nil {
			return nil, err
		}
		sources = append(sources, fs)
	}
	return sources, nil
}

// listen opens the server's listener and records its public URL (the
// configured one, else the listener's).
func listen(cfg *server.FileConfig, s *store.Store) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	publicURL := strings.TrimRight(cfg.PublicURL, "/")
	if publicURL == "" {
		publicURL = "http://" + ln.Addr().String()
	}
	b := s.NewBatch()
	b.PutMeta("public_url", publicURL)
	if err := b.Commit(); err != nil {
		ln.Close()
		return nil, "", err
	}
	return ln, publicURL, nil
}

// tuneGC: the Go heap of a server is small (a few MB: the store's cache
// and memtables live outside it), so at the default GOGC of 100 a flood of
// deliveries collects garbage 20 times a second. 400 cuts that by four for
// some 20 MB of heap. GOGC, when set, still decides.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// serveConfig is the server's configuration: the --config file (its
// factories' directories relative to it), or the one factory of --source,
// with the flags given on the command line winning over the file.
func (a *app) serveConfig(cmd *cobra.Command, o *serveOpts) (*server.FileConfig, error) {
	cfg := &server.FileConfig{}
	switch {
	case o.config != "" && o.source != "":
		return nil, errors.New("give --source or --config, not both")
	case o.config != "":
		c, err := server.LoadConfig(o.config)
		if err != nil {
			return nil, err
		}
		cfg = c
		base := filepath.Dir(o.config)
		for i, f := range cfg.Factories {
			if !gitsource.IsGitURL(f.Source) && !filepath.IsAbs(f.Source) {
				cfg.Factories[i].Source = filepath.Join(base, f.Source) // relative to the file
			}
		}
		if cfg.Backups != nil && !filepath.IsAbs(cfg.Backups.Dir) {
			cfg.Backups.Dir = filepath.Join(base, cfg.Backups.Dir) // relative to the file
		}
		if cfg.Data != "" && a.dataFlag == "" && os.Getenv("FACTORY_DATA") == "" {
			a.dataFlag = cfg.Data
		}
	case o.source != "":
		cfg.Factories = []server.FactoryConfig{{Name: o.name, Source: o.source, Ref: o.ref, Interval: o.interval.String()}}
	default:
		return nil, errors.New("give --source DIR|GIT_URL or --config FILE")
	}
	if cmd.Flags().Changed("listen") || cfg.Listen == "" {
		cfg.Listen = o.listen
	}
	if cmd.Flags().Changed("public-url") || cfg.PublicURL == "" {
		cfg.PublicURL = o.publicURL
	}
	return cfg, nil
}

// factorySource turns a configured factory into what the server runs: a
// watched directory, or a polled git remote with its credential read from
// a managed secret at each fetch (so a rotated credential is used at once).
func factorySource(fc server.FactoryConfig, s *store.Store, kr *secrets.Keyring, known []*factory.Factory, log *slog.Logger) (server.FactorySource, error) {
	if gitsource.IsGitURL(fc.Source) {
		src := &gitsource.Source{URL: fc.Source, Ref: fc.Ref}
		if fc.SecretRef != "" {
			name := fc.SecretRef
			src.Credential = func() ([]byte, error) {
				v, err := secrets.Current(s, kr, name)
				if err != nil {
					return nil, fmt.Errorf("git credential: %w", err)
				}
				return v, nil
			}
		}
		name, err := factoryName(fc.Name, namedSource{src, repoName(fc.Source)}, known)
		return server.FactorySource{Name: name, Source: src, Interval: fc.IntervalOr(defaultGitInterval)}, err
	}
	if fc.Ref != "" || fc.SecretRef != "" {
		return server.FactorySource{}, fmt.Errorf("factory %s: ref and secretRef apply to git sources; %s is a directory", fc.Name, fc.Source)
	}
	src := reconciler.DirSource{Root: fc.Source}
	if fi, err := os.Stat(fc.Source); err != nil || !fi.IsDir() {
		return server.FactorySource{}, fmt.Errorf("factory source %s is not a directory", fc.Source)
	}
	name, err := factoryName(fc.Name, src, known)
	root := src.String()
	return server.FactorySource{Name: name, Source: src, Interval: dirResync,
		Watch: func(ctx context.Context) (<-chan struct{}, error) {
			return watch.Dir(ctx, root, watchDebounce, log)
		}}, err
}

// namedSource names a git source after its repository for factoryName.
type namedSource struct {
	reconciler.Source
	base string
}

func repoName(url string) string {
	url = strings.TrimSuffix(strings.TrimRight(url, "/"), ".git")
	if i := strings.LastIndexAny(url, "/:"); i >= 0 {
		url = url[i+1:]
	}
	return url
}

// ensureAdminKey creates the first admin API key of a new store, prints it
// once, and leaves it in the data directory for the other commands.
func (a *app) ensureAdminKey(s *store.Store) error {
	keys, err := s.APIKeys()
	if err != nil || len(keys) > 0 {
		return err
	}
	k, err := (&service.Service{Store: s}).CreateAPIKey(context.Background(), factory.APIKeyRequest{Name: "admin", Scope: factory.ScopeAdmin})
	if err != nil {
		return err
	}
	key := k.Key
	path := filepath.Join(a.dataDir(), AdminKeyFile)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fmt.Fprintf(a.stdout, "Created the admin API key (shown once; also in %s):\n%s\n", path, key)
	return nil
}

// newLogger is the server's log: one structured line per event (a
// delivery's outcome, a run's change of state, a sync), as text or JSON.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level must be one of debug, info, warn, error, not %q", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
}
