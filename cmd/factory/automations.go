package main

import (
	"errors"
	"fmt"
	"sort"

	"factory"

	"github.com/spf13/cobra"

	"factory/server"
	"factory/store"
)

func (a *app) automationsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "automations", Short: "Act on applied automations: test a filter against a delivery"}
	var delivery, output string
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
			var res server.TestResult
			if c := a.remote(); c != nil {
				uid, err := remoteAutomationUID(cmd, a, args[0])
				if err != nil {
					return err
				}
				if err := c.TestFilter(cmd.Context(), uid, delivery, &res); err != nil {
					return apiError(err)
				}
			} else if err := a.withStore(func(s *store.Store) error {
				au, err := findAutomation(s, args[0])
				if err != nil {
					return err
				}
				r, err := server.TestFilter(s, au.UID, delivery)
				var apiErr *server.Error
				if errors.As(err, &apiErr) {
					return errors.New(apiErr.Message)
				}
				if err == nil {
					res = *r
				}
				return err
			}); err != nil {
				return err
			}
			if output == "json" {
				return printJSON(a.stdout, res)
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
			return nil
		},
	}
	test.Flags().StringVar(&delivery, "delivery", "", "the delivery ID (required)")
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

// findAutomation resolves NAME, FACTORY/NAME or an ID in the store.
func findAutomation(s *store.Store, arg string) (*factory.Automation, error) {
	if au, err := s.AutomationByUID(arg); err == nil {
		return au, nil
	}
	fs, err := s.Factories()
	if err != nil {
		return nil, err
	}
	fac, name := splitName(arg)
	var found []*factory.Automation
	for _, f := range fs {
		if fac != "" && f.Name != fac {
			continue
		}
		aus, err := s.Automations(f.Name)
		if err != nil {
			return nil, err
		}
		for _, au := range aus {
			if au.Key == name {
				found = append(found, au)
			}
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no automation %q (factory status lists them)", arg)
	case 1:
		return found[0], nil
	}
	var names []string
	for _, au := range found {
		names = append(names, au.Factory+"/"+au.Key)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("%q is ambiguous: say which factory: %v", arg, names)
}

func remoteAutomationUID(cmd *cobra.Command, a *app, arg string) (string, error) {
	c := a.remote()
	sts, err := remoteView{c}.Statuses(cmd.Context())
	if err != nil {
		return "", err
	}
	fac, name := splitName(arg)
	var ids []string
	for _, st := range sts {
		for _, au := range st.Automations {
			if au.ID == arg || au.Name == name && (fac == "" || st.Name == fac) {
				ids = append(ids, au.ID)
			}
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("no automation %q (factory status lists them)", arg)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%q is ambiguous: say which factory, as FACTORY/NAME", arg)
}
