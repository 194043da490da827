package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"factory/internal/schema"
)

func (a *app) schemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema [KIND]",
		Short: "Print an embedded JSON Schema (the nine v1alpha1 documents, config, filter, server)",
		Long: `Print the JSON Schema (draft 2020-12) that files are validated against. The schemas
are the reference of the file formats: each key has a description. Without KIND,
list the kinds.`,
		Example: `  factory schema                      # list the kinds
  factory schema agent > agent.schema.json`,
		Args: cobra.MaximumNArgs(1),
		ValidArgs: func() []string {
			var out []string
			for _, k := range schema.Kinds {
				out = append(out, string(k))
			}
			return out
		}(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "KIND\tVALIDATES")
				for _, k := range schema.Kinds {
					fmt.Fprintf(tw, "%s\t%s\n", k, map[schema.Kind]string{
						schema.KindWebhook:    "webhooks/<name>.yaml",
						schema.KindAutomation: "the front matter of automations/<name>/automation.md (or automations/<name>.md)",
						schema.KindConfig:     "an automation's config (AmbientAgentConfig; an extension)",
						schema.KindFilter:     "a trigger's payload filter",
						schema.KindFactory:    "factory.yaml",
						schema.KindServer:     "the server's --config file",
						schema.KindAgent:      "the front matter of agents/<name>/agent.md",
						schema.KindRunner:     "runners/<name>.yaml",
						schema.KindScorer:     "the front matter of scorers/<name>/scorer.md",
						schema.KindSuite:      "benchmarks/<suite>/suite.yaml",
						schema.KindTask:       "benchmarks/<suite>/tasks/<task>.yaml",
						schema.KindCommon:     "definitions the others share (harness, trigger, ...)",
					}[k])
				}
				return tw.Flush()
			}
			b, err := schema.Source(schema.Kind(args[0]))
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(b)
			return err
		},
	}
}
