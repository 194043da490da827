package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// Set at build time with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

func (a *app) versionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "version",
		Example: `  factory version --output json`,
		Short:   "Print the version, commit and Go version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output == "json" {
				return printJSON(a.stdout, map[string]string{"version": version, "commit": commit, "go": runtime.Version()})
			}
			fmt.Fprintf(a.stdout, "factory %s (commit %s, %s)\n", version, commit, runtime.Version())
			return nil
		},
	}
	outputFlag(cmd, &output, "text", "json")
	return cmd
}
