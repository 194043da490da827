package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"factory/internal/harness"
)

// harnessesDir is where the data directory keeps the installed harnesses.
func (a *app) harnessesDir() string { return filepath.Join(a.dataDir(), "harnesses") }

// HarnessesEnv names the harnesses folder in a turn's environment.
const HarnessesEnv = harness.DirEnv

func (a *app) harnessesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "harnesses",
		Short: "Install and list the agent harnesses (Claude Code, Codex, Gemini CLI over ACP)",
		Long: `The harnesses are the agent programs a factory's agents name (harness: claude, codex,
gemini), each an npm package at a version this release pins: Claude Code and Codex through
their ACP adapters, Gemini CLI. They are installed under <data>/harnesses with npm; a server
maps each installed one to an environment of the same name (unless runtime.harnesses maps it)
and runs its agents through the model gateway (docs/harnesses.md).`,
		Example: `  factory harnesses install              # all three
  factory harnesses install claude gemini
  factory harnesses list`,
	}
	cmd.AddCommand(a.harnessesInstallCmd(), a.harnessesListCmd(), a.harnessesExecCmd())
	return cmd
}

func (a *app) harnessesInstallCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "install [NAME...]",
		Short: "Install harnesses (all without names) at their pinned versions with npm",
		Long: `Install the named harnesses (claude, codex, gemini; all without names) at the versions
this release pins, with npm, under <data>/harnesses. An installed harness is installed again
(to its pinned version). A worker installs them in its own data directory
(factory harnesses install --data <worker data>). Needs npm and node.`,
		Example: `  factory harnesses install
  factory --data /var/lib/factory harnesses install codex`,
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := harnessNames(args)
			if err != nil {
				return err
			}
			for _, n := range names {
				h, _ := harness.Lookup(n)
				fmt.Fprintf(a.stdout, "installing %s (%s@%s)...\n", h.Name, h.Package, h.Version)
				if err := h.Install(cmd.Context(), a.harnessesDir(), a.stderr); err != nil {
					return fmt.Errorf("%s: %w", h.Name, err)
				}
				fmt.Fprintf(a.stdout, "installed %s %s in %s\n", h.Name, h.Version, h.Dir(a.harnessesDir()))
			}
			return nil
		},
	}
}

// harnessNames are the harnesses named, all when none is; an unknown name
// is an error naming the known ones.
func harnessNames(args []string) ([]string, error) {
	if len(args) == 0 {
		return harness.Names(), nil
	}
	for _, n := range args {
		if _, ok := harness.Lookup(n); !ok {
			return nil, fmt.Errorf("no harness %q: the harnesses are %s", n, strings.Join(harness.Names(), ", "))
		}
	}
	return slices.Compact(args), nil
}

func (a *app) harnessesListCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the harnesses, installed (with their versions) or not",
		Example: "  factory harnesses list --output json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			hs := a.harnessStatus()
			if output == "json" {
				return printJSON(a.stdout, hs)
			}
			printHarnesses(a.stdout, a.harnessesDir(), hs)
			return nil
		},
	}
	outputFlag(cmd, &output, "text", "json")
	return cmd
}

// harnessState is a harness as list and status show it.
type harnessState struct {
	Name      string `json:"name"`
	Package   string `json:"package"`
	Pinned    string `json:"pinned_version"`
	Installed string `json:"installed_version,omitempty"`
	Provider  string `json:"provider"`
}

func (a *app) harnessStatus() []harnessState {
	var out []harnessState
	for _, h := range harness.Harnesses {
		out = append(out, harnessState{Name: h.Name, Package: h.Package, Pinned: h.Version, Installed: h.Installed(a.harnessesDir()), Provider: h.Provider})
	}
	return out
}

func printHarnesses(w io.Writer, dir string, hs []harnessState) {
	fmt.Fprintf(w, "Harnesses (%s):\n", dir)
	for _, h := range hs {
		switch {
		case h.Installed == "":
			fmt.Fprintf(w, "  %s: not installed (factory harnesses install %s)\n", h.Name, h.Name)
		case h.Installed != h.Pinned:
			fmt.Fprintf(w, "  %s: installed %s, this release pins %s (factory harnesses install %s)\n", h.Name, h.Installed, h.Pinned, h.Name)
		default:
			fmt.Fprintf(w, "  %s: installed %s (%s), calls %s through the gateway\n", h.Name, h.Installed, h.Package, h.Provider)
		}
	}
}

// harnessesExecCmd runs an installed harness in place of this process: a
// turn's command, so that the server and each worker run their own
// install ($FACTORY_HARNESSES, which the host of the turn sets).
func (a *app) harnessesExecCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "exec NAME [ARGS...]",
		Short:   "Run an installed harness in place of this process (a turn's command)",
		Example: "  FACTORY_HARNESSES=/var/lib/factory/harnesses factory harnesses exec gemini",
		Hidden:  true,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, ok := harness.Lookup(args[0])
			if !ok {
				return fmt.Errorf("no harness %q", args[0])
			}
			root := os.Getenv(HarnessesEnv)
			if root == "" {
				return errors.New(HarnessesEnv + " is not set: the host of the turn names where its harnesses are")
			}
			return h.Exec(root, args[1:])
		},
		DisableFlagParsing: true,
	}
}
