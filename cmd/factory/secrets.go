package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"factory/secrets"
	"factory/store"
)

// maxSecretBytes bounds a secret read from standard input.
const maxSecretBytes = 64 << 10

var secretNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func (a *app) secretsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Manage the team's managed secrets (encrypted at rest; values are never listed)",
		Long: `Managed secrets hold webhook credentials: bearer tokens, URL tokens and providers'
signing secrets. A webhook names one with secretName; it must exist before the
webhook applies. Values are encrypted in the store (AES-256-GCM) and never printed,
except a generated value, once, when it is created or rotated.`,
	}
	var fromStdin, urlSafe bool
	create := &cobra.Command{
		Use:   "create NAME [--from-stdin] [--url-safe]",
		Short: "Create a secret: generated, or read from standard input",
		Example: `  factory secrets create github-signing --from-stdin < secret.txt
  factory secrets create ops-token            # generated and printed once`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.putSecret(args[0], fromStdin, urlSafe, false)
		},
	}
	create.Flags().BoolVar(&fromStdin, "from-stdin", false, "read the value from standard input (one trailing newline is dropped)")
	create.Flags().BoolVar(&urlSafe, "url-safe", false, "require a URL-safe value (for url_token webhooks); generated values always are")

	var rotateStdin bool
	rotate := &cobra.Command{
		Use:   "rotate NAME [--from-stdin]",
		Short: "Replace a secret's value; webhooks use the new one from their factory's next sync",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.putSecret(args[0], rotateStdin, false, true)
		},
	}
	rotate.Flags().BoolVar(&rotateStdin, "from-stdin", false, "read the new value from standard input")

	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List secrets: names, versions and dates, never values",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withStore(func(s *store.Store) error {
				secs, err := s.Secrets()
				if err != nil {
					return err
				}
				if output == "json" {
					if secs == nil {
						secs = []*store.Secret{}
					}
					return printJSON(a.stdout, map[string]any{"secrets": secs})
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tVERSION\tKIND\tURL-SAFE\tCREATED\tROTATED")
				for _, sec := range secs {
					kind := "supplied"
					if sec.Generated {
						kind = "generated"
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\t%t\t%s\t%s\n", sec.Name, sec.Version, kind, sec.URLSafe,
						sec.CreatedAt.Format(time.RFC3339), sec.RotatedAt.Format(time.RFC3339))
				}
				return tw.Flush()
			})
		},
	}
	outputFlag(list, &output, "text", "json")

	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a secret (refused while a webhook references it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withStore(func(s *store.Store) error {
				sec, err := s.Secret(args[0])
				if errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("no secret %q", args[0])
				}
				if err != nil {
					return err
				}
				whs, err := s.AllWebhooks()
				if err != nil {
					return err
				}
				for _, w := range whs {
					if w.SecretName == sec.Name {
						return fmt.Errorf("secret %q is used by webhook %s/%s (%s): remove its secretName first", sec.Name, w.Factory, w.Key, w.UID)
					}
				}
				b := s.NewBatch()
				b.DeleteSecret(sec)
				if err := b.Commit(); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "Deleted secret %s.\n", sec.Name)
				return nil
			})
		},
	}
	cmd.AddCommand(create, rotate, list, del)
	return cmd
}

// putSecret creates or rotates a secret. A generated value is printed once,
// after it is durably stored.
func (a *app) putSecret(name string, fromStdin, urlSafe, rotate bool) error {
	if !secretNamePattern.MatchString(name) {
		return fmt.Errorf("secret name %q must be a letter or digit, then letters, digits, '.', '_' or '-' (at most 128)", name)
	}
	s, err := a.openStore()
	if err != nil {
		return err
	}
	defer s.Close()
	kr, err := a.keyring()
	if err != nil {
		return err
	}
	old, err := s.Secret(name)
	switch {
	case err == nil && !rotate:
		return fmt.Errorf("secret %q exists: rotate it with factory secrets rotate %s", name, name)
	case errors.Is(err, store.ErrNotFound) && rotate:
		return fmt.Errorf("no secret %q: create it with factory secrets create %s", name, name)
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return err
	}

	if rotate && old.Generated && fromStdin {
		return fmt.Errorf("secret %q was generated for a webhook: rotate it without --from-stdin, or give the webhook a secretName", name)
	}
	var value []byte
	generated := !fromStdin
	if fromStdin {
		b, err := io.ReadAll(io.LimitReader(a.stdin, maxSecretBytes+1))
		if err != nil {
			return fmt.Errorf("read standard input: %w", err)
		}
		if len(b) > maxSecretBytes {
			return fmt.Errorf("the value is over %d bytes", maxSecretBytes)
		}
		value = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
		if len(value) == 0 {
			return errors.New("the value on standard input is empty")
		}
		if urlSafe && !secrets.URLSafe(value) {
			return errors.New("the value is not URL-safe: use at least 32 of A-Z a-z 0-9 _ -")
		}
	} else if rotate && old.Generated && old.Format != "token" && old.Format != "" {
		value = secrets.NewStandardWebhooksSecret()
	} else {
		value = secrets.NewToken()
	}

	now := time.Now().UTC()
	// Generated marks a secret the service generated for a webhook: it is
	// revealed through the webhook, once, and rotated by generating again.
	sec := &store.Secret{Name: name, Version: 1, URLSafe: secrets.URLSafe(value), CreatedAt: now, RotatedAt: now}
	if rotate {
		sec.Version = old.Version + 1
		sec.CreatedAt = old.CreatedAt
		sec.Format = old.Format
		sec.Generated = old.Generated
	}
	sealed, err := kr.Seal(name, value)
	if err != nil {
		return err
	}
	b := s.NewBatch()
	b.PutSecret(sec, sealed)
	if err := b.Commit(); err != nil {
		return err
	}
	verb := "Created"
	if rotate {
		verb = "Rotated"
	}
	fmt.Fprintf(a.stderr, "%s secret %s (version %d).\n", verb, name, sec.Version)
	if generated && !sec.Generated {
		fmt.Fprintln(a.stderr, "Its value follows, shown this once: store it now.")
		fmt.Fprintln(a.stdout, string(value))
	} else if sec.Generated {
		fmt.Fprintln(a.stderr, "It is a webhook's generated secret: reveal the new value once with factory webhooks reveal.")
	}
	if rotate {
		fmt.Fprintln(a.stderr, "Webhooks that use it switch to the new value at their factory's next sync; the old value stops working then.")
	}
	return nil
}
