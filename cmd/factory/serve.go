package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"factory/server"
	"factory/store"
)

func (a *app) serveCmd() *cobra.Command {
	o := &reconcileOpts{}
	var listen, publicURL string
	var poll time.Duration
	cmd := &cobra.Command{
		Use:   "serve --source DIR",
		Short: "Keep a factory reconciled from its source and serve the HTTP API",
		Long: `Reconcile the factory at --source, then read it again every --poll-interval and
apply each new valid revision; an invalid revision is refused, logged with file:line,
shown in status, and the last good state keeps serving. Serves /healthz, /readyz and
the API on one listener. SIGINT or SIGTERM shut it down gracefully.

On a new store it creates an admin API key, prints it once and writes it to
<data>/admin-api-key (mode 0600), where the other commands find it. While it runs,
read commands (status, reconcile --dry-run) go through it.`,
		Example: "  factory serve --source examples/factory --name example",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := sourceOf(o)
			if err != nil {
				return err
			}
			ap, name, err := a.applierFor(o.name, src)
			if err != nil {
				return err
			}
			defer ap.Store.Close()
			s := ap.Store
			if err := a.ensureAdminKey(s); err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", listen, err)
			}
			if publicURL == "" {
				publicURL = "http://" + ln.Addr().String()
			}
			publicURL = strings.TrimRight(publicURL, "/")
			b := s.NewBatch()
			b.PutMeta("public_url", publicURL)
			if err := b.Commit(); err != nil {
				ln.Close()
				return err
			}
			log := slog.New(slog.NewTextHandler(a.stderr, nil))
			srv := server.New(server.Config{
				PublicURL:    publicURL,
				Factories:    []server.FactorySource{{Name: name, Source: src}},
				PollInterval: poll,
			}, ap, log)
			return srv.Run(cmd.Context(), ln)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.source, "source", "", "the factory repository: a directory (required)")
	f.StringVar(&o.name, "name", "", "the factory's name (default: as for reconcile)")
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&publicURL, "public-url", "", "base URL senders reach this server at, for ingress URLs (default http://<listen>)")
	f.DurationVar(&poll, "poll-interval", time.Second, "how often the source is read again")
	_ = cmd.MarkFlagRequired("source")
	return cmd
}

// ensureAdminKey creates the first admin API key of a new store, prints it
// once, and leaves it in the data directory for the other commands.
func (a *app) ensureAdminKey(s *store.Store) error {
	keys, err := s.APIKeys()
	if err != nil || len(keys) > 0 {
		return err
	}
	key, err := createAPIKey(s, "admin", store.ScopeAdmin)
	if err != nil {
		return err
	}
	path := filepath.Join(a.dataDir(), AdminKeyFile)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fmt.Fprintf(a.stdout, "Created the admin API key (shown once; also in %s):\n%s\n", path, key)
	return nil
}
