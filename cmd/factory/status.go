package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"factory"
	"factory/client"
	"factory/internal/runs"
	"factory/internal/workers"

	"github.com/spf13/cobra"
)

type statusOpts struct {
	factory, output, revision string
	wait                      bool
	timeout                   time.Duration
}

func (a *app) statusCmd() *cobra.Command {
	o := &statusOpts{}
	cmd := &cobra.Command{
		Use:   "status [--factory NAME] [--wait [--timeout 2m] [--revision SHA]]",
		Short: "Show factories, their sync status, webhook UIDs and ingress URLs",
		Long: `Show each factory's UID, foreman UID, source, applied revision, last sync and
last error; its webhooks with UID, auth mode, scheme, enabled/suspended, ingress URL
(url_token URLs with a {token} placeholder) and secret name; and its automations.

It reads the store, or the server that holds it.

--wait waits until every factory shown is ready (and, with --revision, has applied a
revision whose commit or digest starts with it), then shows them: a script's way to wait
for a push to go live, as flux reconcile or kubectl wait. It exits 1 when --timeout
passes first, saying what is not ready and why.`,
		Example: `  factory status
  factory status --factory acme --output json
  factory status --factory acme --wait --revision "$(git rev-parse HEAD)" --timeout 2m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return a.status(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.factory, "factory", "", "show only this factory (name or UID)")
	f.BoolVar(&o.wait, "wait", false, "wait until the factories are ready (exit 1 at --timeout)")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long --wait waits")
	f.StringVar(&o.revision, "revision", "", "with --wait, also wait for this revision (a commit SHA or digest, or its start)")
	outputFlag(cmd, &o.output, "text", "json")
	return cmd
}

func (a *app) status(cmd *cobra.Command, o *statusOpts) error {
	sts, err := a.statuses(cmd, o.factory)
	if err != nil {
		return err
	}
	var waitErr error
	if o.wait {
		sts, waitErr = a.waitReady(cmd, o, sts)
	}
	ws, natsURL := a.statusWorkers(cmd.Context())
	bs := a.statusBackups(cmd.Context())
	iso := a.statusIsolation(cmd.Context())
	if o.output == "json" {
		out := map[string]any{"factories": sts}
		if ws != nil {
			out["workers"], out["nats_url"] = ws, natsURL
		}
		if bs != nil {
			out["backups"] = bs
		}
		if iso != nil {
			out["agents"] = iso
		}
		if a.serverURL() == "" { // a server elsewhere has harnesses of its own
			out["harnesses"] = a.harnessStatus()
		}
		if err := printJSON(a.stdout, out); err != nil {
			return err
		}
		return waitErr
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
	printWorkers(a.stdout, ws, natsURL)
	printBackups(a.stdout, bs)
	printIsolation(a.stdout, iso)
	if a.serverURL() == "" {
		fmt.Fprintln(a.stdout)
		printHarnesses(a.stdout, a.harnessesDir(), a.harnessStatus())
	}
	return waitErr
}

// statusIsolation is how the running server's agents are confined, nil
// when no server answers (or the key may not ask).
func (a *app) statusIsolation(ctx context.Context) *runs.Isolation {
	c := a.remote()
	if c == nil {
		return nil
	}
	var out runs.Isolation
	if err := c.Do(ctx, "GET", "/v1/admin/isolation", nil, &out, client.WithMaxRetries(0)); err != nil {
		return nil
	}
	return &out
}

// printIsolation says how the server's agents are confined, and each
// warning of it.
func printIsolation(w io.Writer, iso *runs.Isolation) {
	if iso == nil {
		return
	}
	fmt.Fprintf(w, "\nAgents: confinement %s\n", iso.Confinement)
	for _, warning := range iso.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warning)
	}
}

// statusWorkers are the workers of the server status goes through, when it
// runs workers and the key may list them; else nil.
func (a *app) statusWorkers(ctx context.Context) ([]workers.WorkerInfo, string) {
	c := a.remote()
	if c == nil {
		return nil, ""
	}
	var out struct {
		Workers []workers.WorkerInfo `json:"workers"`
		NATS    string               `json:"nats_url"`
	}
	if err := c.Do(ctx, "GET", "/v1/admin/workers", nil, &out, client.WithMaxRetries(0)); err != nil {
		return nil, ""
	}
	return out.Workers, out.NATS
}

func printWorkers(w io.Writer, ws []workers.WorkerInfo, natsURL string) {
	if len(ws) == 0 && natsURL == "" {
		return
	}
	fmt.Fprintf(w, "\nWorkers (NATS %s):\n", natsURL)
	if len(ws) == 0 {
		fmt.Fprintln(w, "  none registered (factory workers create NAME)")
	}
	for _, x := range ws {
		state := "not connected"
		if x.Connected {
			state = "connected"
		}
		if x.RevokedAt != nil {
			state = "revoked"
		}
		heard := "never heard"
		if x.LastHeartbeat != nil {
			heard = "heard " + time.Since(*x.LastHeartbeat).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(w, "  %s: %s, %d runs, %s\n", x.Name, state, x.RunsActive, heard)
	}
}

// statuses reads the factories' statuses (only one, with a name or UID),
// opening the state for this read alone: a waiting command does not hold
// the store.
func (a *app) statuses(cmd *cobra.Command, only string) ([]*factory.FactoryStatus, error) {
	v, err := a.view()
	if errors.Is(err, errNoStore) {
		return nil, fmt.Errorf("no state store in %s: apply a factory first (factory reconcile --source DIR) or pass --data", a.dataDir())
	}
	if err != nil {
		return nil, err
	}
	defer v.Close()
	sts, err := v.Statuses(cmd.Context())
	if err != nil {
		return nil, err
	}
	if only == "" {
		if sts == nil {
			sts = []*factory.FactoryStatus{}
		}
		return sts, nil
	}
	var keep []*factory.FactoryStatus
	for _, s := range sts {
		if s.Name == only || s.UID == only {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		return nil, fmt.Errorf("no factory %q", only)
	}
	return keep, nil
}

// waitReady polls until every factory is ready at the wanted revision, or
// the timeout passes; it returns the last statuses read and, on timeout,
// an error saying what is not ready.
func (a *app) waitReady(cmd *cobra.Command, o *statusOpts, sts []*factory.FactoryStatus) ([]*factory.FactoryStatus, error) {
	deadline := time.Now().Add(o.timeout)
	for {
		pending := notReady(sts, o.revision)
		if pending == "" {
			return sts, nil
		}
		if time.Now().After(deadline) {
			return sts, fmt.Errorf("timed out after %s: %s", o.timeout, pending)
		}
		select {
		case <-cmd.Context().Done():
			return sts, cmd.Context().Err()
		case <-time.After(500 * time.Millisecond):
		}
		next, err := a.statuses(cmd, o.factory)
		if err != nil {
			return sts, err
		}
		sts = next
	}
}

// notReady says which factory is not ready (at the revision), and why; ""
// when all are.
func notReady(sts []*factory.FactoryStatus, revision string) string {
	if len(sts) == 0 {
		return "no factory is applied yet"
	}
	for _, s := range sts {
		switch {
		case !s.Ready && s.Error != nil:
			return fmt.Sprintf("factory %s is not ready: %s", s.Name, *s.Error)
		case !s.Ready:
			return fmt.Sprintf("factory %s is not ready", s.Name)
		case revision != "" && !atRevision(s.Revision, revision):
			return fmt.Sprintf("factory %s is at revision %s, not %s", s.Name, s.Revision, revision)
		}
	}
	return ""
}

// atRevision reports whether an applied revision (main@sha1:HEX,
// sha256:HEX) is the one named: in full, or by the start of its hash.
func atRevision(applied, want string) bool {
	if applied == want {
		return true
	}
	_, hash, ok := strings.Cut(applied, ":")
	return ok && len(want) >= 7 && strings.HasPrefix(hash, strings.TrimPrefix(strings.TrimPrefix(want, "sha1:"), "sha256:"))
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
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", au.Name, au.ID, state, automationSources(au))
	}
	tw.Flush()
	printSchedules(w, s)
	printResources(w, s)
}

// printSchedules prints the automations' schedule triggers: when each
// fires next, when it last fired, and its last error.
func printSchedules(w io.Writer, s *factory.FactoryStatus) {
	var rows []string
	for _, au := range s.Automations {
		for _, sc := range au.Schedules {
			last := sc.LastError
			if last == "" {
				last = "-"
			}
			rows = append(rows, fmt.Sprintf("  %s\t%s\t%s\t%s\t%s\t%s\n", au.Name, sc.Name, sc.CronSchedule, when(sc.NextFire), when(sc.LastFire), last))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SCHEDULE OF\tNAME\tCRON (UTC)\tNEXT FIRE\tLAST FIRE\tLAST ERROR")
	for _, r := range rows {
		fmt.Fprint(tw, r)
	}
	tw.Flush()
}

// automationSources says what fires an automation: its webhooks' UIDs, or
// its triggers (provider/event) when it has no webhook trigger.
func automationSources(au factory.AutomationStatus) string {
	if len(au.WebhookIDs) > 0 || len(au.Triggers) == 0 {
		return strings.Join(au.WebhookIDs, ", ")
	}
	return strings.Join(au.Triggers, ", ")
}

// printResources prints the agents, runners, skills, scorers and suites of
// a v1alpha1 factory; nothing for a flat one.
func printResources(w io.Writer, s *factory.FactoryStatus) {
	rows := [][]string{}
	add := func(kind string, list []factory.ResourceStatus, detail func(factory.ResourceStatus) string) {
		for _, r := range list {
			rows = append(rows, []string{kind, r.Name, r.UID, detail(r)})
		}
	}
	add("agent", s.Agents, func(r factory.ResourceStatus) string {
		d := r.AgentType
		if r.Harness != nil {
			d += ", " + r.Harness.Type
			if r.Harness.Model != "" {
				d += "/" + r.Harness.Model
			}
		}
		if r.Runner != "" {
			d += ", runner " + r.Runner
		}
		return d
	})
	add("runner", s.Runners, func(r factory.ResourceStatus) string {
		return fmt.Sprintf("%s, %d setup commands", r.DockerImage, r.SetupCommands)
	})
	add("skill", s.Skills, func(factory.ResourceStatus) string { return "" })
	described := func(r factory.ResourceStatus) string { return r.Description }
	add("scorer", s.Scorers, described)
	add("suite", s.BenchmarkSuites, described)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  KIND\tNAME\tUID\tDETAILS")
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r[0], r[1], r[2], r[3])
	}
	tw.Flush()
}
