package main

import (
	"errors"
	"fmt"

	"factory"

	"github.com/spf13/cobra"
)

func (a *app) automationsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "automations", Short: "Act on applied automations: test a filter against a delivery",
		Example: "  factory automations test acme/triage-issues --delivery dlv_33n3ev4xymq13c7csypfdqhr73jfm"}
	var delivery, output string
	var exitCodeFlag bool
	test := &cobra.Command{
		Use:   "test NAME|FACTORY/NAME|ID --delivery ID",
		Short: "Would this delivery trigger the automation? (the Test filter action)",
		Long: `Evaluate an automation against a stored accepted delivery without starting anything,
and say "Would trigger" or "Would not trigger", with the outcome of the webhook check
(did the delivery come through a webhook a trigger selects, and is it enabled) and of
each payload filter key, so you see which key stopped the delivery.`,
		Example: "  factory automations test example/triage-issues --delivery dlv_33n3ev4xymq13c7csypfdqhr73jfm",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if delivery == "" {
				return errors.New("--delivery is required: pick one from factory webhooks deliveries")
			}
			var res *factory.TestResult
			err := a.withBackend(func(b backend) error {
				au, err := resolveAutomation(cmd.Context(), b, args[0])
				if err != nil {
					return err
				}
				res, err = b.TestFilter(cmd.Context(), au.uid, delivery)
				return err
			})
			if err != nil {
				return err
			}
			if output == "json" {
				if err := printJSON(a.stdout, res); err != nil {
					return err
				}
				return verdictExit(exitCodeFlag, res)
			}
			verdict := "Would not trigger"
			if res.WouldTrigger {
				verdict = "Would trigger"
			}
			fmt.Fprintln(a.stdout, verdict)
			if res.Note != "" {
				fmt.Fprintf(a.stdout, "  note: %s\n", res.Note)
			}
			fmt.Fprintf(a.stdout, "  webhook check: %s: %s\n", passFail(res.WebhookCheck.Passed), res.WebhookCheck.Detail)
			fmt.Fprintf(a.stdout, "  payload check: %s\n", passFail(res.PayloadCheck.Passed))
			for _, k := range res.PayloadCheck.Keys {
				actual := "missing"
				if k.ActualPresent {
					actual = mustJSON(k.Actual)
				}
				fmt.Fprintf(a.stdout, "    %s %s %s %s: actual %s\n", passFail(k.Passed), k.Path, k.Operator, mustJSON(k.Expected), actual)
			}
			return verdictExit(exitCodeFlag, res)
		},
	}
	test.Flags().StringVar(&delivery, "delivery", "", "the delivery ID (required)")
	test.Flags().BoolVar(&exitCodeFlag, "exit-code", false, "exit 1 when the delivery would not trigger the automation")
	outputFlag(test, &output, "text", "json")
	cmd.AddCommand(test)
	return cmd
}

func passFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

func mustJSON(v any) string {
	b, err := jsonMarshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// verdictExit is the exit of automations test: 1 for "Would not trigger"
// with --exit-code, for scripts.
func verdictExit(want bool, res *factory.TestResult) error {
	if want && !res.WouldTrigger {
		return exitCode(1)
	}
	return nil
}
