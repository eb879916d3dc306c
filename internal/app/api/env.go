package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/chimehq/chime/model"
)

// env is what the handlers of every resource share: the clock, the
// logger, the body limit and the audit log, with the helpers that decode
// bodies (decodeJSON, json.go), answer faults (serverError, storeError,
// api.go) and record changes (audit, auditEntry, auth.go). The Server and
// each resource type (timersAPI, actionsAPI, runsAPI, appsAPI,
// securityAPI, clusterAPI) hold the same *env.
type env struct {
	log     *slog.Logger
	now     func() time.Time
	maxBody int64 // of request bodies
	audits  auditLog
}

// auditLog is where audit entries go (SecurityStore has it).
type auditLog interface {
	AppendAudit(ctx context.Context, e *model.AuditEntry) error
}
