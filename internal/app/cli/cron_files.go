package cli

// The pid and state files of a node started by chime cron start, and
// whether the process they name is alive.

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

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
