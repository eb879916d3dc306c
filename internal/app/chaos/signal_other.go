//go:build !unix

package chaos

import (
	"errors"
	"os"
)

const pauseSupported = false

var errNoPause = errors.New("chaos: pausing a process needs SIGSTOP (Unix)")

func pauseProcess(*os.Process) error  { return errNoPause }
func resumeProcess(*os.Process) error { return errNoPause }
func termProcess(p *os.Process) error { return p.Kill() }
