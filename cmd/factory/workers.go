package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"factory/internal/runs"
	"factory/internal/secrets"
	"factory/internal/store"
	"factory/internal/worker"
	"factory/internal/workers"
)

// workersOpts are serve's flags for workers (docs/spec/workers.md).
type workersOpts struct {
	natsListen   string
	listenSet    bool // --nats-listen was given
	natsURL      string
	natsAuth     workers.Credentials
	lease        time.Duration
	noLocal      bool
	localMaxRuns int
}

// DefaultNATSListen is where the embedded NATS server listens unless told
// otherwise: loopback, the same address at every start (workers
// reconnect to it).
const DefaultNATSListen = "127.0.0.1:4222"

func (o *workersOpts) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.natsListen, "nats-listen", DefaultNATSListen, "the embedded NATS JetStream server's address, through which runs go to workers; off: none, every run in this process")
	f.StringVar(&o.natsURL, "nats", "", "use this NATS cluster (with JetStream) instead of an embedded server: nats://[user:password@]host:port")
	natsAuthFlags(f, &o.natsAuth, "with --nats: ")
	f.DurationVar(&o.lease, "lease", 10*time.Second, "with workers: a worker that sends nothing for this long loses its run (ERROR, retryable)")
	f.BoolVar(&o.noLocal, "no-local-worker", false, "with workers: run no run in this process that a worker could run (they wait for a worker)")
	f.IntVar(&o.localMaxRuns, "local-max-runs", 0, "with workers: how many runs this process runs at once (default: runtime.maxConcurrentRuns)")
}

// natsAuthFlags are the flags of credentials made by a NATS cluster's
// operator.
func natsAuthFlags(f *pflag.FlagSet, c *workers.Credentials, prefix string) {
	f.StringVar(&c.CredsFile, "nats-creds", "", prefix+"a NATS credentials file (JWT and nkey seed) of the cluster's operator")
	f.StringVar(&c.NkeyFile, "nats-nkey", "", prefix+"an nkey seed file of the cluster's operator")
}

// startControlPlane starts the workers' control plane: on the embedded
// NATS server (by default), or on a cluster's (--nats); nil with
// --nats-listen off.
func startControlPlane(ctx context.Context, o *workersOpts, maxRuns int, s *store.Store, kr *secrets.Keyring, dataDir string, log *slog.Logger) (*controlPlane, error) {
	listen := o.natsListen
	if listen == "off" || listen == "" {
		if o.natsURL != "" {
			return nil, errors.New("--nats-listen off and --nats: --nats alone uses a cluster of your own")
		}
		return nil, nil
	}
	if o.natsURL != "" {
		if o.listenSet {
			return nil, errors.New("--nats-listen and --nats: one NATS server, embedded or a cluster's, not both")
		}
		listen = ""
	}
	if o.localMaxRuns <= 0 {
		o.localMaxRuns = maxRuns
	}
	key := base64.StdEncoding.EncodeToString(kr.Derive("the embedded NATS server's store"))
	cp, err := workers.StartControlPlane(ctx, workers.Options{Listen: listen, URL: o.natsURL, Auth: o.natsAuth, StoreKey: key, Lease: o.lease},
		s, dataDir, log)
	if err != nil && listen == DefaultNATSListen && !o.listenSet {
		return nil, fmt.Errorf("%w\n(another server on this machine? give it --nats-listen ADDR, or --nats-listen off to run every run in this process)", err)
	}
	if err != nil {
		return nil, err
	}
	return &controlPlane{ControlPlane: cp, noLocal: o.noLocal, localMaxRuns: o.localMaxRuns}, nil
}

// controlPlane is serve's handle on the workers; nil without them.
type controlPlane struct {
	*workers.ControlPlane
	noLocal      bool
	localMaxRuns int
}

// hosts gives the run manager the workers as a host of turns: runs that
// name a worker go there, and the rest when this process runs none
// (--no-local-worker) or has no room while a worker is connected. Without
// workers, every turn runs in this process.
func (cp *controlPlane) hosts(c *runs.Config) {
	if cp == nil {
		return
	}
	c.Workers, c.NoLocal, c.WorkersReady = cp.Host(), cp.noLocal, cp.Ready
	if cp.localMaxRuns > 0 {
		c.MaxConcurrent = cp.localMaxRuns
	}
}

// claims hands the workers' claims to the run manager, which owns the
// runs' state.
func (cp *controlPlane) claims(m *runs.Manager) {
	if cp != nil {
		cp.SetClaim(m.Claim)
	}
}

// workers is the server's registry of workers: nil without workers.
func (cp *controlPlane) workers() *workers.Registry {
	if cp == nil {
		return nil
	}
	return cp.Registry
}

func (cp *controlPlane) close() {
	if cp != nil {
		cp.Stop()
	}
}

func (a *app) workerCmd() *cobra.Command {
	var credsFile string
	var o worker.Options
	var auth worker.Credentials
	cmd := &cobra.Command{
		Use:   "worker --creds FILE [--id NAME] [--nats URL [--nats-creds FILE|--nats-nkey FILE]] [--max-runs N] [--backend direct|docker]",
		Short: "Claim runs from a control plane's queue and run them on this machine",
		Long: `A worker connects to the control plane's NATS server with the credentials that
factory workers create printed, claims runs (at most --max-runs at once), runs each in a
workspace under --data, and reports their events back. A run that named this worker's
--id (a follow-up of a run it ran) comes to it; any other comes to whichever worker is free.

Where the control plane uses a NATS cluster of your own (serve --nats), the cluster's operator
makes the worker's NATS user, with the permissions factory workers create printed: give that
user's --nats-creds or --nats-nkey file (or a user and password in --nats URL).

With --backend docker, each run executes in a container of its own, through the Docker
Engine API (DOCKER_HOST, else the daemon's default socket): the image is the run's runner's
platform.linux.dockerImage (else --docker-image), its CPU and memory limits the runner's
instanceShape, the runner's setupCommands run inside it first, and the run's folder is
mounted at /factory (the workspace at /factory/workspace). The agent runs as the worker's
user and sees its own environment only. The host's network is never offered.

SIGINT or SIGTERM drains it: it claims nothing more and exits once its runs have ended.`,
		Example: `  factory workers create builder-1 > builder-1.creds     # on the control plane
  factory worker --creds builder-1.creds --max-runs 4 --data /var/lib/factory-worker
  factory worker --creds builder-1.creds --backend docker --docker-image debian:12
  factory worker --creds builder-1.creds --nats nats://nats.internal:4222 --nats-creds builder-1.nats.creds`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c worker.CredentialsFile
			if credsFile != "" {
				b, err := os.ReadFile(credsFile)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(b, &c); err != nil || c.User == "" {
					return fmt.Errorf("%s: not a credentials file of factory workers create", credsFile)
				}
			}
			o.ID, o.NATS = cmp.Or(o.ID, c.User), cmp.Or(o.NATS, c.URL)
			c.CredsFile, c.NkeyFile = auth.CredsFile, auth.NkeyFile
			if c.User == "" {
				c.User = o.ID // a cluster's user: the worker's name is --id
			}
			if o.ID == "" || o.NATS == "" {
				return errors.New("factory worker needs --creds FILE (what factory workers create printed), or, on a NATS cluster of your own, --id NAME and --nats URL with --nats-creds or --nats-nkey")
			}
			return a.runWorker(cmd.Context(), c.Credentials, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&credsFile, "creds", "", "the credentials file factory workers create printed")
	f.StringVar(&o.ID, "id", "", "this worker's name (default: the credentials' user)")
	f.StringVar(&o.NATS, "nats", "", "the control plane's NATS URL (default: the one in the credentials file)")
	f.IntVar(&o.MaxRuns, "max-runs", 4, "how many runs at once")
	f.StringVar(&o.Backend, "backend", worker.BackendDirect, "direct (a process group per run) or docker (a container per run)")
	f.StringVar(&o.DockerNetwork, "docker-network", "", "with --backend docker: the containers' network (default: the daemon's bridge; none for no network)")
	f.StringVar(&o.DockerImage, "docker-image", "", "with --backend docker: the image of runs whose runner names no dockerImage")
	natsAuthFlags(f, &auth, "on a NATS cluster of your own: ")
	return cmd
}

func (a *app) runWorker(ctx context.Context, c worker.Credentials, o worker.Options) error {
	if o.ID != c.User {
		return fmt.Errorf("--id %s: the credentials are worker %s's", o.ID, c.User)
	}
	log, err := newLogger(a.stderr, "text", "info")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if o.Dir, err = filepath.Abs(a.dataDir()); err != nil {
		return err
	}
	return worker.Run(ctx, c, o, log)
}

func (a *app) workersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "Manage the workers of a server started with --nats-listen or --nats",
		Example: `  factory workers create builder-1 > builder-1.creds
  factory workers list
  factory workers revoke builder-1`,
	}
	var output string
	var nkey bool
	create := &cobra.Command{
		Use: "create NAME [--nkey]", Short: "Register a worker and print its credentials file (once)", Args: cobra.ExactArgs(1),
		Example: "  factory workers create builder-1 > builder-1.creds\n  factory workers create builder-2 --nkey > builder-2.creds",
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]string{"name": args[0]}
			if nkey {
				body["auth"] = workers.AuthNkey
			}
			var out json.RawMessage
			if err := a.workersCall(cmd.Context(), "POST", "/v1/admin/workers", body, &out); err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "Created worker %s: its credentials follow, shown this once.\n", args[0])
			fmt.Fprintln(a.stdout, string(out))
			return nil
		},
	}
	list := &cobra.Command{
		Use: "list", Short: "List the workers", Args: cobra.NoArgs, Example: "  factory workers list --output json",
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				Workers []workers.WorkerInfo `json:"workers"`
			}
			if err := a.workersCall(cmd.Context(), "GET", "/v1/admin/workers", nil, &out); err != nil {
				return err
			}
			if output == "json" {
				return printJSON(a.stdout, out)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCONNECTED\tRUNS\tLAST HEARD\tCREATED\tREVOKED")
			for _, w := range out.Workers {
				revoked, heard := "-", "-"
				if w.RevokedAt != nil {
					revoked = w.RevokedAt.Format(time.RFC3339)
				}
				if w.LastHeartbeat != nil {
					heard = time.Since(*w.LastHeartbeat).Round(time.Second).String() + " ago"
				}
				fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%s\t%s\n", w.Name, w.Connected, w.RunsActive, heard, w.CreatedAt.Format(time.RFC3339), revoked)
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	create.Flags().BoolVar(&nkey, "nkey", false, "an nkey seed instead of a password: the worker signs the server's challenge, no secret crosses the network")
	revoke := &cobra.Command{
		Use: "revoke NAME", Short: "Refuse a worker's next connections", Args: cobra.ExactArgs(1),
		Example: "  factory workers revoke builder-1",
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.workersCall(cmd.Context(), "POST", "/v1/admin/workers/"+args[0]+"/revoke", map[string]string{}, nil)
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// workersCall goes through the running server: it holds the NATS server.
func (a *app) workersCall(ctx context.Context, method, path string, body, out any) error {
	c := a.remote()
	if c == nil {
		return errors.New("no server is running on this data directory (or given with --server): workers are managed through one started with --nats-listen or --nats")
	}
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	return apiError(c.Do(ctx, method, path, rd, out))
}
