package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"factory"

	"github.com/spf13/cobra"

	"factory/client"
)

// runsClient is the server to talk to: runs exist only in a running
// server.
func (a *app) runsClient() (*client.Client, error) {
	if c := a.remote(); c != nil {
		return c, nil
	}
	return nil, errors.New("runs live in a running server: start factory serve, or pass --server URL (and --api-key)")
}

func (a *app) runsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "runs", Short: "Create, list, inspect, follow up and cancel agent runs (the Agents API)",
		Example: "  factory runs create --prompt \"Fix the flaky test in ci/\"\n  factory runs list --state INPROGRESS"}
	cmd.AddCommand(a.runsCreateCmd(), a.runsListCmd(), a.runsGetCmd(), a.runsFollowupCmd(), a.runsCancelCmd())
	return cmd
}

type runsCreateOpts struct {
	prompt, promptFile, title, env, name, model, output string
}

func (a *app) runsCreateCmd() *cobra.Command {
	o := &runsCreateOpts{}
	cmd := &cobra.Command{
		Use:     "create --prompt TEXT | --prompt-file FILE",
		Short:   "Create a run and print its ID",
		Example: `  factory runs create --prompt "Fix the flaky test in ci/" --name triage`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, args []string) error { return a.runsCreate(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.prompt, "prompt", "", "the prompt")
	f.StringVar(&o.promptFile, "prompt-file", "", "read the prompt from a file")
	f.StringVar(&o.title, "title", "", "a title (default: from the prompt)")
	f.StringVar(&o.env, "environment", "", "the environment (default: the server's default)")
	f.StringVar(&o.name, "name", "", "config name, for grouping and filtering")
	f.StringVar(&o.model, "model", "", "config model_id")
	outputFlag(cmd, &o.output, "text", "json")
	return cmd
}

func (a *app) runsCreate(cmd *cobra.Command, o *runsCreateOpts) error {
	c, err := a.runsClient()
	if err != nil {
		return err
	}
	prompt := o.prompt
	if o.promptFile != "" {
		b, err := os.ReadFile(o.promptFile)
		if err != nil {
			return err
		}
		prompt = string(b)
	}
	cfg := map[string]any{}
	for k, v := range map[string]string{"environment_id": o.env, "name": o.name, "model_id": o.model} {
		if v != "" {
			cfg[k] = v
		}
	}
	res, err := c.CreateRun(cmd.Context(), client.RunRequest{Prompt: prompt, Title: o.title, Config: cfg}, client.WithHeader("X-Factory-Source", "CLI"))
	if err != nil {
		return apiError(err)
	}
	if o.output == "json" {
		return printJSON(a.stdout, res)
	}
	fmt.Fprintln(a.stdout, res.RunID)
	return nil
}

type runsListOpts struct {
	states []string
	limit  int
	output string
}

func (a *app) runsListCmd() *cobra.Command {
	o := &runsListOpts{}
	cmd := &cobra.Command{
		Use:     "list [--state S]... [--limit N]",
		Example: `  factory runs list --state FAILED --state ERROR --limit 50`,
		Short:   "List runs, most recently updated first",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, args []string) error { return a.runsList(cmd, o) },
	}
	cmd.Flags().StringSliceVar(&o.states, "state", nil, "only runs in this state (repeatable)")
	cmd.Flags().IntVar(&o.limit, "limit", 20, "how many, at most 500")
	outputFlag(cmd, &o.output, "text", "json")
	return cmd
}

func (a *app) runsList(cmd *cobra.Command, o *runsListOpts) error {
	c, err := a.runsClient()
	if err != nil {
		return err
	}
	states := make([]string, len(o.states))
	for i, st := range o.states {
		states[i] = strings.ToUpper(st) // succeeded is SUCCEEDED
	}
	q := url.Values{"limit": {strconv.Itoa(o.limit)}, "state": states}
	page, err := c.ListRuns(cmd.Context(), q)
	if err != nil {
		return apiError(err)
	}
	if o.output == "json" {
		return printJSON(a.stdout, page)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATE\tSOURCE\tUPDATED\tTITLE")
	for _, r := range page.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.RunID, r.State, r.Source, r.UpdatedAt.Format(time.RFC3339), shorten(r.Title, 50))
	}
	return tw.Flush()
}

type runsGetOpts struct {
	follow bool
	output string
}

func (a *app) runsGetCmd() *cobra.Command {
	o := &runsGetOpts{}
	cmd := &cobra.Command{
		Use:     "get RUN_ID [--follow]",
		Example: `  factory runs get run_2kx8... --follow`,
		Short:   "Show a run; --follow prints its status messages until it ends",
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return a.runsGet(cmd, args[0], o) },
	}
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "print status messages until the run ends")
	outputFlag(cmd, &o.output, "text", "json")
	return cmd
}

func (a *app) runsGet(cmd *cobra.Command, id string, o *runsGetOpts) error {
	c, err := a.runsClient()
	if err != nil {
		return err
	}
	if o.follow {
		return a.followRun(cmd, c, id)
	}
	r, err := c.GetRun(cmd.Context(), id)
	if err != nil {
		return apiError(err)
	}
	if o.output == "json" {
		return printJSON(a.stdout, r)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Run:\t%s\nTitle:\t%s\nState:\t%s\nSource:\t%s\nCreated:\t%s\nUpdated:\t%s\n", r.RunID, r.Title, r.State, r.Source,
		r.CreatedAt.Format(time.RFC3339), r.UpdatedAt.Format(time.RFC3339))
	if r.StatusMessage != nil {
		fmt.Fprintf(tw, "Status:\t%s\n", r.StatusMessage.Message)
		if sm := r.StatusMessage; sm.ErrorCode != "" {
			code := sm.ErrorCode
			if sm.Detail != "" {
				code += " (" + sm.Detail + ")"
			}
			fmt.Fprintf(tw, "Error:\t%s\n", code)
		}
	}
	if w := r.Executor.Worker(); w != "" {
		fmt.Fprintf(tw, "Worker:\t%s\n", w)
	}
	if r.DeliveryID != "" {
		fmt.Fprintf(tw, "Delivery:\t%s (automation %s)\n", r.DeliveryID, r.AutomationID)
	}
	for i, art := range r.Artifacts {
		label := ""
		if i == 0 {
			label = "Artifacts:"
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, artifactLine(art))
	}
	// The workspace, when this machine holds it (a server on this data
	// directory, or the store itself).
	if ws, err := filepath.Abs(filepath.Join(a.dataDir(), "runs", r.RunID, "workspace")); err == nil {
		if fi, err := os.Stat(ws); err == nil && fi.IsDir() {
			fmt.Fprintf(tw, "Workspace:\t%s\n", ws)
		}
	}
	return tw.Flush()
}

// artifactLine says what an artifact is in a line: its type and where it
// is.
func artifactLine(a factory.Artifact) string {
	d := a.Data
	switch {
	case d.URL != "" && d.Branch != "":
		return fmt.Sprintf("%s %s (branch %s)", a.Type, d.URL, d.Branch)
	case d.URL != "":
		return fmt.Sprintf("%s %s", a.Type, d.URL)
	}
	return fmt.Sprintf("%s %s (%d bytes, %s)", a.Type, d.Filepath, d.SizeBytes, d.UID)
}

func (a *app) runsFollowupCmd() *cobra.Command {
	var message string
	cmd := &cobra.Command{
		Use:     "followup RUN_ID --message TEXT",
		Example: `  factory runs followup run_2kx8... --message "Also update the changelog"`,
		Short:   "Send a follow-up: the next turn of a running run, or continue a finished one",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.runsClient()
			if err != nil {
				return err
			}
			if message == "" {
				return errors.New("--message is required")
			}
			if err := c.FollowUp(cmd.Context(), args[0], message); err != nil {
				return apiError(err)
			}
			fmt.Fprintf(a.stdout, "Sent to %s.\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&message, "message", "", "the message")
	return cmd
}

func (a *app) runsCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "cancel RUN_ID",
		Example: `  factory runs cancel run_2kx8...`,
		Short:   "Cancel a queued or running run",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.runsClient()
			if err != nil {
				return err
			}
			id, err := c.CancelRun(cmd.Context(), args[0])
			if err != nil {
				return apiError(err)
			}
			fmt.Fprintf(a.stdout, "Cancelled %s.\n", id)
			return nil
		},
	}
}

// followRun prints a run's timeline as it grows, until the run ends: from
// the server's live stream, or by polling a server that has none.
func (a *app) followRun(cmd *cobra.Command, c *client.Client, id string) error {
	state, err := c.FollowEvents(cmd.Context(), id, 0, func(_ int, e client.RunEvent) error {
		a.printEvent(e)
		return nil
	})
	switch {
	case errors.Is(err, client.ErrNoStream):
		return a.pollRun(cmd, c, id)
	case err != nil:
		return apiError(err)
	case state != "SUCCEEDED":
		return exitCode(1)
	}
	return nil
}

func (a *app) printEvent(e client.RunEvent) {
	line := e.Kind
	if e.State != "" {
		line += " " + string(e.State)
	}
	if e.Message != "" {
		line += ": " + e.Message
	}
	fmt.Fprintf(a.stdout, "%s  %s\n", e.Time.Format("15:04:05"), line)
}

// pollRun is followRun by polling the timeline.
func (a *app) pollRun(cmd *cobra.Command, c *client.Client, id string) error {
	cursor, last := "", ""
	for {
		events, next, more, err := c.TimelinePage(cmd.Context(), id, cursor)
		if err != nil {
			return apiError(err)
		}
		for _, e := range events {
			a.printEvent(e)
			last = e.Kind
		}
		if next != "" {
			cursor = next
		}
		if more {
			continue
		}
		r, err := c.GetRun(cmd.Context(), id)
		if err != nil {
			return apiError(err)
		}
		if r.Terminal() && last == "finished" {
			if r.State != "SUCCEEDED" {
				return exitCode(1)
			}
			return nil
		}
		select {
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}
