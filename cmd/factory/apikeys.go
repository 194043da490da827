package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"factory"

	"github.com/spf13/cobra"

	"factory/internal/store"
)

// newAPIKey returns a key: "fk_" and 256 random bits.
func newAPIKey() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return "fk_" + base64.RawURLEncoding.EncodeToString(b)
}

// createAPIKey stores a new key's record and returns the key, which is not
// kept anywhere else.
func createAPIKey(s *store.Store, name, scope string) (string, error) {
	key := newAPIKey()
	b := s.NewBatch()
	b.PutAPIKey(key, &factory.APIKey{Name: name, Scope: scope, Prefix: key[:8], CreatedAt: time.Now().UTC()})
	return key, b.Commit()
}

func (a *app) apikeysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "apikeys", Short: "Manage API keys (stored hashed; a key is printed once)"}
	cmd.AddCommand(a.apikeysCreateCmd(), a.apikeysListCmd(), a.apikeysRevokeCmd())
	return cmd
}

func (a *app) apikeysCreateCmd() *cobra.Command {
	var scope string
	create := &cobra.Command{
		Use:   "create NAME [--scope runs|admin]",
		Short: "Create an API key and print it once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if scope != factory.ScopeRuns && scope != factory.ScopeAdmin {
				return fmt.Errorf("--scope must be runs or admin, not %q", scope)
			}
			return a.withStore(func(s *store.Store) error {
				key, err := createAPIKey(s, args[0], scope)
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stderr, "Created API key %s (scope %s), shown this once:\n", args[0], scope)
				fmt.Fprintln(a.stdout, key)
				return nil
			})
		},
	}
	create.Flags().StringVar(&scope, "scope", factory.ScopeRuns, "runs (the Agents API) or admin (also webhooks, factories, sync)")
	return create
}

func (a *app) apikeysListCmd() *cobra.Command {
	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List API keys: names, scopes and prefixes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withStore(func(s *store.Store) error {
				keys, err := s.APIKeys()
				if err != nil {
					return err
				}
				if output == "json" {
					if keys == nil {
						keys = []*factory.APIKey{}
					}
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
			})
		},
	}
	outputFlag(list, &output, "text", "json")
	return list
}

func (a *app) apikeysRevokeCmd() *cobra.Command {
	revoke := &cobra.Command{
		Use:   "revoke KEY",
		Short: "Revoke an API key at once (give the key itself)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withStore(func(s *store.Store) error {
				k, err := s.APIKeyByValue(args[0])
				if errors.Is(err, store.ErrNotFound) {
					return errors.New("no such API key")
				}
				if err != nil {
					return err
				}
				now := time.Now().UTC()
				k.RevokedAt = &now
				b := s.NewBatch()
				b.PutAPIKey(args[0], k)
				if err := b.Commit(); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "Revoked API key %s.\n", k.Name)
				return nil
			})
		},
	}
	return revoke
}
