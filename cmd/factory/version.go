package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"factory/internal/store"
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
		Short:   "Print the version, commit, Go version and the store format it writes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output == "json" {
				return printJSON(a.stdout, map[string]any{"version": version, "commit": commit, "go": runtime.Version(),
					"store_format": store.FormatVersion})
			}
			fmt.Fprintf(a.stdout, "factory %s (commit %s, %s, store format %d)\n", version, commit, runtime.Version(), store.FormatVersion)
			return nil
		},
	}
	outputFlag(cmd, &output, "text", "json")
	return cmd
}

// versionString names this binary in what it records (backups, the
// store's format stamp): its version and commit.
func versionString() string { return version + " (" + commit + ")" }
