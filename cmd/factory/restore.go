package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"factory/internal/backup"
	"factory/internal/secrets"
)

type restoreOpts struct {
	input string
}

func (a *app) restoreCmd() *cobra.Command {
	o := &restoreOpts{}
	cmd := &cobra.Command{
		Use:   "restore --input FILE|- --data DIR",
		Short: "Restore a backup into an empty or missing data directory",
		Long: `Restore the store of a backup (factory backup) into --data, which must be empty or
missing: a restore never mixes with, or replaces, a store. Nothing is written there until the
whole backup has been checked: the manifest first, then every file's size and SHA-256, then
the store itself (it opens, and holds the records the manifest counts). A backup of an older
store format is migrated; one of a newer format is refused.

The secrets key is not in the backup: put the key whose fingerprint this command prints in
DIR/secrets.key (or FACTORY_SECRETS_KEY) before factory serve, which refuses a wrong one.
Every UID, and so every ingress URL, is kept: nothing needs re-pointing. See
docs/operations.md.`,
		Example: `  factory restore --input /var/backups/factory/factory-backup-20260301T120000.000Z.tar.gz --data /var/lib/factory
  ssh backup-host 'cat factory.tar.gz' | factory restore --input - --data /var/lib/factory`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return a.restore(o) },
	}
	cmd.Flags().StringVarP(&o.input, "input", "i", "", "the backup to restore (- for standard input)")
	_ = cmd.MarkFlagRequired("input")
	return cmd
}

func (a *app) restore(o *restoreOpts) error {
	var in io.Reader = a.stdin
	name := "standard input"
	if o.input != "-" {
		f, err := os.Open(o.input)
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, o.input
	}
	dir := a.dataDir()
	r, err := backup.Restore(in, dir, backup.RestoreOptions{Log: slog.New(slog.NewTextHandler(a.stderr, nil)), Binary: versionString()})
	if err != nil {
		return fmt.Errorf("restore %s: %w (nothing was written to %s)", name, err, dir)
	}
	m := r.Manifest
	fmt.Fprintf(a.stdout, "Restored the backup of %s (store format %d, made by factory %s) into %s:\n  %s.\n",
		m.CreatedAt.Format(time.RFC3339Nano), m.StoreFormat, m.Binary, dir, backup.CountsText(m.Counts))
	for _, mg := range r.Migrated {
		fmt.Fprintf(a.stdout, "Migrated the store from format %d to %d: %s.\n", mg.From, mg.From+1, mg.Name)
	}
	if r.InProgress+r.Queued > 0 {
		fmt.Fprintf(a.stdout, "At the instant %d runs were in progress and %d queued: when factory serve starts, it ends the first as after a crash (ERROR, retryable: a follow-up continues them) and runs the second.\n",
			r.InProgress, r.Queued)
	}
	a.restoreKeyAdvice(dir, m.SecretsKey)
	return nil
}

// restoreKeyAdvice says which secrets key the restored store needs, and
// whether the one in the environment is it.
func (a *app) restoreKeyAdvice(dir, want string) {
	if want == "" {
		fmt.Fprintf(a.stdout, "The backup names no secrets key: start factory serve with the key of the machine it came from in %s.\n", filepath.Join(dir, secrets.KeyFile))
		return
	}
	if os.Getenv(secrets.KeyEnv) != "" {
		if kr, err := secrets.LoadKeyring(dir); err == nil && kr.Fingerprint() == want {
			fmt.Fprintf(a.stdout, "Its secrets key (fingerprint %s) is the one in %s: factory serve can start.\n", want, secrets.KeyEnv)
			return
		}
		fmt.Fprintf(a.stdout, "Warning: %s is not its secrets key (fingerprint %s): factory serve will refuse to start with it.\n", secrets.KeyEnv, want)
		return
	}
	fmt.Fprintf(a.stdout, "Its secrets are sealed with the secrets key of fingerprint %s, which is not in the backup: put that key in %s (or in %s) before factory serve.\n",
		want, filepath.Join(dir, secrets.KeyFile), secrets.KeyEnv)
}
