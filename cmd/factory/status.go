package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"factory"

	"github.com/spf13/cobra"
)

func (a *app) statusCmd() *cobra.Command {
	var factoryFlag, output string
	cmd := &cobra.Command{
		Use:   "status [--factory NAME]",
		Short: "Show factories, their sync status, webhook UIDs and ingress URLs",
		Long: `Show each factory's UID, foreman UID, source, applied revision, last sync and
last error; its webhooks with UID, auth mode, scheme, enabled/suspended, ingress URL
(url_token URLs with a {token} placeholder) and secret name; and its automations.

It reads the store, or the server that holds it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.view()
			if errors.Is(err, errNoStore) {
				return fmt.Errorf("no state store in %s: apply a factory first (factory reconcile --source DIR) or pass --data", a.dataDir())
			}
			if err != nil {
				return err
			}
			defer v.Close()
			sts, err := v.Statuses(cmd.Context())
			if err != nil {
				return err
			}
			if factoryFlag != "" {
				var keep []*factory.FactoryStatus
				for _, s := range sts {
					if s.Name == factoryFlag || s.UID == factoryFlag {
						keep = append(keep, s)
					}
				}
				if len(keep) == 0 {
					return fmt.Errorf("no factory %q", factoryFlag)
				}
				sts = keep
			}
			if output == "json" {
				if sts == nil {
					sts = []*factory.FactoryStatus{}
				}
				return printJSON(a.stdout, map[string]any{"factories": sts})
			}
			if len(sts) == 0 {
				fmt.Fprintln(a.stdout, "No factories yet: apply one with factory reconcile --source DIR.")
			}
			for i, s := range sts {
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				printStatus(a.stdout, s)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&factoryFlag, "factory", "", "show only this factory (name or UID)")
	outputFlag(cmd, &output, "text", "json")
	return cmd
}

func printStatus(w io.Writer, s *factory.FactoryStatus) {
	ready := "True"
	if !s.Ready {
		ready = "False"
	}
	fmt.Fprintf(w, "Factory %s (%s)\n", s.Name, s.UID)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  Foreman:\t%s\n", s.ForemanUID)
	fmt.Fprintf(tw, "  Source:\t%s\n", s.Source)
	rev := s.Revision
	if rev == "" {
		rev = "(none applied)"
	}
	fmt.Fprintf(tw, "  Revision:\t%s\n", rev)
	if s.SyncedAt != nil {
		fmt.Fprintf(tw, "  Synced:\t%s\n", s.SyncedAt.Format(time.RFC3339))
	}
	if s.CheckedAt != nil {
		fmt.Fprintf(tw, "  Checked:\t%s (the server last read the source)\n", s.CheckedAt.Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "  Ready:\t%s\n", ready)
	if s.Error != nil {
		fmt.Fprintf(tw, "  Error:\t%s\n", *s.Error)
		if s.AttemptedRevision != "" {
			fmt.Fprintf(tw, "  Refused:\t%s\n", s.AttemptedRevision)
		}
	}
	tw.Flush()

	fmt.Fprintln(w)
	if len(s.Webhooks) == 0 {
		fmt.Fprintln(w, "  No webhooks.")
	} else {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  WEBHOOK\tUID\tAUTH\tSTATE\tSECRET\tSECRET SINCE\tINGRESS URL")
		for _, wh := range s.Webhooks {
			auth := wh.AuthMode
			if wh.SignatureScheme != nil {
				auth += "/" + *wh.SignatureScheme
			}
			state := "enabled"
			switch {
			case !wh.Enabled:
				state = "disabled"
			case wh.Suspended:
				state = "suspended"
			}
			since := "-"
			if wh.SecretSyncedAt != nil {
				since = wh.SecretSyncedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", wh.Name, wh.UID, auth, state, wh.SecretName, since, wh.IngressURL)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if len(s.Automations) == 0 {
		fmt.Fprintln(w, "  No automations.")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AUTOMATION\tID\tSTATE\tWEBHOOKS")
	for _, au := range s.Automations {
		state := "enabled"
		if !au.Enabled {
			state = "disabled"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", au.Name, au.ID, state, strings.Join(au.WebhookIDs, ", "))
	}
	tw.Flush()
}
