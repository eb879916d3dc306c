package servers

import (
	"os"
	"os/exec"
	"syscall"
)

// startLogged starts cmd, the server what, with its output appended to the
// file logPath, and kills it when t ends.
func startLogged(t TB, cmd *exec.Cmd, logPath, what string) {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", what, err)
	}
	t.Cleanup(func() {
		kill(cmd)
		logf.Close()
	})
}

// kill sends SIGKILL to cmd's process and waits for it to exit.
func kill(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}
