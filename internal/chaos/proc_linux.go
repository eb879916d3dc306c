//go:build linux

package chaos

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr makes a node die with the chaos process, so that an
// interrupted run leaves no node behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// socketInode returns the inode of the TCP socket (this network namespace)
// whose local port is lport and remote port rport: the client end of a
// loopback connection to the receiver. 0: not found.
func socketInode(lport, rport int) (uint64, error) {
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		ino, err := scanSockets(f, lport, rport)
		if err != nil || ino != 0 {
			return ino, err
		}
	}
	return 0, nil
}

func scanSockets(path string, lport, rport int) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("sockets: %w", err)
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", lport)
	wantRemote := fmt.Sprintf(":%04X", rport)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || !strings.HasSuffix(fields[1], want) || !strings.HasSuffix(fields[2], wantRemote) {
			continue
		}
		ino, err := strconv.ParseUint(fields[9], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("sockets: %s: inode %q: %w", path, fields[9], err)
		}
		return ino, nil
	}
	return 0, sc.Err()
}

// ownsSocket reports whether process pid has the socket inode open.
func ownsSocket(pid int, inode uint64) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == want {
			return true
		}
	}
	return false
}
