package cli

// The cron daemon commands: chime cron start [--daemon], stop, restart,
// state and list. A node started by `chime cron start` keeps three files in
// its data dir:
//
//	chime.pid    the process id, while it runs
//	chime.state  JSON: pid, API address, node id, start time
//	chime.log    the log of a node started with --daemon
//
// stop, state and list find the node through them (--data-dir, or
// CHIME_DATA_DIR), and state and list ask the node's REST API at the
// recorded address.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/chimehq/chime/api"
	"github.com/chimehq/chime/internal/server"
)

func init() {
	addCronCommand(newCronStartCmd)
	addCronCommand(newCronStopCmd)
	addCronCommand(newCronRestartCmd)
	addCronCommand(newCronStateCmd)
	addCronCommand(newCronListCmd)
}

// Daemon file names in the data dir.
const (
	PIDFile   = "chime.pid"
	StateFile = "chime.state"
	LogFile   = "chime.log"
)

// DaemonState is the content of the state file.
type DaemonState struct {
	PID       int       `json:"pid"`
	Addr      string    `json:"addr"`
	NodeID    string    `json:"node_id"`
	StartedAt time.Time `json:"started_at"`
	// TLS is true when the node serves HTTPS.
	TLS bool `json:"tls,omitempty"`
}

func newCronStartCmd() *cobra.Command {
	var (
		o      nodeOptions
		daemon bool
		wait   time.Duration
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
	prev := cfg.Started
	cfg.Started = func(addr, nodeID string) {
		b, _ := json.MarshalIndent(DaemonState{PID: pid, Addr: addr, NodeID: nodeID, StartedAt: started, TLS: cfg.TLSCert != ""}, "", "  ")
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

// secretFlags are the node flags whose values are secrets: never put on a
// command line chime builds.
var secretFlags = map[string]bool{"admin-token": true, "smtp-password": true, "secret-key": true}

// removeIfOurs removes the pid and state files if they name pid.
func removeIfOurs(dir string, pid int) {
	if p, err := readPID(dir); err == nil && p == pid {
		os.Remove(filepath.Join(dir, PIDFile))
	}
	if st, err := readState(dir); err == nil && st.PID == pid {
		os.Remove(filepath.Join(dir, StateFile))
	}
}

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

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readPID(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, PIDFile))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func readState(dir string) (DaemonState, error) {
	var st DaemonState
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return st, err
	}
	err = json.Unmarshal(b, &st)
	return st, err
}

// alive reports whether a process pid exists.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// runningState returns the state of the node of dir if its process runs.
// The state's address may be empty while the node starts.
func runningState(dir string) (DaemonState, bool) {
	pid, err := readPID(dir)
	if err != nil || !alive(pid) {
		return DaemonState{}, false
	}
	st, err := readState(dir)
	if err != nil || st.PID != pid {
		st = DaemonState{PID: pid}
	}
	return st, true
}

// dataDirFlag adds --data-dir to a command that finds a running node.
func dataDirFlag(cmd *cobra.Command, dir *string) {
	def := os.Getenv(EnvName("data-dir"))
	if def == "" {
		def = "chime-data"
	}
	cmd.Flags().StringVar(dir, "data-dir", def, "data dir of the node (env "+EnvName("data-dir")+")")
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

// nodeClient returns a client of the running node's API, with o's token
// and CA (the server and output of o are ignored).
func nodeClient(dir string, o clientOptions) (*client, DaemonState, error) {
	st, ok := runningState(dir)
	if !ok {
		return nil, st, &ExitError{Code: 3, Err: fmt.Errorf("chime is not running in %s", dir)}
	}
	if st.Addr == "" {
		return nil, st, &ExitError{Code: 1, Err: fmt.Errorf("chime (pid %d) is starting: no API address yet", st.PID)}
	}
	// --token, CHIME_TOKEN, or else the node's own admin token when it was
	// given through the environment, lets the daemon commands in.
	if o.token == "" {
		o.token = os.Getenv(EnvToken)
	}
	if o.token == "" {
		o.token = os.Getenv(EnvName("admin-token"))
	}
	o.server, o.output = "http://"+st.Addr, "table"
	if st.TLS {
		o.server = "https://" + st.Addr
	}
	c, err := o.client()
	return c, st, err
}

// allTimers fetches every timer, page by page.
func allTimers(ctx context.Context, c *client) ([]*api.Timer, error) {
	var out []*api.Timer
	cursor := ""
	for {
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page api.TimerList
		if _, err := c.do(ctx, "GET", "/api/v1/timers", q, nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Timers...)
		if page.NextCursor == "" || len(page.Timers) == 0 {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// nextFire is a timer's next fire, zero when none.
func nextFire(t *api.Timer) time.Time {
	if len(t.NextFireTimes) == 0 {
		return time.Time{}
	}
	return t.NextFireTimes[0]
}

// StateReport is the output of chime cron state -o json.
type StateReport struct {
	Running   bool       `json:"running"`
	PID       int        `json:"pid,omitempty"`
	Uptime    string     `json:"uptime,omitempty"`
	NodeID    string     `json:"node_id,omitempty"`
	Addr      string     `json:"addr,omitempty"`
	Timers    int        `json:"timers"`
	Enabled   int        `json:"enabled"`
	NextFires []NextFire `json:"next_fires"`
	StartedAt *time.Time `json:"started_at,omitempty"`
}

// NextFire is one upcoming fire.
type NextFire struct {
	At    time.Time `json:"at"`
	App   string    `json:"app"`
	Timer string    `json:"timer"`
}

// addNodeClientFlags adds --token and --ca-cert to a command that talks to
// the daemon of the data dir.
func addNodeClientFlags(cmd *cobra.Command, o *clientOptions) {
	cmd.Flags().StringVar(&o.token, "token", "", "API token (env "+EnvToken+", else the daemon's CHIME_ADMIN_TOKEN)")
	cmd.Flags().StringVar(&o.caCert, "ca-cert", "", "PEM file of the CA of the node's certificate (env "+EnvCACert+")")
}

func newCronStateCmd() *cobra.Command {
	var (
		dir    string
		output string
		n      int
		co     clientOptions
	)
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Show whether the node runs: pid, uptime, node id, timers and next fires",
		Long:  "Show whether the node of the data dir runs, and its pid, uptime, node id, timers and next fires. The exit code is 0 when it runs and 3 when it does not.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageErrorf("--output must be table or json, not %q", output)
			}
			w := cmd.OutOrStdout()
			c, st, err := nodeClient(dir, co)
			if err != nil {
				var ee *ExitError
				if errors.As(err, &ee) && ee.Code == 3 {
					if output == "json" {
						b, _ := json.MarshalIndent(StateReport{NextFires: []NextFire{}}, "", "  ")
						fmt.Fprintln(w, string(b))
					} else {
						fmt.Fprintf(w, "state:  stopped\n")
					}
					return &ExitError{Code: 3, Err: fmt.Errorf("chime is not running in %s", dir)}
				}
				return err
			}
			timers, err := allTimers(cmd.Context(), c)
			if err != nil {
				return err
			}
			started := st.StartedAt
			rep := StateReport{Running: true, PID: st.PID, NodeID: st.NodeID, Addr: st.Addr, Timers: len(timers),
				StartedAt: &started, Uptime: time.Since(st.StartedAt).Round(time.Second).String(), NextFires: []NextFire{}}
			for _, t := range timers {
				if t.Enabled != nil && *t.Enabled {
					rep.Enabled++
				}
				for _, f := range t.NextFireTimes {
					rep.NextFires = append(rep.NextFires, NextFire{At: f, App: t.App, Timer: t.Name})
				}
			}
			sort.Slice(rep.NextFires, func(i, j int) bool { return rep.NextFires[i].At.Before(rep.NextFires[j].At) })
			if len(rep.NextFires) > n {
				rep.NextFires = rep.NextFires[:n]
			}
			if output == "json" {
				b, _ := json.MarshalIndent(rep, "", "  ")
				fmt.Fprintln(w, string(b))
				return nil
			}
			fmt.Fprintf(w, "state:   running\npid:     %d\nuptime:  %s\nnode:    %s\nlisten:  %s\ntimers:  %d (%d enabled)\n",
				rep.PID, rep.Uptime, rep.NodeID, rep.Addr, rep.Timers, rep.Enabled)
			if len(rep.NextFires) == 0 {
				fmt.Fprintln(w, "next fires: none")
				return nil
			}
			fmt.Fprintln(w, "next fires:")
			tb := newTable(w)
			for _, f := range rep.NextFires {
				tb.row("  "+f.At.Format(time.RFC3339), f.App+"/"+f.Timer)
			}
			return tb.flush()
		},
	}
	dataDirFlag(cmd, &dir)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().IntVarP(&n, "next", "n", 5, "how many next fires to show")
	addNodeClientFlags(cmd, &co)
	return cmd
}

func newCronListCmd() *cobra.Command {
	var (
		dir    string
		output string
		co     clientOptions
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the timers of the running node with their next fire",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageErrorf("--output must be table or json, not %q", output)
			}
			c, _, err := nodeClient(dir, co)
			if err != nil {
				return err
			}
			timers, err := allTimers(cmd.Context(), c)
			if err != nil {
				return err
			}
			sort.SliceStable(timers, func(i, j int) bool {
				a, b := nextFire(timers[i]), nextFire(timers[j])
				if a.IsZero() != b.IsZero() {
					return b.IsZero()
				}
				return a.Before(b)
			})
			w := cmd.OutOrStdout()
			if output == "json" {
				b, _ := json.MarshalIndent(api.TimerList{Timers: timers}, "", "  ")
				fmt.Fprintln(w, string(b))
				return nil
			}
			tb := newTable(w, "APP", "NAME", "SCHEDULE", "ENABLED", "NEXT FIRE", "ACTION", "ID")
			for _, t := range timers {
				next := nextFire(t)
				action := "-"
				if t.Action != nil {
					action = t.Action.Type
					if t.Action.Handler != nil {
						action += ":" + t.Action.Handler.Name
					}
				}
				enabled := "yes"
				if t.Enabled != nil && !*t.Enabled {
					enabled = "no"
				}
				tb.row(t.App, t.Name, truncate(t.Schedule, 40), enabled, fmtTime(&next), action, t.ID)
			}
			return tb.flush()
		},
	}
	dataDirFlag(cmd, &dir)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	addNodeClientFlags(cmd, &co)
	return cmd
}
