package cli

// chime cron stop and chime cron restart.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func init() {
	addCronCommand(newCronStopCmd)
	addCronCommand(newCronRestartCmd)
}

func newCronStopCmd() *cobra.Command {
	var (
		dir     string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop the node started by chime cron start: SIGTERM, then SIGKILL after --timeout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return stopNode(cmd, dir, timeout)
		},
	}
	dataDirFlag(cmd, &dir)
	cmd.Flags().DurationVar(&timeout, "timeout", 35*time.Second, "how long to wait for a graceful stop before SIGKILL")
	return cmd
}

func stopNode(cmd *cobra.Command, dir string, timeout time.Duration) error {
	st, ok := runningState(dir)
	if !ok {
		fmt.Fprintf(cmd.OutOrStdout(), "chime is not running in %s\n", dir)
		os.Remove(filepath.Join(dir, PIDFile))
		os.Remove(filepath.Join(dir, StateFile))
		return nil
	}
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal pid %d: %w", st.PID, err)
	}
	deadline := time.Now().Add(timeout)
	for alive(st.PID) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	forced := false
	if alive(st.PID) {
		forced = true
		_ = syscall.Kill(st.PID, syscall.SIGKILL)
		for i := 0; i < 100 && alive(st.PID); i++ {
			time.Sleep(50 * time.Millisecond)
		}
	}
	removeIfOurs(dir, st.PID)
	if forced {
		fmt.Fprintf(cmd.OutOrStdout(), "chime (pid %d) did not stop within %s: killed\n", st.PID, timeout)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "chime (pid %d) stopped\n", st.PID)
	}
	return nil
}

func newCronRestartCmd() *cobra.Command {
	var (
		o       nodeOptions
		timeout time.Duration
		wait    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "restart",
		Short: "Stop the node of the data dir if it runs, and start it again as a daemon with its flags",
		Long: `Stop the node of the data dir if it runs (as "chime cron stop"), then start it
again as "chime cron start --daemon", in the same working directory, with the
flags it was started with (kept in chime.state: those of its command line and
of its CHIME_ environment; a --config file is read again).

Flags given here replace the node's flags of the same name; a repeated flag
given here replaces all of its values. For the flags the node was not
started with, the environment of this command applies as usual. Relative
paths resolve against the node's working directory. The node's secrets
(--admin-token, --smtp-password, --secret-key) are not kept on disk: give
them again, as flags or CHIME_ variables, or restart refuses and leaves the
node running. With no state file (the node was stopped, or never started),
only the flags given here count.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.config(cmd)
			if err != nil {
				return err
			}
			dir := cfg.DataDir
			args, env := daemonArgs(cmd.Flags())
			workDir := ""
			// The state of the last node of the data dir: of the running
			// one, or of one that was killed and left it.
			if st, err := readState(dir); err == nil && st.Flags != nil {
				if args, env, err = restartArgs(st, cmd.Flags()); err != nil {
					return err
				}
				workDir = st.Dir
			}
			if err := stopNode(cmd, dir, timeout); err != nil {
				return err
			}
			return spawnDaemon(cmd, dir, wait, args, env, workDir)
		},
	}
	addNodeFlags(cmd, &o)
	cmd.Flags().DurationVar(&timeout, "timeout", 35*time.Second, "how long to wait for a graceful stop before SIGKILL")
	cmd.Flags().DurationVar(&wait, "wait", 60*time.Second, "how long to wait for the node to listen")
	return cmd
}
