// Package cli implements the chime command line: the server (chime serve),
// the client commands over the REST API, and the offline schedule preview.
// cmd/chime only calls Main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// commands and cronCommands are filled by init functions of the files that
// define each command, so that each command lives in its own file.
var (
	commands     []func() *cobra.Command
	cronCommands []func() *cobra.Command
)

func addCommand(f func() *cobra.Command)     { commands = append(commands, f) }
func addCronCommand(f func() *cobra.Command) { cronCommands = append(cronCommands, f) }

// ExitError carries a process exit code through cobra.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// NewRootCmd builds the chime command tree.
func NewRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "chime",
		Short:         "chime is a distributed timer service",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// A bad flag of any command is a usage error: exit 2.
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &ExitError{Code: 2, Err: err} })
	for _, f := range commands {
		root.AddCommand(f())
	}
	cron := &cobra.Command{Use: "cron", Short: "Preview schedules and run the cron daemon"}
	for _, f := range cronCommands {
		cron.AddCommand(f())
	}
	root.AddCommand(cron)
	return root
}

// Main runs the command line with args and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := NewRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "chime:", err)
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

// Run is Main with the process's own arguments and streams.
func Run(ctx context.Context) int { return Main(ctx, os.Args[1:], os.Stdout, os.Stderr) }
