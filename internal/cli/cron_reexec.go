package cli

// chime cron start --daemon: this program started again as `cron start`
// without --daemon, detached, with the same flags (secrets through the
// environment), waited for until the node listens.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// secretFlags are the node flags whose values are secrets: never put on a
// command line chime builds.
var secretFlags = map[string]bool{"admin-token": true, "smtp-password": true, "secret-key": true}

// startDaemon starts this program again as `cron start` without --daemon,
// detached, with the flags given on the command line, and waits until the
// node listens.
func startDaemon(cmd *cobra.Command, dir string, wait time.Duration) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if st, ok := runningState(dir); ok {
		return fmt.Errorf("chime is already running in %s (pid %d)", dir, st.PID)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args, env := daemonArgs(cmd.Flags())
	// The data dir is resolved now, so that the daemon does not depend on
	// the working directory it keeps.
	logPath := filepath.Join(dir, LogFile)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	os.Remove(filepath.Join(dir, StateFile))
	child := exec.Command(exe, args...)
	child.Env = append(os.Environ(), env...)
	child.Stdin, child.Stdout, child.Stderr = devnull, logf, logf
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	deadline := time.After(wait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("the daemon exited (%v); see %s:\n%s", err, logPath, tail(logPath, 20))
		case <-deadline:
			return fmt.Errorf("the daemon (pid %d) did not start listening within %s; see %s", child.Process.Pid, wait, logPath)
		case <-tick.C:
		}
		if st, err := readState(dir); err == nil && st.PID == child.Process.Pid {
			fmt.Fprintf(cmd.OutOrStdout(), "chime started (pid %d), listening on %s, node %s, log %s\n", st.PID, st.Addr, st.NodeID, logPath)
			return nil
		}
	}
}

// daemonArgs returns the command line of the daemon, with the flags given
// to this command (a repeated flag once per value), and the environment it
// adds: secrets go there, not on a command line that every user sees.
func daemonArgs(flags *pflag.FlagSet) (args, env []string) {
	args = []string{"cron", "start"}
	flags.Visit(func(f *pflag.Flag) {
		switch sv, isSlice := f.Value.(pflag.SliceValue); {
		case f.Name == "daemon" || f.Name == "wait":
		case secretFlags[f.Name]:
			// Through the environment: a command line is seen by every user.
			env = append(env, EnvName(f.Name)+"="+f.Value.String())
		case isSlice:
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+f.Name+"="+v)
			}
		default:
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	return args, env
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
