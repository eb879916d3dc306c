// Package builtin holds the handlers built into `chime serve`, which REST
// API timers can call with a "handler" action:
//
//   - cleanup_files deletes the regular files of a directory whose names
//     match a glob and that are older than a duration, and reports what it
//     removed. It is registered only with --cleanup-root, and works only
//     in directories that resolve inside one.
//   - send_email sends a plain-text email through the SMTP server of the
//     node's configuration (--smtp-host and friends).
//
// Each checks its args when a timer is created or updated (ValidateArgs),
// so that a bad timer is refused with a clear error instead of failing at
// every fire. The HTTP check of the seeds is the "http" action.
package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/chimehq/chime"
)

// Handler names.
const (
	CleanupFilesName = "cleanup_files"
	SendEmailName    = "send_email"
)

// Register registers the built-in handlers on n: send_email with smtp, and
// cleanup_files only with cleanupRoots (--cleanup-root), the directories
// it may work in; without them a timer that uses it is refused as one of
// an unknown handler.
func Register(n *chime.Node, smtp SMTPConfig, cleanupRoots ...string) error {
	n.Handle(SendEmailName, &SendEmail{Config: smtp})
	if len(cleanupRoots) > 0 {
		c, err := NewCleanupFiles(cleanupRoots)
		if err != nil {
			return err
		}
		n.Handle(CleanupFilesName, c)
	}
	return nil
}

// decodeStrict decodes args into v, refusing unknown fields, so that a typo
// in an arg name is an error at creation rather than a silent default.
func decodeStrict(args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		return fmt.Errorf("args are required")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("args: %v", err)
	}
	return nil
}
