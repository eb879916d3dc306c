package api

import (
	"context"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
)

// Store is what a Server needs of the store, by the routes that use it
// (store.Store implements it).
type Store interface {
	TimerStore
	RunStore
	SecurityStore
}

// TimerStore is what the timer routes need of the store: the timers, the
// graph of those that run after others, and what the save path writes
// (timers.Store).
type TimerStore interface {
	timers.Store
	ListTimers(ctx context.Context, f store.TimerFilter) (timers []*model.Timer, next string, err error)
	DeleteTimer(ctx context.Context, id string) error
	Downstreams(ctx context.Context, id string) ([]model.Edge, error)
	DetachDependents(ctx context.Context, id string) ([]string, error)
	CountTimers(ctx context.Context, f store.TimerFilter) (store.TimerCounts, error)
}

// RunStore is what the run and stats routes need of the store (GetTimer:
// a run's app is its timer's).
type RunStore interface {
	GetTimer(ctx context.Context, id string) (*model.Timer, error)
	GetRun(ctx context.Context, id string) (*model.Run, error)
	RunAttempts(ctx context.Context, runID string) ([]model.Attempt, error)
	RunCounts(ctx context.Context, f store.RunFilter) (map[model.RunStatus]int64, error)
	ListRuns(ctx context.Context, f store.RunFilter) (runs []*model.Run, next string, err error)
	FireShards(ctx context.Context, fireID string) ([]*model.Run, error)
	RunNotifications(ctx context.Context, runID string) ([]*model.Notification, error)
	Stats(ctx context.Context) (store.Stats, error)
	StatsMinutes(ctx context.Context, since time.Time) ([]store.StatsMinute, error)
}

// SecurityStore is what the token, audit and app routes, and the
// authentication of every request, need of the store.
type SecurityStore interface {
	CreateToken(ctx context.Context, t *model.Token) error
	TokenByHash(ctx context.Context, hash string) (*model.Token, error)
	ListTokens(ctx context.Context) ([]*model.Token, error)
	DeleteToken(ctx context.Context, id string) error
	TouchToken(ctx context.Context, id string, at time.Time) error
	HasTokens(ctx context.Context) (bool, error)
	AppendAudit(ctx context.Context, e *model.AuditEntry) error
	ListAudit(ctx context.Context, f store.AuditFilter) ([]*model.AuditEntry, string, error)
	EnsureSigningSecret(ctx context.Context, app string, secret string, now time.Time) (bool, error)
	RotateSigningSecret(ctx context.Context, app string, secret string, now time.Time, oldUntil time.Time) (*model.SigningSecret, error)
	ActiveSigningSecrets(ctx context.Context, app string, now time.Time) ([]*model.SigningSecret, error)
	PutAppSecret(ctx context.Context, s *model.AppSecret) error
	AppSecrets(ctx context.Context, app string) ([]*model.AppSecret, error)
	DeleteAppSecret(ctx context.Context, app string, name string) error
	AppNotify(ctx context.Context, app string) ([]model.NotifyRule, error)
	SetAppNotify(ctx context.Context, app string, rules []model.NotifyRule, now time.Time) error
}
