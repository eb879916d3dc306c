//go:build !linux

package chaos

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }

// socketInode is not available: senders are known from X-Chime-Node only.
func socketInode(lport, rport int) (uint64, error) { return 0, nil }

func ownsSocket(pid int, inode uint64) bool { return false }
