package cli

// chime cron start --daemon: this program started again as `cron start`
// without --daemon, detached, with the same flags (secrets through an
// inherited pipe, never the command line or the environment), waited for
// until the node listens; and the flags chime cron restart starts the next
// node with.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// secretFlags are the node flags whose values are secrets: never put on a
// command line chime builds.
var secretFlags = map[string]bool{"admin-token": true, "smtp-password": true, "secret-key": true}

// startDaemon starts this program again as `cron start` without --daemon,
// detached, with the flags given on the command line or by the
// environment, and waits until the node listens.
func startDaemon(cmd *cobra.Command, dir string, wait time.Duration) error {
	args, env := daemonArgs(cmd.Flags())
	return spawnDaemon(cmd, dir, wait, args, env, "")
}

// spawnDaemon starts this program with args (a `cron start` command line)
// and the secrets (CHIME_NAME=value, as daemonArgs returns them) detached,
// in workDir (empty: this process's), and waits until the node listens.
// The data dir is resolved now and given as --data-dir, whatever args say,
// so that the daemon does not depend on the working directory.
//
// The secrets reach the daemon through a pipe it inherits as file 3
// (--secrets-fd, read by readSecrets), not through its environment, which
// /proc/PID/environ shows for the daemon's whole life; the daemon's
// environment is this process's without the secret flags' variables.
func spawnDaemon(cmd *cobra.Command, dir string, wait time.Duration, args, secrets []string, workDir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
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
	args = append(slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "--data-dir=") }),
		"--data-dir="+dir)
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
	var pipeR, pipeW *os.File
	if len(secrets) > 0 {
		if pipeR, pipeW, err = os.Pipe(); err != nil {
			return fmt.Errorf("start daemon: %w", err)
		}
		defer pipeW.Close()
		args = append(args, "--"+secretsFDFlag+"=3")
	}
	child := exec.Command(exe, args...)
	child.Dir = workDir
	child.Env = withoutSecretEnv(os.Environ())
	child.Stdin, child.Stdout, child.Stderr = devnull, logf, logf
	if pipeR != nil {
		child.ExtraFiles = []*os.File{pipeR} // file 3
	}
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = child.Start()
	if pipeR != nil {
		pipeR.Close()
	}
	if err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	if pipeW != nil {
		b, _ := json.Marshal(secrets)
		_, werr := pipeW.Write(b)
		if cerr := pipeW.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = child.Process.Kill()
			return fmt.Errorf("start daemon: hand over the secrets: %w", werr)
		}
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

// secretsFDFlag is the hidden flag of cron start naming the inherited file
// the secrets come through (spawnDaemon).
const secretsFDFlag = "secrets-fd"

// withoutSecretEnv returns env without the variables of the secret flags.
func withoutSecretEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		for name := range secretFlags {
			if k == EnvName(name) {
				return true
			}
		}
		return false
	})
}

// readSecrets reads the secrets spawnDaemon writes to file fd (a JSON
// list of CHIME_NAME=value) and sets their flags, as if given on the
// command line.
func readSecrets(flags *pflag.FlagSet, fd int) error {
	f := os.NewFile(uintptr(fd), "secrets")
	if f == nil {
		return fmt.Errorf("--%s: %d is not an open file", secretsFDFlag, fd)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return fmt.Errorf("--%s: %w", secretsFDFlag, err)
	}
	var secrets []string
	if err := json.Unmarshal(b, &secrets); err != nil {
		return fmt.Errorf("--%s: %w", secretsFDFlag, err)
	}
	for _, kv := range secrets {
		k, v, _ := strings.Cut(kv, "=")
		set := false
		for name := range secretFlags {
			if EnvName(name) == k {
				if err := flags.Set(name, v); err != nil {
					return fmt.Errorf("--%s: %s: %w", secretsFDFlag, k, err)
				}
				set = true
			}
		}
		if !set {
			return fmt.Errorf("--%s: %s is not a secret flag's variable", secretsFDFlag, k)
		}
	}
	return nil
}

// nodeFlagNames is the set of the node flags (addNodeFlags): those a
// daemon's command line carries, and not the flags of the daemon commands
// themselves (--daemon, --wait, --timeout).
var nodeFlagNames = sync.OnceValue(func() map[string]bool {
	var o nodeOptions
	cmd := &cobra.Command{}
	addNodeFlags(cmd, &o)
	names := map[string]bool{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
	return names
})

// givenFlag is a node flag given on the command line or by the
// environment.
type givenFlag struct {
	name    string
	values  []string // one per value of a repeated flag
	cmdline bool     // on the command line (else from the environment)
}

// args is the flag on a command line: --name=value, once per value.
func (g givenFlag) args() []string {
	var out []string
	for _, v := range g.values {
		out = append(out, "--"+g.name+"="+v)
	}
	return out
}

// givenFlags returns the node flags of flags given on the command line or
// by their CHIME_ environment variable, in flag order. Call it after
// applyConfig, which sets the values of the environment's flags; values
// from a --config file are not returned (--config itself is).
func givenFlags(flags *pflag.FlagSet) []givenFlag {
	var out []givenFlag
	flags.VisitAll(func(f *pflag.Flag) {
		if !nodeFlagNames()[f.Name] {
			return
		}
		_, inEnv := os.LookupEnv(EnvName(f.Name))
		if !f.Changed && !inEnv {
			return
		}
		g := givenFlag{name: f.Name, cmdline: f.Changed}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			g.values = sv.GetSlice()
		} else {
			g.values = []string{f.Value.String()}
		}
		out = append(out, g)
	})
	return out
}

// daemonArgs returns the command line of the daemon, with the node flags
// given to this command on its command line or by the environment (a
// repeated flag once per value), and the secrets, as CHIME_NAME=value,
// which spawnDaemon hands over through a pipe: not on a command line that
// every user sees, nor in the daemon's environment.
func daemonArgs(flags *pflag.FlagSet) (args, env []string) {
	args = []string{"cron", "start"}
	for _, g := range givenFlags(flags) {
		if secretFlags[g.name] {
			env = append(env, EnvName(g.name)+"="+strings.Join(g.values, ","))
			continue
		}
		args = append(args, g.args()...)
	}
	return args, env
}

// recordFlags returns what the state file keeps of a node's flags
// (DaemonState.Flags and SecretFlags).
func recordFlags(flags *pflag.FlagSet) (args, secrets []string) {
	args = []string{}
	for _, g := range givenFlags(flags) {
		if secretFlags[g.name] {
			secrets = append(secrets, g.name)
			continue
		}
		args = append(args, g.args()...)
	}
	return args, secrets
}

// restartArgs returns the command line and secrets (as daemonArgs) of the
// node that chime cron restart starts in place of the one whose state is st:
// st's flags, except those given again on restart's command line, then the
// node flags of restart (its command line, and its environment for the
// flags st does not have). A secret st was given must be given to restart
// too, on its command line or in its environment, since its value is not
// on disk: otherwise restartArgs fails, before anything is stopped.
func restartArgs(st DaemonState, flags *pflag.FlagSet) (args, env []string, err error) {
	args = []string{"cron", "start"}
	recorded := map[string]bool{}
	for _, a := range st.Flags {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		recorded[name] = true
		if !flags.Changed(name) {
			args = append(args, a)
		}
	}
	given := map[string]bool{}
	for _, g := range givenFlags(flags) {
		given[g.name] = strings.Join(g.values, "") != "" // CHIME_ADMIN_TOKEN= gives no token
		switch {
		case secretFlags[g.name]:
			env = append(env, EnvName(g.name)+"="+strings.Join(g.values, ","))
		case g.cmdline || !recorded[g.name]:
			args = append(args, g.args()...)
		}
	}
	for _, name := range st.SecretFlags {
		if !given[name] {
			return nil, nil, usageErrorf("the running node was started with --%s, whose value chime does not keep on disk: give it again (--%s or %s)",
				name, name, EnvName(name))
		}
	}
	return args, env, nil
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
