// Package cli implements the chime command line: the server (chime serve),
// the client commands over the REST API, and the offline schedule preview.
// cmd/chime only calls Main.
//
// # Where to start reading
//
// root.go builds the root command from the commands that each file
// registers in its init (one command, or one family, per file):
//
//   - serve.go: chime serve, and the node flags that chime cron start
//     shares; config.go applies the environment and --config to them.
//     The node itself is internal/app/server's, assembled by chime.New;
//   - cron_daemon.go: chime cron start/stop/restart/state/list, with the
//     map of its files (cron_start.go, cron_reexec.go, cron_files.go,
//     cron_stop.go, cron_state.go); cron_next.go: chime cron next;
//   - client.go: the REST client and the flags of the client commands
//     (timer.go and run.go: chime timer, chime run; token.go: chime token,
//     chime audit; app.go: chime app);
//   - bench.go and chaos.go: chime bench and chime chaos, thin flag layers
//     over internal/app/bench and internal/app/chaos;
//   - healthcheck.go: chime healthcheck, the container image's health
//     check; version.go: chime version, from the build information;
//   - cidr.go: the CIDR list flags of the callback egress policy.
//
// Shell completion (chime completion bash|zsh|fish) is cobra's own command.
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
