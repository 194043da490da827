package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/store"
)

func (a *app) webhooksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "webhooks",
		Example: `  factory webhooks deliveries acme/github
  factory webhooks suspend acme/github`,
		Short: "Act on applied webhooks: delivery log, suspend/resume, reveal a secret, import a UID",
	}
	reveal := &cobra.Command{
		Use:     "reveal NAME|FACTORY/NAME",
		Example: `  factory webhooks reveal acme/ci`,
		Short:   "Print a webhook's generated secret, once",
		Long: `Print the secret the service generated for a webhook without secretName. It can be
read exactly once; after that it can only be rotated (factory secrets rotate).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.reveal(cmd, args[0]) },
	}
	var uid string
	imp := &cobra.Command{
		Use:   "import FACTORY/NAME --uid UID",
		Short: "Give a webhook file a known UID before it first applies",
		Long: `Record the UID that webhooks/NAME.yaml of FACTORY takes when it first applies,
instead of a new random one (like terraform import). Use it to move a factory to a
new server without changing the URLs senders post to, or to keep the bundled
example's automations valid on a new store.

The UID must not belong to another webhook; importing the UID a webhook already has
is a no-op.`,
		Example: `  factory webhooks import acme/github --uid wh_5f3k9x2m7q1z8c4v6b0n`,
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return a.importUID(args[0], uid) },
	}
	imp.Flags().StringVar(&uid, "uid", "", "the UID, wh_ and at least 16 letters or digits (required)")
	_ = imp.MarkFlagRequired("uid")
	var limit int
	var output string
	deliveries := &cobra.Command{
		Use: "deliveries NAME|FACTORY/NAME|UID [--limit N]",
		Example: `  factory webhooks deliveries acme/github --limit 20
  factory webhooks deliveries wh_5f3k9x2m7q1z8c4v6b0n --output json`,
		Short: "Show a webhook's delivery log, newest first",
		Long: `Show the delivery log of a webhook, newest first: every request that reached it
(Accepted, Duplicate, Rejected (auth), Rejected (invalid JSON), Rejected (too large)),
with its size, time, identity, client address and, for a rejection, why. Payloads are
kept for accepted deliveries only. Records are kept for 7 days, and the 50 most recent
always.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.deliveries(cmd, args[0], limit, output) },
	}
	deliveries.AddCommand(a.deliveriesGetCmd(), a.deliveriesRedeliverCmd())
	deliveries.Flags().IntVar(&limit, "limit", 50, "how many records, at most 500")
	outputFlag(deliveries, &output, "text", "json")
	suspend := &cobra.Command{
		Use:     "suspend NAME|FACTORY/NAME",
		Example: `  factory webhooks suspend acme/github`,
		Short:   "Turn a webhook off (senders get 404) without changing its file",
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return a.setSuspended(cmd, args[0], true) },
	}
	resume := &cobra.Command{
		Use:     "resume NAME|FACTORY/NAME",
		Example: `  factory webhooks resume acme/github`,
		Short:   "Turn a suspended webhook back on",
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return a.setSuspended(cmd, args[0], false) },
	}
	cmd.AddCommand(reveal, imp, deliveries, suspend, resume)
	return cmd
}

func (a *app) reveal(cmd *cobra.Command, arg string) error {
	return a.withBackend(func(b backend) error {
		w, err := resolveWebhook(cmd.Context(), b, arg)
		if err != nil {
			return err
		}
		value, err := b.RevealWebhookSecret(cmd.Context(), w.uid)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "Secret of webhook %s (%s), shown this once:\n", w.name, w.uid)
		fmt.Fprintln(a.stdout, string(value))
		return nil
	})
}

func (a *app) setSuspended(cmd *cobra.Command, arg string, suspended bool) error {
	verb := "Resumed"
	if suspended {
		verb = "Suspended"
	}
	return a.withBackend(func(b backend) error {
		w, err := resolveWebhook(cmd.Context(), b, arg)
		if err != nil {
			return err
		}
		if err := b.SetSuspended(cmd.Context(), w.uid, suspended); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s webhook %s (%s).\n", verb, w.name, w.uid)
		return nil
	})
}

func (a *app) deliveries(cmd *cobra.Command, arg string, limit int, output string) error {
	var ds []*factory.Delivery
	err := a.withBackend(func(b backend) error {
		w, err := resolveWebhook(cmd.Context(), b, arg)
		if err != nil {
			return err
		}
		ds, err = b.Deliveries(cmd.Context(), w.uid, limit)
		return err
	})
	if err != nil {
		return err
	}
	if output == "json" {
		return printJSON(a.stdout, map[string]any{"deliveries": ds})
	}
	if len(ds) == 0 {
		fmt.Fprintln(a.stdout, "No deliveries yet.")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tDELIVERY\tLABEL\tSIZE\tIDENTITY\tCLIENT\tNOTE")
	for _, d := range ds {
		ident := "-"
		if d.IdentitySource != "" {
			ident = d.IdentitySource + ":" + shorten(d.Identity, 24)
		}
		note := deliveryNote(d)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.Time.Format(time.RFC3339), d.ID, d.Label, d.Size, ident, d.ClientAddr, note)
	}
	return tw.Flush()
}

// deliveryNote says what became of a delivery: why it was refused, what it
// repeats, the provider event it was and the runs it started, or why it
// started none.
func deliveryNote(d *factory.Delivery) string {
	switch {
	case d.DuplicateOf != "":
		return "duplicate of " + d.DuplicateOf
	case d.Reason != "":
		return d.Reason
	}
	var parts []string
	if e := d.Event; e != nil {
		parts = append(parts, e.Provider+"/"+e.Event)
	}
	if len(d.RunIDs) > 0 {
		parts = append(parts, fmt.Sprintf("%d run(s): %s", len(d.RunIDs), strings.Join(d.RunIDs, ", ")))
	} else if d.Outcome != "" {
		parts = append(parts, d.Outcome)
	}
	return strings.Join(parts, "; ")
}

func shorten(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func (a *app) importUID(arg, uid string) error {
	fac, name := splitName(arg)
	if fac == "" {
		return errors.New("name the webhook as FACTORY/NAME")
	}
	if !reconciler.ValidName(fac) || !reconciler.ValidName(name) {
		return fmt.Errorf("%q: factory and webhook names are lowercase letters, digits and '-'", arg)
	}
	if !factory.ValidUID(factory.PrefixWebhook, uid) {
		return fmt.Errorf("--uid %q must be wh_ followed by 16 to 64 letters or digits", uid)
	}
	s, err := a.openStore()
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.FactoryState(fac)
	if err != nil {
		return err
	}
	if w := st.Webhooks[name]; w != nil {
		if w.UID == uid {
			fmt.Fprintf(a.stdout, "Webhook %s already has UID %s.\n", arg, uid)
			return nil
		}
		return fmt.Errorf("webhook %s already applied with UID %s; a UID never changes while its file exists", arg, w.UID)
	}
	ref, err := s.WebhookRefByUID(uid)
	switch {
	case err == nil && ref.Factory == fac && ref.Key == name && !ref.Deleted:
		fmt.Fprintf(a.stdout, "Webhook %s will take UID %s when it first applies.\n", arg, uid)
		return nil
	case err == nil:
		return fmt.Errorf("UID %s belongs to webhook %s/%s", uid, ref.Factory, ref.Key)
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if pinned, ok := st.Pins[name]; ok {
		return fmt.Errorf("webhook %s is already imported with UID %s", arg, pinned)
	}
	b := s.NewBatch()
	b.PinWebhookUID(fac, name, uid)
	if err := b.Commit(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Webhook %s will take UID %s when it first applies.\n", arg, uid)
	return nil
}

func (a *app) deliveriesGetCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "get DELIVERY_ID",
		Short:   "Show one delivery, with its payload when it was accepted",
		Example: "  factory webhooks deliveries get dlv_33n3ev4xymq13c7csypfdqhr73jfm --output json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d *factory.DeliveryView
			err := a.withBackend(func(b backend) (err error) {
				d, err = b.FindDelivery(cmd.Context(), args[0])
				return err
			})
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(a.stdout, d)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "Delivery:\t%s\nWebhook:\t%s\nLabel:\t%s\nTime:\t%s\nSize:\t%d\nClient:\t%s\n",
				d.ID, d.WebhookUID, d.Label, d.Time.Format(time.RFC3339), d.Size, d.ClientAddr)
			for label, v := range map[string]string{"Reason": d.Reason, "Duplicate of": d.DuplicateOf, "Redelivery of": d.RedeliveryOf} {
				if v != "" {
					fmt.Fprintf(tw, "%s:\t%s\n", label, v)
				}
			}
			if len(d.RunIDs) > 0 {
				fmt.Fprintf(tw, "Runs:\t%s\n", strings.Join(d.RunIDs, ", "))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(d.Payload) > 0 {
				fmt.Fprintf(a.stdout, "\n%s\n", d.Payload)
			}
			return nil
		},
	}
	outputFlag(cmd, &output, "text", "json")
	return cmd
}

func (a *app) deliveriesRedeliverCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "redeliver DELIVERY_ID",
		Short: "Deliver an accepted delivery's payload again, evaluated as if it had just arrived",
		Long: `Accept an accepted delivery's payload again, as a new delivery of the same webhook: the
automations it matches now start their runs again (after a fix to a filter or a prompt, or
when its runs failed for a reason outside the agent). The new record names the delivery it
repeats. Through a server it is evaluated at once; on a store, when a server next starts.`,
		Example: "  factory webhooks deliveries redeliver dlv_33n3ev4xymq13c7csypfdqhr73jfm",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(b backend) error {
				id, err := b.Redeliver(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "Delivered %s again as %s.\n", args[0], id)
				if !b.Live() {
					fmt.Fprintln(a.stderr, "It is evaluated when a server next starts on this store.")
				}
				return nil
			})
		},
	}
}
