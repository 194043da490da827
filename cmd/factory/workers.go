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
	neturl "net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
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
	natsAuth     natsAuth
	auth         workers.Credentials // natsAuth, read (check)
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
	f.StringVar(&o.natsURL, "nats", "", "use this NATS cluster (with JetStream) instead of an embedded server: nats://host:port (credentials: --nats-creds, --nats-nkey, or --nats-user with its password in a file or FACTORY_NATS_PASSWORD)")
	natsAuthFlags(f, &o.natsAuth, "with --nats: ")
	f.DurationVar(&o.lease, "lease", 10*time.Second, "with workers: a worker that sends nothing for this long loses its run (ERROR, retryable)")
	f.BoolVar(&o.noLocal, "no-local-worker", false, "with workers: run no run in this process that a worker could run (they wait for a worker)")
	f.IntVar(&o.localMaxRuns, "local-max-runs", 0, "with workers: how many runs this process runs at once (default: runtime.maxConcurrentRuns)")
}

// natsAuth are the credentials made by a NATS cluster's operator, as the
// flags give them: files, or a user whose password is in a file or the
// environment. Never on the command line, which every local user reads
// (/proc/PID/cmdline), agents included.
type natsAuth struct {
	creds, nkey, user, passwordFile string
}

// NATSPasswordEnv holds the password of --nats-user when no
// --nats-password-file is given.
const NATSPasswordEnv = "FACTORY_NATS_PASSWORD"

func natsAuthFlags(f *pflag.FlagSet, n *natsAuth, prefix string) {
	f.StringVar(&n.creds, "nats-creds", "", prefix+"a NATS credentials file (JWT and nkey seed) of the cluster's operator")
	f.StringVar(&n.nkey, "nats-nkey", "", prefix+"an nkey seed file of the cluster's operator")
	f.StringVar(&n.user, "nats-user", "", prefix+"a user of the cluster's operator, whose password is in --nats-password-file or "+NATSPasswordEnv)
	f.StringVar(&n.passwordFile, "nats-password-file", "", prefix+"a file holding the NATS user's password (else "+NATSPasswordEnv+")")
}

// given says whether any of the flags was.
func (n *natsAuth) given() bool {
	return n.creds != "" || n.nkey != "" || n.user != "" || n.passwordFile != ""
}

// apply puts the flags' credentials into c. A password is read from
// --nats-password-file, else from the environment when c holds no secret
// of its own (a worker's credentials file may); it is for --nats-user,
// else for user.
func (n *natsAuth) apply(c *workers.Credentials, user string) error {
	c.CredsFile, c.NkeyFile = n.creds, n.nkey
	var password string
	switch {
	case n.passwordFile != "":
		b, err := os.ReadFile(n.passwordFile)
		if err != nil {
			return fmt.Errorf("--nats-password-file: %w", err)
		}
		if password = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"); password == "" {
			return fmt.Errorf("--nats-password-file: %s is empty", n.passwordFile)
		}
	case n.creds == "" && n.nkey == "" && c.Password == "" && c.NkeySeed == "":
		password = os.Getenv(NATSPasswordEnv)
	}
	if password == "" {
		if n.user != "" {
			return fmt.Errorf("--nats-user %s: give its password in --nats-password-file FILE or %s", n.user, NATSPasswordEnv)
		}
		return nil
	}
	c.Password, c.PasswordUser = password, cmp.Or(n.user, user)
	if c.PasswordUser == "" {
		return fmt.Errorf("a NATS password (--nats-password-file or %s) needs its user: --nats-user NAME", NATSPasswordEnv)
	}
	return nil
}

// checkNATSURL refuses a NATS URL (or list of them) that carries
// credentials: given as a flag, they are on the command line.
func checkNATSURL(flag, urls string) error {
	for _, u := range strings.Split(urls, ",") {
		p, err := neturl.Parse(strings.TrimSpace(u))
		if err != nil {
			return fmt.Errorf("%s: not a NATS URL (nats://host:port)", flag)
		}
		if p.User != nil {
			return fmt.Errorf("%s: the URL carries a user and password, which every local user can read on the command line: "+
				"give the user with --nats-user and the password in a file (--nats-password-file) or %s", flag, NATSPasswordEnv)
		}
	}
	return nil
}

// check reads and checks the NATS flags before anything starts.
func (o *workersOpts) check() error {
	if o.natsURL == "" {
		if o.natsAuth.given() {
			return errors.New("--nats-creds, --nats-nkey, --nats-password-file and --nats-user go with --nats (a NATS cluster of your own)")
		}
		return nil
	}
	if err := checkNATSURL("--nats", o.natsURL); err != nil {
		return err
	}
	return o.natsAuth.apply(&o.auth, "")
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
	cp, err := workers.StartControlPlane(ctx, workers.Options{Listen: listen, URL: o.natsURL, Auth: o.auth, StoreKey: key, Lease: o.lease},
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
		cp.SetOwner(m.Owns)
		cp.SetApprove(m.ApproveFor)
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
	credsFD, confined := -1, true
	var o worker.Options
	var auth natsAuth
	cmd := &cobra.Command{
		Use:   "worker --creds FILE [--id NAME] [--nats URL [--nats-creds FILE|--nats-nkey FILE|--nats-password-file FILE]] [--max-runs N] [--backend direct|docker]",
		Short: "Claim runs from a control plane's queue and run them on this machine",
		Long: `A worker connects to the control plane's NATS server with the credentials that
factory workers create printed, claims runs (at most --max-runs at once), runs each in a
workspace under --data, and reports their events back. A run that named this worker's
--id (a follow-up of a run it ran) comes to it; any other comes to whichever worker is free.

Where the control plane uses a NATS cluster of your own (serve --nats), the cluster's operator
makes the worker's NATS user, with the permissions factory workers create printed: give that
user's --nats-creds or --nats-nkey file, or its password in --nats-password-file FILE or
FACTORY_NATS_PASSWORD (the user is --nats-user, else --id). A --nats URL that carries a user
or password is refused: every local user can read a command line.

With --backend docker, each run executes in a container of its own, through the Docker
Engine API (DOCKER_HOST, else the daemon's default socket): the image is the run's runner's
platform.linux.dockerImage (else --docker-image), its CPU and memory limits the runner's
instanceShape, the runner's setupCommands run inside it first, and the run's workspace,
output folder and home are mounted at /factory/workspace, /factory/output and /factory/home
(the turn's script read-only at /factory/harness). The agent runs as the worker's user and
sees its own environment only. The host's network is never offered.

With --backend direct, each agent is confined (Landlock, where the kernel has it) to its
run's folders and the machine's programs: the worker's data directory and credentials are
out of its reach. Once read, the --creds file's path leaves the worker's command line.

SIGINT or SIGTERM drains it: it claims nothing more and exits once its runs have ended.`,
		Example: `  factory workers create builder-1 --output builder-1.creds   # on the control plane
  factory worker --creds builder-1.creds --max-runs 4 --data /var/lib/factory-worker
  factory worker --creds builder-1.creds --backend docker --docker-image debian:12
  factory worker --creds builder-1.creds --nats nats://nats.internal:4222 --nats-creds builder-1.nats.creds
  factory worker --id builder-1 --nats nats://nats.internal:4222 --nats-password-file /etc/factory/nats-password`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.worker(cmd.Context(), workerFlags{credsFile: credsFile, credsFD: credsFD, confined: confined}, &o, &auth)
		},
	}
	f := cmd.Flags()
	f.StringVar(&credsFile, "creds", "", "the credentials file factory workers create printed")
	f.IntVar(&credsFD, "creds-fd", -1, "the credentials as a descriptor this process inherited (what --creds becomes, off the command line)")
	_ = f.MarkHidden("creds-fd")
	f.BoolVar(&confined, "confine", true, "with --backend direct: confine each agent to its run's folders (Landlock, where the kernel has it)")
	f.StringVar(&o.ID, "id", "", "this worker's name (default: the credentials' user)")
	f.StringVar(&o.NATS, "nats", "", "the control plane's NATS URL (default: the one in the credentials file)")
	f.IntVar(&o.MaxRuns, "max-runs", 4, "how many runs at once")
	f.StringVar(&o.Backend, "backend", worker.BackendDirect, "direct (a process group per run) or docker (a container per run)")
	f.StringVar(&o.DockerNetwork, "docker-network", "", "with --backend docker: the containers' network (default: the daemon's bridge; none for no network)")
	f.StringVar(&o.DockerImage, "docker-image", "", "with --backend docker: the image of runs whose runner names no dockerImage")
	natsAuthFlags(f, &auth, "on a NATS cluster of your own: ")
	return cmd
}

// workerFlags are worker's own flags besides its options.
type workerFlags struct {
	credsFile string
	credsFD   int
	confined  bool
}

// worker reads a worker's credentials and starts it.
func (a *app) worker(ctx context.Context, fl workerFlags, o *worker.Options, auth *natsAuth) error {
	if o.NATS != "" {
		if err := checkNATSURL("--nats", o.NATS); err != nil {
			return err
		}
	}
	var c worker.CredentialsFile
	if fl.credsFile != "" || fl.credsFD >= 0 {
		b, path, err := readCreds(fl.credsFile, fl.credsFD)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &c); err != nil || c.User == "" {
			return fmt.Errorf("%s: not a credentials file of factory workers create", path)
		}
		if fl.credsFD < 0 {
			// Read, the file's path leaves the command line, which every
			// local user reads (/proc/PID/cmdline), agents included: this
			// process starts again without it.
			return execWithCreds(b, path)
		}
		fl.credsFile = path
	}
	o.Hidden = []string{fl.credsFile, auth.creds, auth.nkey, auth.passwordFile}
	o.Unconfined = !fl.confined
	o.ID, o.NATS = cmp.Or(o.ID, c.User), cmp.Or(o.NATS, c.URL)
	if c.User == "" {
		c.User = o.ID // a cluster's user: the worker's name is --id
	}
	if err := auth.apply(&c.Credentials, c.User); err != nil {
		return err
	}
	if o.ID == "" || o.NATS == "" {
		return errors.New("factory worker needs --creds FILE (what factory workers create printed), or, on a NATS cluster of your own, --id NAME and --nats URL with --nats-creds, --nats-nkey or a password (--nats-password-file, " + NATSPasswordEnv + ")")
	}
	return a.runWorker(ctx, c.Credentials, *o)
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
		Example: `  factory workers create builder-1 --output builder-1.creds
  factory workers list
  factory workers revoke builder-1`,
	}
	var output string
	var co workersCreateOpts
	create := &cobra.Command{
		Use: "create NAME [--nkey] [--output FILE [--force]]", Short: "Register a worker and write its credentials file (shown once)", Args: cobra.ExactArgs(1),
		Long: `Register a worker and give its credentials, once: with --output FILE, written to FILE
with mode 0600 (an existing FILE is refused unless --force is given, and then replaced);
without, printed on standard output.`,
		Example: "  factory workers create builder-1 --output builder-1.creds\n  factory workers create builder-2 --nkey --output builder-2.creds",
		RunE: func(cmd *cobra.Command, args []string) error {
			co.name = args[0]
			return a.createWorker(cmd.Context(), &co)
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
	create.Flags().StringVarP(&co.output, "output", "o", "", "write the credentials to this file, mode 0600, instead of standard output")
	create.Flags().BoolVar(&co.force, "force", false, "with --output: replace the file if it exists")
	create.Flags().BoolVar(&co.nkey, "nkey", false, "an nkey seed instead of a password: the worker signs the server's challenge, no secret crosses the network")
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

// workersCreateOpts are the options of factory workers create.
type workersCreateOpts struct {
	name, output string
	nkey, force  bool
}

// createWorker registers a worker through the server and hands over its
// credentials, which the server shows this once: into a file only its
// owner reads (refusing an existing one unless forced, before the worker
// is made), or on standard output.
func (a *app) createWorker(ctx context.Context, o *workersCreateOpts) error {
	if p := worker.IDProblem(o.name); p != "" {
		return errors.New(p)
	}
	if o.force && o.output == "" {
		return errors.New("--force goes with --output FILE")
	}
	var f *os.File
	if o.output != "" && !o.force {
		var err error
		if f, err = os.OpenFile(o.output, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists: give --force to overwrite it", o.output)
		} else if err != nil {
			return err
		}
		defer f.Close()
	}
	body := map[string]string{"name": o.name}
	if o.nkey {
		body["auth"] = workers.AuthNkey
	}
	var out json.RawMessage
	if err := a.workersCall(ctx, "POST", "/v1/admin/workers", body, &out); err != nil {
		if f != nil {
			f.Close()
			os.Remove(o.output)
		}
		return err
	}
	creds := append(out, '\n')
	switch {
	case f != nil:
		if _, err := f.Write(creds); err != nil {
			return fmt.Errorf("write %s: %w (worker %s exists: revoke it and create it again)", o.output, err, o.name)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("write %s: %w (worker %s exists: revoke it and create it again)", o.output, err, o.name)
		}
	case o.output != "":
		if err := writeFileAtomic(o.output, creds, 0o600); err != nil {
			return fmt.Errorf("%w (worker %s exists: revoke it and create it again)", err, o.name)
		}
	default:
		fmt.Fprintf(a.stderr, "Created worker %s: its credentials follow, shown this once (write them to a file with --output FILE: mode 0600).\n", o.name)
		_, err := a.stdout.Write(creds)
		return err
	}
	fmt.Fprintf(a.stderr, "Created worker %s: its credentials are in %s (mode 0600), shown this once.\n", o.name, o.output)
	return nil
}

// writeFileAtomic replaces path with data through a file of its own in
// the same folder, created with perm: the old file's mode does not carry
// over, and no reader sees half of it.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
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
