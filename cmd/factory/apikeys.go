package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"factory"
)

func (a *app) apikeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "apikeys",
		Example: `  factory apikeys create ci-bot --scope runs
  factory apikeys list`,
		Short: "Manage API keys (stored hashed; a key is printed once)",
		Long: `API keys authenticate calls to the server's API. A key has one scope: runs (the Agents
API), read (everything but secrets and changes: pull-request checks, dashboards, metrics) or
admin (everything). While a server holds the store, these commands go through it (with an
admin key); otherwise they use the store.`,
	}
	cmd.AddCommand(a.apikeysCreateCmd(), a.apikeysListCmd(), a.apikeysRevokeCmd())
	return cmd
}

func (a *app) apikeysCreateCmd() *cobra.Command {
	var req factory.APIKeyRequest
	create := &cobra.Command{
		Use:   "create NAME [--scope runs|read|admin] [--github-token-secret S] [--gitlab-token-secret S]",
		Short: "Create an API key and print it once",
		Example: `  factory apikeys create ci-bot --scope runs
  factory apikeys create pr-check --scope read   # for reconcile --dry-run --server in CI
  factory apikeys create alice --scope runs --github-token-secret alice-github   # runs reach GitHub as alice (credentialStrategy: CREATOR)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			return a.withBackendOr(true, func(b backend) error {
				k, err := b.CreateAPIKey(cmd.Context(), req)
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stderr, "Created API key %s (scope %s), shown this once:\n", k.APIKey.Name, k.APIKey.Scope)
				fmt.Fprintln(a.stdout, k.Key)
				return nil
			})
		},
	}
	create.Flags().StringVar(&req.GitHubTokenSecret, "github-token-secret", "", "a managed secret holding the key's person's GitHub token: runs the key creates use it where a factory's credentialStrategy is CREATOR")
	create.Flags().StringVar(&req.GitLabTokenSecret, "gitlab-token-secret", "", "the same for GitLab")
	create.Flags().StringVar(&req.Scope, "scope", factory.ScopeRuns, "one of "+strings.Join(factory.Scopes, ", ")+": runs (the Agents API), read (read-only), admin (everything)")
	return create
}

func (a *app) apikeysListCmd() *cobra.Command {
	var output string
	list := &cobra.Command{
		Use:     "list",
		Short:   "List API keys: names, scopes and prefixes",
		Example: "  factory apikeys list --output json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var keys []*factory.APIKey
			err := a.withBackend(func(b backend) (err error) {
				keys, err = b.APIKeys(cmd.Context())
				return err
			})
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(a.stdout, map[string]any{"api_keys": keys})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSCOPE\tPREFIX\tCREATED\tREVOKED")
			for _, k := range keys {
				revoked := "-"
				if k.RevokedAt != nil {
					revoked = k.RevokedAt.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%s\n", k.Name, k.Scope, k.Prefix, k.CreatedAt.Format(time.RFC3339), revoked)
			}
			return tw.Flush()
		},
	}
	outputFlag(list, &output, "text", "json")
	return list
}

func (a *app) apikeysRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "revoke KEY",
		Short:   "Revoke an API key at once (give the key itself)",
		Example: "  factory apikeys revoke fk_...",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(b backend) error {
				k, err := b.RevokeAPIKey(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "Revoked API key %s.\n", k.Name)
				return nil
			})
		},
	}
}
