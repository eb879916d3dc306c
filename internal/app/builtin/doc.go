// Package builtin holds the handlers built into `chime serve`, which REST
// API timers can call with a "handler" action:
//
//   - cleanup_files deletes the regular files of a directory whose names
//     match a glob and that are older than a duration, and reports what it
//     removed. It is registered only with --cleanup-root, and works only
//     in directories that resolve inside one.
//   - send_email sends a plain-text email through the SMTP server of the
//     node's configuration (--smtp-host and friends).
//   - backup_database writes a consistent copy of chime's own store into a
//     directory inside an --output-root, keeping the newest few.
//   - generate_report summarises the runs of a period (fires, failures,
//     the slowest and most failing timers, fire delay percentiles) and
//     sends it to a signed webhook, by email or into a file inside an
//     --output-root.
//
// Each checks its args when a timer is created or updated (ValidateArgs),
// so that a bad timer is refused with a clear error instead of failing at
// every fire. The HTTP check of the seeds is the "http" action.
package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/nodeparts"
)

// Handler names.
const (
	CleanupFilesName   = "cleanup_files"
	SendEmailName      = "send_email"
	BackupDatabaseName = "backup_database"
	GenerateReportName = "generate_report"
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

// DataOptions configures backup_database and generate_report.
type DataOptions struct {
	// OutputRoots (--output-root) are the directories backup_database and
	// generate_report's file destination may write in; without any, their
	// timers that write files are refused.
	OutputRoots []string
	// SMTP sends generate_report's email destination.
	SMTP SMTPConfig
	// Egress is the policy of generate_report's webhook destination, as of
	// callbacks; nil means egress.Default().
	Egress *egress.Policy
}

// RegisterData registers backup_database and generate_report on n, over
// n's store. generate_report's webhooks are signed with the signing secrets
// of the timer's app, as callbacks are.
func RegisterData(n *chime.Node, o DataOptions) error {
	if err := checkRoots("--output-root", o.OutputRoots); err != nil {
		return err
	}
	parts := nodeparts.Of(n)
	st := parts.Store
	n.Handle(BackupDatabaseName, &BackupDatabase{Store: st, Roots: slices.Clone(o.OutputRoots)})
	hook := action.NewHTTPRunnerWith(action.HTTPOptions{Egress: o.Egress, Clock: parts.Engine.Clock(),
		Secrets: parts.Secrets})
	n.Handle(GenerateReportName, &GenerateReport{Store: st, SMTP: o.SMTP, Webhook: hook.Run, Roots: slices.Clone(o.OutputRoots)})
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
