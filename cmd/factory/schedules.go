package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// scheduleItem is what the server answers of a schedule (ScheduledAgentItem).
type scheduleItem struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	CronSchedule string    `json:"cron_schedule"`
	Enabled      bool      `json:"enabled"`
	Prompt       string    `json:"prompt"`
	CreatedAt    time.Time `json:"created_at"`
	History      struct {
		LastRan *time.Time `json:"last_ran"`
		NextRun *time.Time `json:"next_run"`
	} `json:"history"`
	LastSpawnError *string `json:"last_spawn_error"`
}

func (a *app) schedulesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "Manage the Agents API's schedules (runs on a cron, not in any file)",
		Long: `Schedules of the Agents API start a run with their prompt at each instant of their cron
(five fields or @hourly, @daily, @weekly, @monthly, @every 90s; always UTC; at most once a
minute, and at most 100 schedules on a server unless its configuration says otherwise), as the
official SDKs' client.agent.schedules calls do. Schedules written in a factory's automations
(provider: schedule) are shown by factory status instead. These commands talk to the running
server (--server, or the one holding the data directory).`,
		Example: `  factory schedules create nightly --cron "0 3 * * *" --prompt "Summarise yesterday's merged PRs"
  factory schedules list
  factory schedules pause sch_...`,
	}
	cmd.AddCommand(a.schedulesListCmd(), a.schedulesCreateCmd(), a.schedulesStateCmd("pause"), a.schedulesStateCmd("resume"), a.schedulesDeleteCmd())
	return cmd
}

func (a *app) schedulesListCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the schedules: cron, state, last and next run",
		Example: "  factory schedules list --output json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.runsClient()
			if err != nil {
				return err
			}
			var out struct {
				Schedules []scheduleItem `json:"schedules"`
			}
			if err := c.Do(cmd.Context(), "GET", "/v1/agent/schedules", nil, &out); err != nil {
				return apiError(err)
			}
			if output == "json" {
				return printJSON(a.stdout, out)
			}
			if len(out.Schedules) == 0 {
				fmt.Fprintln(a.stdout, "No schedules.")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tCRON\tSTATE\tLAST RUN\tNEXT RUN\tLAST ERROR")
			for _, s := range out.Schedules {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Name, s.CronSchedule, enabledWord(s.Enabled), when(s.History.LastRan), when(s.History.NextRun), deref(s.LastSpawnError))
			}
			return tw.Flush()
		},
	}
	outputFlag(cmd, &output, "text", "json")
	return cmd
}

func enabledWord(on bool) string {
	if on {
		return "enabled"
	}
	return "paused"
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func (a *app) schedulesCreateCmd() *cobra.Command {
	var cron, prompt, output string
	var paused bool
	cmd := &cobra.Command{
		Use:   "create NAME --cron CRON --prompt PROMPT",
		Short: "Create a schedule",
		Example: `  factory schedules create nightly --cron "0 3 * * *" --prompt "Summarise the night's alerts"
  factory schedules create poll --cron "@every 10m" --prompt "Check the queue" --paused`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.runsClient()
			if err != nil {
				return err
			}
			body, _ := json.Marshal(map[string]any{"name": args[0], "cron_schedule": cron, "prompt": prompt, "enabled": !paused})
			var it scheduleItem
			if err := c.Do(cmd.Context(), "POST", "/v1/agent/schedules", strings.NewReader(string(body)), &it); err != nil {
				return apiError(err)
			}
			return a.printSchedule(it, output, "Created")
		},
	}
	cmd.Flags().StringVar(&cron, "cron", "", "when it runs: five cron fields or @hourly, @daily, @weekly, @monthly, @every 90s (UTC; at most once a minute) (required)")
	cmd.Flags().StringVar(&prompt, "prompt", "", "what each run is asked (required)")
	cmd.Flags().BoolVar(&paused, "paused", false, "create it paused")
	_ = cmd.MarkFlagRequired("cron")
	_ = cmd.MarkFlagRequired("prompt")
	outputFlag(cmd, &output, "text", "json")
	return cmd
}

func (a *app) printSchedule(it scheduleItem, output, verb string) error {
	if output == "json" {
		return printJSON(a.stdout, it)
	}
	fmt.Fprintf(a.stdout, "%s schedule %s (%s): %s, %s; next run %s\n", verb, it.ID, it.Name, it.CronSchedule, enabledWord(it.Enabled), when(it.History.NextRun))
	return nil
}

// schedulesStateCmd is pause or resume.
func (a *app) schedulesStateCmd(verb string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     verb + " ID",
		Short:   map[string]string{"pause": "Pause a schedule: it starts nothing until resumed", "resume": "Resume a paused schedule"}[verb],
		Example: "  factory schedules " + verb + " sch_...",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.runsClient()
			if err != nil {
				return err
			}
			var it scheduleItem
			if err := c.Do(cmd.Context(), "POST", "/v1/agent/schedules/"+args[0]+"/"+verb, nil, &it); err != nil {
				return apiError(err)
			}
			return a.printSchedule(it, output, map[string]string{"pause": "Paused", "resume": "Resumed"}[verb])
		},
	}
	outputFlag(cmd, &output, "text", "json")
	return cmd
}

func (a *app) schedulesDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete ID",
		Short:   "Delete a schedule: it starts no more runs (its runs stay)",
		Example: "  factory schedules delete sch_...",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.runsClient()
			if err != nil {
				return err
			}
			if err := c.Do(cmd.Context(), "DELETE", "/v1/agent/schedules/"+args[0], nil, nil); err != nil {
				return apiError(err)
			}
			fmt.Fprintf(a.stdout, "Deleted schedule %s\n", args[0])
			return nil
		},
	}
}
