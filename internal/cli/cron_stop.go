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
		Short: "Stop the node of the data dir if it runs, and start it again as a daemon",
		Long:  `Stop the node of the data dir if it runs (as "chime cron stop"), then start it as "chime cron start --daemon" with the flags given here.`,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.config(cmd)
			if err != nil {
				return err
			}
			if err := stopNode(cmd, cfg.DataDir, timeout); err != nil {
				return err
			}
			return startDaemon(cmd, cfg.DataDir, wait)
		},
	}
	addNodeFlags(cmd, &o)
	cmd.Flags().DurationVar(&timeout, "timeout", 35*time.Second, "how long to wait for a graceful stop before SIGKILL")
	cmd.Flags().DurationVar(&wait, "wait", 60*time.Second, "how long to wait for the node to listen")
	return cmd
}
