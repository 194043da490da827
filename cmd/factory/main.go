// Command factory reconciles factory repositories (webhooks and automations
// as code), serves webhook ingress and the Agents API, and runs agents.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() { os.Exit(Main()) }

// Main runs the command line and returns the process exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	err := a.rootCmd().ExecuteContext(ctx)
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	default:
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
}

// exitCode ends the command with a code and no further message: the
// command has already said what there was to say.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit code %d", int(c)) }
