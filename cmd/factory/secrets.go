package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"factory"

	"github.com/spf13/cobra"

	"factory/internal/secrets"
)

func (a *app) secretsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "secrets",
		Example: `  factory secrets create github-signing --from-stdin < secret.txt
  factory secrets list`,
		Short: "Manage the team's managed secrets (encrypted at rest; values are never listed)",
		Long: `Managed secrets hold webhook credentials: bearer tokens, URL tokens and providers'
signing secrets, and git credentials. A webhook names one with secretName; it must
exist before the webhook applies. Values are encrypted in the store (AES-256-GCM) and
never printed, except a generated value, once, when it is created or rotated.

While a server holds the store, these commands go through it, and a rotation is in
force for the webhooks that use the secret when the command returns.`,
	}
	cmd.AddCommand(a.secretsCreateCmd(), a.secretsRotateCmd(), a.secretsListCmd(), a.secretsDeleteCmd())
	return cmd
}

func (a *app) secretsCreateCmd() *cobra.Command {
	var fromStdin, urlSafe bool
	create := &cobra.Command{
		Use:   "create NAME [--from-stdin] [--url-safe]",
		Short: "Create a secret: generated, or read from standard input",
		Example: `  factory secrets create github-signing --from-stdin < secret.txt
  factory secrets create ops-token            # generated and printed once`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.putSecret(cmd, args[0], fromStdin, urlSafe, false)
		},
	}
	create.Flags().BoolVar(&fromStdin, "from-stdin", false, "read the value from standard input (one trailing newline is dropped)")
	create.Flags().BoolVar(&urlSafe, "url-safe", false, "require a URL-safe value (for url_token webhooks); generated values always are")

	return create
}

func (a *app) secretsRotateCmd() *cobra.Command {
	var rotateStdin bool
	rotate := &cobra.Command{
		Use: "rotate NAME [--from-stdin]",
		Example: `  factory secrets rotate ops-token                 # a new generated value, printed once
  factory secrets rotate github-signing --from-stdin < new.txt`,
		Short: "Replace a secret's value; webhooks use the new one from their factory's next sync",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.putSecret(cmd, args[0], rotateStdin, false, true)
		},
	}
	rotate.Flags().BoolVar(&rotateStdin, "from-stdin", false, "read the new value from standard input")

	return rotate
}

func (a *app) secretsListCmd() *cobra.Command {
	var output string
	list := &cobra.Command{
		Use:     "list",
		Example: `  factory secrets list --output json`,
		Short:   "List secrets: names, versions and dates, never values",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var secs []*factory.Secret
			err := a.withBackend(func(b backend) (err error) {
				secs, err = b.Secrets(cmd.Context())
				return err
			})
			if err != nil {
				return err
			}
			if output == "json" {
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
		},
	}
	outputFlag(list, &output, "text", "json")

	return list
}

func (a *app) secretsDeleteCmd() *cobra.Command {
	del := &cobra.Command{
		Use:     "delete NAME",
		Example: `  factory secrets delete old-token`,
		Short:   "Delete a secret (refused while a webhook references it)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := a.withBackend(func(b backend) error { return b.DeleteSecret(cmd.Context(), args[0]) })
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "Deleted secret %s.\n", args[0])
			return nil
		},
	}
	return del
}

// putSecret creates or rotates a secret, locally or through the server. A
// generated value is printed once, after it is durably stored.
func (a *app) putSecret(cmd *cobra.Command, name string, fromStdin, urlSafe, rotate bool) error {
	var value []byte
	if fromStdin {
		b, err := io.ReadAll(io.LimitReader(a.stdin, secrets.MaxValueBytes+2))
		if err != nil {
			return fmt.Errorf("read standard input: %w", err)
		}
		value = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
		if len(value) == 0 {
			return errors.New("the value on standard input is empty")
		}
	}
	var sec *factory.Secret
	var generated []byte
	live := false
	err := a.withBackendOr(!rotate, func(b backend) (err error) {
		live = b.Live()
		if rotate {
			sec, generated, err = b.RotateSecret(cmd.Context(), name, value)
		} else {
			sec, generated, err = b.CreateSecret(cmd.Context(), name, value, urlSafe)
		}
		return err
	})
	if err != nil {
		return err
	}
	verb := "Created"
	if rotate {
		verb = "Rotated"
	}
	fmt.Fprintf(a.stderr, "%s secret %s (version %d).\n", verb, name, sec.Version)
	switch {
	case len(generated) > 0:
		fmt.Fprintln(a.stderr, "Its value follows, shown this once: store it now.")
		fmt.Fprintln(a.stdout, string(generated))
	case sec.Generated:
		fmt.Fprintln(a.stderr, "It is a webhook's generated secret: reveal the new value once with factory webhooks reveal.")
	}
	if rotate {
		if live {
			fmt.Fprintln(a.stderr, "Webhooks that use it have switched to the new value; the old value no longer works.")
		} else {
			fmt.Fprintln(a.stderr, "Webhooks that use it switch to the new value at their factory's next sync; the old value stops working then.")
		}
	}
	return nil
}
