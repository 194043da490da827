package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

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
	cmd := &cobra.Command{Use: "runs", Short: "Create, list, inspect, follow up and cancel agent runs (the Agents API)"}
	var prompt, promptFile, title, env, name, model, output string
	create := &cobra.Command{
		Use:     "create --prompt TEXT | --prompt-file FILE",
		Short:   "Create a run and print its ID",
		Example: `  factory runs create --prompt "Fix the flaky test in ci/" --name triage`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.runsClient()
			if err != nil {
				return err
			}
			if promptFile != "" {
				b, err := os.ReadFile(promptFile)
				if err != nil {
					return err
				}
				prompt = string(b)
			}
			cfg := map[string]any{}
			for k, v := range map[string]string{"environment_id": env, "name": name, "model_id": model} {
				if v != "" {
					cfg[k] = v
				}
			}
			res, err := c.CreateRun(cmd.Context(), client.RunRequest{Prompt: prompt, Title: title, Config: cfg}, client.WithHeader("X-Factory-Source", "CLI"))
			if err != nil {
				return apiError(err)
			}
			if output == "json" {
				return printJSON(a.stdout, res)
			}
			fmt.Fprintln(a.stdout, res.RunID)
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&prompt, "prompt", "", "the prompt")
	f.StringVar(&promptFile, "prompt-file", "", "read the prompt from a file")
	f.StringVar(&title, "title", "", "a title (default: from the prompt)")
	f.StringVar(&env, "environment", "", "the environment (default: the server's default)")
	f.StringVar(&name, "name", "", "config name, for grouping and filtering")
	f.StringVar(&model, "model", "", "config model_id")
	outputFlag(create, &output, "text", "json")

	var states []string
	var limit int
	var listOut string
	list := &cobra.Command{
		Use:   "list [--state S]... [--limit N]",
		Short: "List runs, most recently updated first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.runsClient()
			if err != nil {
				return err
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}, "state": states}
			page, err := c.ListRuns(cmd.Context(), q)
			if err != nil {
				return apiError(err)
			}
			if listOut == "json" {
				return printJSON(a.stdout, page)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tSTATE\tSOURCE\tUPDATED\tTITLE")
			for _, r := range page.Runs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.RunID, r.State, r.Source, r.UpdatedAt.Format(time.RFC3339), shorten(r.Title, 50))
			}
			return tw.Flush()
		},
	}
	list.Flags().StringSliceVar(&states, "state", nil, "only runs in this state (repeatable)")
	list.Flags().IntVar(&limit, "limit", 20, "how many, at most 500")
	outputFlag(list, &listOut, "text", "json")

	var follow bool
	var getOut string
	get := &cobra.Command{
		Use:   "get RUN_ID [--follow]",
		Short: "Show a run; --follow prints its status messages until it ends",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.runsClient()
			if err != nil {
				return err
			}
			if follow {
				return a.followRun(cmd, c, args[0])
			}
			r, err := c.GetRun(cmd.Context(), args[0])
			if err != nil {
				return apiError(err)
			}
			if getOut == "json" {
				return printJSON(a.stdout, r)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "Run:\t%s\nTitle:\t%s\nState:\t%s\nSource:\t%s\nCreated:\t%s\nUpdated:\t%s\n", r.RunID, r.Title, r.State, r.Source,
				r.CreatedAt.Format(time.RFC3339), r.UpdatedAt.Format(time.RFC3339))
			if r.StatusMessage != nil {
				fmt.Fprintf(tw, "Status:\t%s\n", r.StatusMessage.Message)
			}
			if r.DeliveryID != "" {
				fmt.Fprintf(tw, "Delivery:\t%s (automation %s)\n", r.DeliveryID, r.AutomationID)
			}
			return tw.Flush()
		},
	}
	get.Flags().BoolVarP(&follow, "follow", "f", false, "print status messages until the run ends")
	outputFlag(get, &getOut, "text", "json")

	var message string
	followup := &cobra.Command{
		Use:   "followup RUN_ID --message TEXT",
		Short: "Send a follow-up: the next turn of a running run, or continue a finished one",
		Args:  cobra.ExactArgs(1),
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
	followup.Flags().StringVar(&message, "message", "", "the message")
	cancel := &cobra.Command{
		Use:   "cancel RUN_ID",
		Short: "Cancel a queued or running run",
		Args:  cobra.ExactArgs(1),
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
	cmd.AddCommand(create, list, get, followup, cancel)
	return cmd
}

// followRun prints a run's timeline as it grows, until the run ends.
func (a *app) followRun(cmd *cobra.Command, c *client.Client, id string) error {
	printed := 0
	for {
		events, err := c.Timeline(cmd.Context(), id)
		if err != nil {
			return apiError(err)
		}
		for _, e := range events[printed:] {
			line := e.Kind
			if e.State != "" {
				line += " " + string(e.State)
			}
			if e.Message != "" {
				line += ": " + e.Message
			}
			fmt.Fprintf(a.stdout, "%s  %s\n", e.Time.Format("15:04:05"), line)
		}
		printed = len(events)
		r, err := c.GetRun(cmd.Context(), id)
		if err != nil {
			return apiError(err)
		}
		if r.Terminal() && len(events) > 0 && events[len(events)-1].Kind == "finished" {
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
