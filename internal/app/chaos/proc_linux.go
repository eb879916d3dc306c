//go:build linux

package chaos

import "syscall"

// sysProcAttr makes a node die with the chaos process, so that an
// interrupted run leaves no node behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
