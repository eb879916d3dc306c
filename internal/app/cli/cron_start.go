package cli

// chime cron start: the node in the foreground, with its pid and state
// files (cron_daemon.go); --daemon hands over to cron_reexec.go.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/app/server"
)

func init() { addCronCommand(newCronStartCmd) }

func newCronStartCmd() *cobra.Command {
	var (
		o         nodeOptions
		daemon    bool
		wait      time.Duration
		secretsFD int
	)
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Run the chime node, in the foreground or as a daemon (--daemon)",
		Long: `Run the chime node, with the flags of "chime serve".

In the foreground it runs until SIGINT or SIGTERM. With --daemon it starts
itself again detached (a new session), logs to chime.log in the data dir,
and returns once the node listens. Either way the data dir holds chime.pid
and chime.state, which "chime cron stop", "state" and "list" read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if secretsFD > 0 {
				if err := readSecrets(cmd.Flags(), secretsFD); err != nil {
					return &ExitError{Code: 2, Err: err}
				}
			}
			cfg, err := o.config(cmd)
			if err != nil {
				return err
			}
			if daemon {
				return startDaemon(cmd, cfg.DataDir, wait)
			}
			return runForeground(cmd, cfg)
		},
	}
	addNodeFlags(cmd, &o)
	cmd.Flags().BoolVar(&daemon, "daemon", false, "run detached, logging to chime.log in the data dir")
	cmd.Flags().DurationVar(&wait, "wait", 60*time.Second, "with --daemon, how long to wait for the node to listen")
	// The daemon's secrets come through this inherited file (spawnDaemon).
	cmd.Flags().IntVar(&secretsFD, secretsFDFlag, 0, "file descriptor the secret flags come through (set by --daemon)")
	_ = cmd.Flags().MarkHidden(secretsFDFlag)
	return cmd
}

// runForeground runs the node with the pid and state files.
func runForeground(cmd *cobra.Command, cfg server.Config) error {
	dir := cfg.DataDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if st, ok := runningState(dir); ok {
		return fmt.Errorf("chime is already running in %s (pid %d)", dir, st.PID)
	}
	pid := os.Getpid()
	if err := writeFileAtomic(filepath.Join(dir, PIDFile), []byte(strconv.Itoa(pid)+"\n")); err != nil {
		return err
	}
	defer removeIfOurs(dir, pid)
	started := time.Now().UTC()
	flags, secrets := recordFlags(cmd.Flags())
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	prev := cfg.Started
	cfg.Started = func(addr, nodeID string) {
		b, _ := json.MarshalIndent(DaemonState{PID: pid, Addr: addr, NodeID: nodeID, StartedAt: started, TLS: cfg.TLSCert != "",
			Flags: flags, SecretFlags: secrets, Dir: wd}, "", "  ")
		if err := writeFileAtomic(filepath.Join(dir, StateFile), append(b, '\n')); err != nil {
			cfg.Logger.Warn("write state file", "err", err)
		}
		if prev != nil {
			prev(addr, nodeID)
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serverError(server.Run(ctx, cfg))
}

// removeIfOurs removes the pid and state files if they name pid.
func removeIfOurs(dir string, pid int) {
	if p, err := readPID(dir); err == nil && p == pid {
		os.Remove(filepath.Join(dir, PIDFile))
	}
	if st, err := readState(dir); err == nil && st.PID == pid {
		os.Remove(filepath.Join(dir, StateFile))
	}
}
