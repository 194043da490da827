package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"factory"
	"factory/client"
)

// tasksCmd is factory tasks: a factory's tasks through their stages
// (docs/foreman.md).
func (a *app) tasksCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tasks", Short: "List, inspect, move and cancel a factory's tasks (docs/foreman.md)",
		Example: "  factory tasks list --factory acme --stage SPEC\n  factory tasks get --factory acme task_0123\n  factory tasks stage --factory acme task_0123 REVIEW"}
	var fac, output string
	cmd.PersistentFlags().StringVar(&fac, "factory", "", "the factory (name or UID)")
	cmd.AddCommand(a.tasksListCmd(&fac, &output), a.tasksGetCmd(&fac, &output), a.tasksStageCmd(&fac, &output), a.tasksCancelCmd(&fac, &output))
	return cmd
}

// tasksClient is the server's client, for a factory named by --factory.
func (a *app) tasksClient(fac string) (*client.Client, error) {
	if fac == "" {
		return nil, errors.New("--factory: name the factory (factory status lists them)")
	}
	return a.runsClient()
}

func (a *app) tasksListCmd(fac, output *string) *cobra.Command {
	var stages []string
	var q string
	cmd := &cobra.Command{Use: "list --factory NAME", Short: "List the factory's tasks, newest first", Args: cobra.NoArgs,
		Example: "  factory tasks list --factory acme --stage IMPLEMENT --stage REVIEW",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.tasksClient(*fac)
			if err != nil {
				return err
			}
			query := url.Values{"include_current_run": {"true"}, "full_list": {"true"}, "q": {q}}
			for _, s := range stages {
				query.Add("stage", strings.ToUpper(s))
			}
			page, err := c.ListTasks(cmd.Context(), *fac, query)
			if err != nil {
				return apiError(err)
			}
			if *output == "json" {
				return printJSON(a.stdout, page)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tSTAGE\tRUN\tSTATE\tTICKET\tTITLE")
			for _, t := range page.Tasks {
				run, state := "-", "-"
				if t.CurrentRun != nil {
					run, state = t.CurrentRun.RunID, string(t.CurrentRun.State)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.UID, t.Stage, run, state, ticket(t), t.Title)
			}
			return tw.Flush()
		}}
	cmd.Flags().StringSliceVar(&stages, "stage", nil, "only tasks in this stage (repeat for several)")
	cmd.Flags().StringVar(&q, "search", "", "only tasks whose title holds this")
	outputFlag(cmd, output, "text", "json")
	return cmd
}

func ticket(t factory.TaskItem) string {
	if t.TicketSource == "" {
		return "-"
	}
	return t.TicketSource + ":" + t.TicketID
}

func (a *app) tasksGetCmd(fac, output *string) *cobra.Command {
	cmd := &cobra.Command{Use: "get --factory NAME TASK", Short: "Show a task: its stage, current run and outputs", Args: cobra.ExactArgs(1),
		Example: "  factory tasks get --factory acme task_0123 -o json",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.tasksClient(*fac)
			if err != nil {
				return err
			}
			return a.printTask(c.GetTask(cmd.Context(), *fac, args[0]))(*output)
		}}
	outputFlag(cmd, output, "text", "json")
	return cmd
}

// printTask prints what a call answered: the task, or the call's error.
func (a *app) printTask(t *factory.TaskItem, err error) func(output string) error {
	return func(output string) error {
		if err != nil {
			return apiError(err)
		}
		return a.writeTask(t, output)
	}
}

func (a *app) writeTask(t *factory.TaskItem, output string) error {
	if output == "json" {
		return printJSON(a.stdout, t)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Task:\t%s\nTitle:\t%s\nStage:\t%s\nTicket:\t%s\nConversation:\t%s\n", t.UID, t.Title, t.Stage, ticket(*t), t.ConversationID)
	if t.CurrentRun != nil {
		fmt.Fprintf(tw, "Current run:\t%s (%s)\n", t.CurrentRun.RunID, t.CurrentRun.State)
	}
	for _, o := range t.Outputs {
		fmt.Fprintf(tw, "Output:\t%s %s\n", o.Type, firstNonEmpty(o.Data.URL, o.Data.Filename, o.Data.Title))
	}
	return tw.Flush()
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func (a *app) tasksStageCmd(fac, output *string) *cobra.Command {
	cmd := &cobra.Command{Use: "stage --factory NAME TASK STAGE", Short: "Move a task to a stage (TRIAGE, SPEC, IMPLEMENT, REVIEW, COMPLETE, CANCELLED)",
		Args: cobra.ExactArgs(2), Example: "  factory tasks stage --factory acme task_0123 REVIEW",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.tasksClient(*fac)
			if err != nil {
				return err
			}
			st, ok := factory.ParseTaskStage(args[1])
			if !ok {
				return fmt.Errorf("%q is not a stage: TRIAGE, SPEC, IMPLEMENT, REVIEW, COMPLETE or CANCELLED", args[1])
			}
			return a.printTask(c.SetTaskStage(cmd.Context(), *fac, args[0], st))(*output)
		}}
	outputFlag(cmd, output, "text", "json")
	return cmd
}

func (a *app) tasksCancelCmd(fac, output *string) *cobra.Command {
	cmd := &cobra.Command{Use: "cancel --factory NAME TASK", Short: "Cancel a task and every run of its tree", Args: cobra.ExactArgs(1),
		Example: "  factory tasks cancel --factory acme task_0123",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.tasksClient(*fac)
			if err != nil {
				return err
			}
			return a.printTask(c.CancelTask(cmd.Context(), *fac, args[0]))(*output)
		}}
	outputFlag(cmd, output, "text", "json")
	return cmd
}

// inboxCmd is factory inbox: what the factory's agents ask people.
func (a *app) inboxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "inbox", Short: "List and answer what the factory's agents ask (questions, spec and pull request reviews)",
		Example: "  factory inbox list\n  factory inbox answer ntf_0123 approve --comment \"Ship it\""}
	cmd.AddCommand(a.inboxListCmd(), a.inboxAnswerCmd())
	return cmd
}

func (a *app) inboxListCmd() *cobra.Command {
	var output string
	var all bool
	cmd := &cobra.Command{Use: "list", Short: "List the open items, newest first", Args: cobra.NoArgs,
		Example: "  factory inbox list --all -o json",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.runsClient()
			if err != nil {
				return err
			}
			items, err := c.Inbox(cmd.Context(), url.Values{"include_resolved": {fmt.Sprint(all)}})
			if err != nil {
				return apiError(err)
			}
			if output == "json" {
				return printJSON(a.stdout, items)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ITEM\tKIND\tTASK\tRUN\tOPTIONS\tQUESTION")
			for _, it := range items {
				opts := "-"
				if len(it.Questions) > 0 {
					opts = strings.Join(it.Questions[0].Options, "|")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", it.NotificationUID, it.Kind, firstNonEmpty(it.FactoryTaskUID, "-"), it.RunID, opts, it.Title)
			}
			return tw.Flush()
		}}
	cmd.Flags().BoolVar(&all, "all", false, "resolved items too")
	outputFlag(cmd, &output, "text", "json")
	return cmd
}

func (a *app) inboxAnswerCmd() *cobra.Command {
	var output, comment string
	cmd := &cobra.Command{Use: "answer ITEM ANSWER", Short: "Answer an item: the run that asked continues with the answer", Args: cobra.ExactArgs(2),
		Example: "  factory inbox answer ntf_0123 request_changes --comment \"Cover the error path\"",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.runsClient()
			if err != nil {
				return err
			}
			it, err := c.AnswerInboxItem(cmd.Context(), args[0], args[1], comment)
			if err != nil {
				return apiError(err)
			}
			if output == "json" {
				return printJSON(a.stdout, it)
			}
			fmt.Fprintf(a.stdout, "answered %s (%s): %s; run %s continues\n", it.NotificationUID, it.Kind, it.Answer, it.RunID)
			return nil
		}}
	cmd.Flags().StringVar(&comment, "comment", "", "a comment with the answer")
	outputFlag(cmd, &output, "text", "json")
	return cmd
}
