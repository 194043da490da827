package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"factory"

	"github.com/spf13/cobra"

	"factory/client"
	"factory/internal/reconciler"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/store"
)

// AdminKeyFile holds the admin API key that serve creates on a new store.
const AdminKeyFile = "admin-api-key"

type app struct {
	dataFlag, serverFlag, apiKeyFlag string
	// log hears what opening the store does (its format migrations); nil:
	// text on standard error.
	log *slog.Logger

	stdin          io.Reader
	stdout, stderr io.Writer
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use: "factory",
		Example: `  factory reconcile --dry-run --source examples/factory
  factory serve --source examples/factory --name example
  factory status`,
		Short: "Run cloud coding agents from git: webhooks and automations as code",
		Long: `factory reconciles factory repositories (webhooks/*.yaml and automations/*.md)
into a state store, serves webhook ingress and the Agents API, and runs agents.

Start with:
  factory reconcile --dry-run --source DIR   check a factory repository, change nothing
  factory reconcile --source DIR             apply it and print the webhooks' UIDs
  factory status                             show factories, UIDs and ingress URLs
  factory serve --source DIR                 keep it reconciled and serve the API`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetIn(a.stdin)
	pf := root.PersistentFlags()
	pf.StringVar(&a.dataFlag, "data", "", "state store directory (default $FACTORY_DATA, else ./.factory)")
	pf.StringVar(&a.serverFlag, "server", "", "talk to a running server at this URL instead of opening the store (default $FACTORY_SERVER)")
	pf.StringVar(&a.apiKeyFlag, "api-key", "", "API key for --server (default $FACTORY_API_KEY, else the data directory's admin key)")
	root.AddCommand(a.reconcileCmd(), a.statusCmd(), a.serveCmd(), a.secretsCmd(), a.webhooksCmd(),
		a.automationsCmd(), a.runsCmd(), a.tasksCmd(), a.inboxCmd(), a.schedulesCmd(), a.apikeysCmd(), a.backupCmd(), a.restoreCmd(), a.schemaCmd(), a.versionCmd(), a.demoAgentCmd(), a.workerCmd(), a.workersCmd(), a.harnessesCmd())
	return root
}

func (a *app) dataDir() string {
	if a.dataFlag != "" {
		return a.dataFlag
	}
	if d := os.Getenv("FACTORY_DATA"); d != "" {
		return d
	}
	return ".factory"
}

func (a *app) serverURL() string {
	if a.serverFlag != "" {
		return a.serverFlag
	}
	return os.Getenv("FACTORY_SERVER")
}

// storeExists reports whether the data directory holds a store.
func (a *app) storeExists() bool {
	_, err := os.Stat(filepath.Join(a.dataDir(), "db"))
	return err == nil
}

// openStore opens the store for a command that must write it. When a
// server holds it, the error says so and what to do instead.
func (a *app) openStore() (*store.Store, error) {
	s, err := a.open()
	if errors.Is(err, store.ErrLocked) {
		if info, ok := a.runningServer(); ok {
			return nil, fmt.Errorf("the server at %s (pid %d) holds the store %s: stop it to run this command, or use read commands, which go through it", info.URL, info.PID, a.dataDir())
		}
		return nil, fmt.Errorf("the store %s is in use by another process; try again when it has finished", a.dataDir())
	}
	return s, err
}

// remote returns a client of the server to go through: --server, or the
// server that holds the store. nil means: open the store.
func (a *app) remote() *client.Client {
	if u := a.serverURL(); u != "" {
		return client.New(u, a.apiKey())
	}
	if a.storeHeldByServer() {
		info, _ := a.runningServer()
		return client.New(info.URL, a.apiKey())
	}
	return nil
}

// apiError turns a server's problem into the plain message a command
// prints.
func apiError(err error) error {
	var cerr *client.Error
	if errors.As(err, &cerr) && cerr.Detail != "" {
		return errors.New(cerr.Detail)
	}
	return err
}

// storeHeldByServer reports whether a running server holds the store.
func (a *app) storeHeldByServer() bool {
	if _, ok := a.runningServer(); !ok {
		return false
	}
	s, err := a.open()
	if err == nil {
		s.Close()
		return false // a server.json left by a server that died
	}
	return errors.Is(err, store.ErrLocked)
}

// noStore is the error of a command run where there is no store: it says
// where it looked, and how to point it elsewhere.
func (a *app) noStore() error {
	dir := a.dataDir()
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return fmt.Errorf("no state store in %s (and no server): apply a factory first (factory reconcile --source DIR), or pass --data DIR or --server URL", dir)
}

// applierFor opens the store and the keyring for applying a source, and
// resolves which factory the source is applied to. The caller closes the
// applier's store.
func (a *app) applierFor(nameFlag string, src reconciler.Source) (*reconciler.Applier, string, error) {
	s, err := a.openStore()
	if err != nil {
		return nil, "", err
	}
	kr, err := a.keyring(s)
	if err == nil {
		var known []*factory.Factory
		if known, err = s.Factories(); err == nil {
			var name string
			if name, err = factoryName(nameFlag, src, known); err == nil {
				return &reconciler.Applier{Store: s, Keyring: kr}, name, nil
			}
		}
	}
	s.Close()
	return nil, "", err
}

// open opens the store of the data directory: a store of an older format
// is migrated (and says so), one of a newer format refused.
func (a *app) open() (*store.Store, error) {
	log := a.log
	if log == nil {
		log = slog.New(slog.NewTextHandler(a.stderr, nil))
	}
	return store.OpenWith(a.dataDir(), store.Options{Log: log, Version: versionString()})
}

// keyring loads the secrets key for the open store, and checks it is the
// one the store's secrets are sealed with.
func (a *app) keyring(s *store.Store) (*secrets.Keyring, error) {
	return secrets.ForStore(s, a.dataDir())
}

func (a *app) runningServer() (*server.Info, bool) {
	b, err := os.ReadFile(filepath.Join(a.dataDir(), server.ServerFile))
	if err != nil {
		return nil, false
	}
	var info server.Info
	if json.Unmarshal(b, &info) != nil || info.URL == "" {
		return nil, false
	}
	return &info, true
}

func (a *app) apiKey() string {
	if a.apiKeyFlag != "" {
		return a.apiKeyFlag
	}
	if k := os.Getenv("FACTORY_API_KEY"); k != "" {
		return k
	}
	b, _ := os.ReadFile(filepath.Join(a.dataDir(), AdminKeyFile))
	return strings.TrimSpace(string(b))
}

// stateView is where read commands get the state from: the store, or the
// server that holds it.
type stateView interface {
	reconciler.StateReader
	reconciler.Payloads
	Statuses(ctx context.Context) ([]*factory.FactoryStatus, error)
	Close()
}

// errNoStore says there is no state at all (no store, no server).
var errNoStore = errors.New("no state store")

// view opens the state for reading: --server when given; else the store,
// or the server holding it (it records its address in the data directory).
func (a *app) view() (stateView, error) {
	if u := a.serverURL(); u != "" {
		return remoteView{client.New(u, a.apiKey())}, nil
	}
	if !a.storeExists() {
		return nil, errNoStore
	}
	s, err := a.open()
	if errors.Is(err, store.ErrLocked) {
		if info, ok := a.runningServer(); ok {
			return remoteView{client.New(info.URL, a.apiKey())}, nil
		}
		return nil, fmt.Errorf("the store %s is in use by another process that is not a server; try again when it has finished", a.dataDir())
	}
	if err != nil {
		return nil, err
	}
	return localView{s}, nil
}

type localView struct{ *store.Store }

func (v localView) Close() { v.Store.Close() }

func (v localView) Statuses(ctx context.Context) ([]*factory.FactoryStatus, error) {
	fs, err := v.Factories()
	if err != nil {
		return nil, err
	}
	base, err := v.Meta("public_url")
	if err != nil {
		return nil, err
	}
	if base == "" {
		base = factory.DefaultPublicURL
	}
	var out []*factory.FactoryStatus
	for _, f := range fs {
		st, err := reconciler.Status(v.Store, f, base)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

type remoteView struct{ *client.Client }

func (v remoteView) Close() {}

func (v remoteView) Statuses(ctx context.Context) ([]*factory.FactoryStatus, error) {
	fs, err := v.Factories(ctx)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", v.BaseURL, err)
	}
	var out []*factory.FactoryStatus
	for _, f := range fs {
		st, err := v.Factory(ctx, f.UID)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// splitName parses NAME or FACTORY/NAME.
func splitName(arg string) (factoryName, name string) {
	if f, n, ok := strings.Cut(arg, "/"); ok {
		return f, n
	}
	return "", arg
}

// outputFlag adds --output with the allowed values.
func outputFlag(cmd *cobra.Command, p *string, allowed ...string) {
	cmd.Flags().StringVarP(p, "output", "o", "text", "output format: "+strings.Join(allowed, ", "))
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		for _, v := range allowed {
			if *p == v {
				return nil
			}
		}
		return fmt.Errorf("--output must be one of %s, not %q", strings.Join(allowed, ", "), *p)
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
