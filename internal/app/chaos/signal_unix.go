//go:build unix

package chaos

import (
	"os"
	"syscall"
)

// pauseSupported reports whether nodes can be paused (SIGSTOP).
const pauseSupported = true

func pauseProcess(p *os.Process) error  { return p.Signal(syscall.SIGSTOP) }
func resumeProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
func termProcess(p *os.Process) error   { return p.Signal(syscall.SIGTERM) }
