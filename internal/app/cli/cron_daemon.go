package cli

// The cron daemon commands: chime cron start [--daemon], stop, restart,
// state and list. A node started by `chime cron start` keeps three files in
// its data dir:
//
//	chime.pid    the process id, while it runs
//	chime.state  JSON: pid, API address, node id, start time, and the
//	             flags and working directory it was started with, which
//	             chime cron restart starts the next node with
//	chime.log    the log of a node started with --daemon
//
// stop, state and list find the node through them (--data-dir, or
// CHIME_DATA_DIR), and state and list ask the node's REST API at the
// recorded address.
//
// Where to start reading:
//
//	cron_daemon.go  this overview, the file names and the state file
//	cron_start.go   cron start: the node in the foreground, with its files
//	cron_reexec.go  cron start --daemon: this program again, detached;
//	                the flags a restart starts the next node with
//	cron_files.go   reading the pid and state files; is the node alive
//	cron_stop.go    cron stop and cron restart
//	cron_state.go   cron state and cron list, over the node's REST API
//
// cron_next.go (chime cron next) reads schedules and needs no node.

import (
	"time"
)

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
	// Flags are the node flags the node was started with, as
	// --name=value (a repeated flag once per value): those given on its
	// command line and those set by its CHIME_ environment. A --config
	// file is named, not expanded. Secrets are left out (see SecretFlags).
	// Nil in the state of a node of a chime that did not keep them.
	Flags []string `json:"flags"`
	// SecretFlags names the secret flags (admin-token, smtp-password,
	// secret-key) the node was given, whose values are not kept on disk.
	SecretFlags []string `json:"secret_flags,omitempty"`
	// Dir is the node's working directory, against which relative paths
	// in Flags resolve.
	Dir string `json:"dir,omitempty"`
}
