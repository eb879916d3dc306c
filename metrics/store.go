package metrics

// This file: the store's calls, timed and counted (chime_store_duration_seconds,
// chime_store_errors_total).

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// InstrumentStore returns s with every call of the store.Store interface
// timed in m.StoreDuration and, when it fails, counted in m.StoreErrors,
// both labelled by the method's name (op). An answer that is part of the
// interface's contract is not a failure: errors wrapping model.ErrNotFound,
// model.ErrConflict or model.ErrNotClaimed (a lost race, a fenced write),
// and calls whose context was cancelled. With a nil m it returns s.
//
// Methods added to store.Store later pass through the embedded store
// untimed until they are listed here; TestInstrumentStoreCoversStore
// fails until then.
func InstrumentStore(s store.Store, m *Metrics) store.Store {
	if m == nil || s == nil {
		return s
	}
	return &instrumented{Store: s, m: m}
}

type instrumented struct {
	store.Store
	m *Metrics
}

// IsStoreFailure reports whether err, returned by a store call, counts as
// a failure of the store in chime_store_errors_total.
func IsStoreFailure(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, model.ErrNotFound), errors.Is(err, model.ErrConflict), errors.Is(err, model.ErrNotClaimed),
		errors.Is(err, context.Canceled):
		return false
	}
	return true
}

func (s *instrumented) observe(op string, start time.Time, err *error) {
	s.m.StoreDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if IsStoreFailure(*err) {
		s.m.StoreErrors.WithLabelValues(op).Inc()
	}
}

func (s *instrumented) CreateTimer(ctx context.Context, t *model.Timer) (err error) {
	defer s.observe("CreateTimer", time.Now(), &err)
	return s.Store.CreateTimer(ctx, t)
}

func (s *instrumented) SaveTimer(ctx context.Context, w store.TimerWrite) (a []*model.Run, err error) {
	defer s.observe("SaveTimer", time.Now(), &err)
	return s.Store.SaveTimer(ctx, w)
}

func (s *instrumented) TimerHistories(ctx context.Context, after string, limit int) (a []store.TimerHistory, err error) {
	defer s.observe("TimerHistories", time.Now(), &err)
	return s.Store.TimerHistories(ctx, after, limit)
}

func (s *instrumented) PruneRuns(ctx context.Context, p store.RunPrune) (n int, err error) {
	defer s.observe("PruneRuns", time.Now(), &err)
	return s.Store.PruneRuns(ctx, p)
}

func (s *instrumented) PruneAudit(ctx context.Context, before time.Time, limit int) (n int, err error) {
	defer s.observe("PruneAudit", time.Now(), &err)
	return s.Store.PruneAudit(ctx, before, limit)
}

func (s *instrumented) GetTimer(ctx context.Context, id string) (a *model.Timer, err error) {
	defer s.observe("GetTimer", time.Now(), &err)
	return s.Store.GetTimer(ctx, id)
}

func (s *instrumented) GetTimerByName(ctx context.Context, app, name string) (a *model.Timer, err error) {
	defer s.observe("GetTimerByName", time.Now(), &err)
	return s.Store.GetTimerByName(ctx, app, name)
}

func (s *instrumented) UpdateTimer(ctx context.Context, t *model.Timer) (err error) {
	defer s.observe("UpdateTimer", time.Now(), &err)
	return s.Store.UpdateTimer(ctx, t)
}

func (s *instrumented) DeleteTimer(ctx context.Context, id string) (err error) {
	defer s.observe("DeleteTimer", time.Now(), &err)
	return s.Store.DeleteTimer(ctx, id)
}

func (s *instrumented) Downstreams(ctx context.Context, id string) (a []model.Edge, err error) {
	defer s.observe("Downstreams", time.Now(), &err)
	return s.Store.Downstreams(ctx, id)
}

func (s *instrumented) DetachDependents(ctx context.Context, id string) (a []string, err error) {
	defer s.observe("DetachDependents", time.Now(), &err)
	return s.Store.DetachDependents(ctx, id)
}

func (s *instrumented) ListTimers(ctx context.Context, f store.TimerFilter) (a []*model.Timer, b string, err error) {
	defer s.observe("ListTimers", time.Now(), &err)
	return s.Store.ListTimers(ctx, f)
}

func (s *instrumented) TimersToPlan(ctx context.Context, horizon time.Time, after store.PlanCursor, limit int) (a []*model.Timer, err error) {
	defer s.observe("TimersToPlan", time.Now(), &err)
	return s.Store.TimersToPlan(ctx, horizon, after, limit)
}

func (s *instrumented) SetPlannedUntil(ctx context.Context, plans map[string]store.Plan) (err error) {
	defer s.observe("SetPlannedUntil", time.Now(), &err)
	return s.Store.SetPlannedUntil(ctx, plans)
}

func (s *instrumented) InsertRuns(ctx context.Context, runs []*model.Run) (a []*model.Run, err error) {
	defer s.observe("InsertRuns", time.Now(), &err)
	return s.Store.InsertRuns(ctx, runs)
}

func (s *instrumented) InsertPlanned(ctx context.Context, runs []*model.Run, versions map[string]int64) (a []*model.Run, err error) {
	defer s.observe("InsertPlanned", time.Now(), &err)
	return s.Store.InsertPlanned(ctx, runs, versions)
}

func (s *instrumented) CancelPendingRuns(ctx context.Context, timerID string, from time.Time) (a []string, err error) {
	defer s.observe("CancelPendingRuns", time.Now(), &err)
	return s.Store.CancelPendingRuns(ctx, timerID, from)
}

func (s *instrumented) DeletePendingRuns(ctx context.Context, timerID string, from time.Time) (a []string, err error) {
	defer s.observe("DeletePendingRuns", time.Now(), &err)
	return s.Store.DeletePendingRuns(ctx, timerID, from)
}

func (s *instrumented) GetRun(ctx context.Context, id string) (a *model.Run, err error) {
	defer s.observe("GetRun", time.Now(), &err)
	return s.Store.GetRun(ctx, id)
}

func (s *instrumented) RunCounts(ctx context.Context, f store.RunFilter) (a map[model.RunStatus]int64, err error) {
	defer s.observe("RunCounts", time.Now(), &err)
	return s.Store.RunCounts(ctx, f)
}

func (s *instrumented) ListRuns(ctx context.Context, f store.RunFilter) (a []*model.Run, b string, err error) {
	defer s.observe("ListRuns", time.Now(), &err)
	return s.Store.ListRuns(ctx, f)
}

func (s *instrumented) PendingRuns(ctx context.Context, from, to time.Time, limit int) (a []*model.Run, err error) {
	defer s.observe("PendingRuns", time.Now(), &err)
	return s.Store.PendingRuns(ctx, from, to, limit)
}

func (s *instrumented) DueRuns(ctx context.Context, from, to time.Time, buckets int, in ...int) (a []*model.Run, err error) {
	defer s.observe("DueRuns", time.Now(), &err)
	return s.Store.DueRuns(ctx, from, to, buckets, in...)
}

func (s *instrumented) ClaimRuns(ctx context.Context, claims []store.Claim) (a []store.ClaimedRun, err error) {
	defer s.observe("ClaimRuns", time.Now(), &err)
	return s.Store.ClaimRuns(ctx, claims)
}

func (s *instrumented) FinishRun(ctx context.Context, r model.Result) (err error) {
	defer s.observe("FinishRun", time.Now(), &err)
	return s.Store.FinishRun(ctx, r)
}

func (s *instrumented) FinishRuns(ctx context.Context, rs []model.Result) (a []bool, err error) {
	defer s.observe("FinishRuns", time.Now(), &err)
	return s.Store.FinishRuns(ctx, rs)
}

func (s *instrumented) SetRunStatus(ctx context.Context, runID string, from, to model.RunStatus, reason string) (err error) {
	defer s.observe("SetRunStatus", time.Now(), &err)
	return s.Store.SetRunStatus(ctx, runID, from, to, reason)
}

func (s *instrumented) RescheduleRun(ctx context.Context, runID string, dueAt time.Time) (err error) {
	defer s.observe("RescheduleRun", time.Now(), &err)
	return s.Store.RescheduleRun(ctx, runID, dueAt)
}

func (s *instrumented) ExtendLeases(ctx context.Context, node string, leases []store.Lease, until time.Time) (a []store.Lease, err error) {
	defer s.observe("ExtendLeases", time.Now(), &err)
	return s.Store.ExtendLeases(ctx, node, leases, until)
}

func (s *instrumented) Release(ctx context.Context, r *model.Run, dueAt time.Time) (err error) {
	defer s.observe("Release", time.Now(), &err)
	return s.Store.Release(ctx, r, dueAt)
}

func (s *instrumented) CountFires(ctx context.Context, timerID string) (c store.FireCount, err error) {
	defer s.observe("CountFires", time.Now(), &err)
	return s.Store.CountFires(ctx, timerID)
}

func (s *instrumented) CountRuns(ctx context.Context, timerID string, statuses ...model.RunStatus) (a int, err error) {
	defer s.observe("CountRuns", time.Now(), &err)
	return s.Store.CountRuns(ctx, timerID, statuses...)
}

func (s *instrumented) ExpiredLeases(ctx context.Context, since, now time.Time, limit int) (a []*model.Run, err error) {
	defer s.observe("ExpiredLeases", time.Now(), &err)
	return s.Store.ExpiredLeases(ctx, since, now, limit)
}

func (s *instrumented) Requeue(ctx context.Context, r *model.Run, dueAt, now time.Time) (err error) {
	defer s.observe("Requeue", time.Now(), &err)
	return s.Store.Requeue(ctx, r, dueAt, now)
}

func (s *instrumented) RunningOn(ctx context.Context, node string, limit int) (a []*model.Run, err error) {
	defer s.observe("RunningOn", time.Now(), &err)
	return s.Store.RunningOn(ctx, node, limit)
}

func (s *instrumented) Now(ctx context.Context) (a time.Time, err error) {
	defer s.observe("Now", time.Now(), &err)
	return s.Store.Now(ctx)
}

func (s *instrumented) Heartbeat(ctx context.Context, n model.Node) (err error) {
	defer s.observe("Heartbeat", time.Now(), &err)
	return s.Store.Heartbeat(ctx, n)
}

func (s *instrumented) ListNodes(ctx context.Context, seenSince time.Time) (a []model.Node, err error) {
	defer s.observe("ListNodes", time.Now(), &err)
	return s.Store.ListNodes(ctx, seenSince)
}

func (s *instrumented) DeleteNode(ctx context.Context, id string) (err error) {
	defer s.observe("DeleteNode", time.Now(), &err)
	return s.Store.DeleteNode(ctx, id)
}

func (s *instrumented) Stats(ctx context.Context) (a store.Stats, err error) {
	defer s.observe("Stats", time.Now(), &err)
	return s.Store.Stats(ctx)
}

func (s *instrumented) Ping(ctx context.Context) (err error) {
	defer s.observe("Ping", time.Now(), &err)
	return s.Store.Ping(ctx)
}

func (s *instrumented) CreateToken(ctx context.Context, t *model.Token) (err error) {
	defer s.observe("CreateToken", time.Now(), &err)
	return s.Store.CreateToken(ctx, t)
}

func (s *instrumented) TokenByHash(ctx context.Context, hash string) (a *model.Token, err error) {
	defer s.observe("TokenByHash", time.Now(), &err)
	return s.Store.TokenByHash(ctx, hash)
}

func (s *instrumented) ListTokens(ctx context.Context) (a []*model.Token, err error) {
	defer s.observe("ListTokens", time.Now(), &err)
	return s.Store.ListTokens(ctx)
}

func (s *instrumented) DeleteToken(ctx context.Context, id string) (err error) {
	defer s.observe("DeleteToken", time.Now(), &err)
	return s.Store.DeleteToken(ctx, id)
}

func (s *instrumented) TouchToken(ctx context.Context, id string, at time.Time) (err error) {
	defer s.observe("TouchToken", time.Now(), &err)
	return s.Store.TouchToken(ctx, id, at)
}

func (s *instrumented) HasTokens(ctx context.Context) (a bool, err error) {
	defer s.observe("HasTokens", time.Now(), &err)
	return s.Store.HasTokens(ctx)
}

func (s *instrumented) AppendAudit(ctx context.Context, e *model.AuditEntry) (err error) {
	defer s.observe("AppendAudit", time.Now(), &err)
	return s.Store.AppendAudit(ctx, e)
}

func (s *instrumented) ListAudit(ctx context.Context, f store.AuditFilter) (a []*model.AuditEntry, b string, err error) {
	defer s.observe("ListAudit", time.Now(), &err)
	return s.Store.ListAudit(ctx, f)
}

func (s *instrumented) EnsureSigningSecret(ctx context.Context, app, secret string, now time.Time) (a bool, err error) {
	defer s.observe("EnsureSigningSecret", time.Now(), &err)
	return s.Store.EnsureSigningSecret(ctx, app, secret, now)
}

func (s *instrumented) RotateSigningSecret(ctx context.Context, app, secret string, now, oldUntil time.Time) (a *model.SigningSecret, err error) {
	defer s.observe("RotateSigningSecret", time.Now(), &err)
	return s.Store.RotateSigningSecret(ctx, app, secret, now, oldUntil)
}

func (s *instrumented) ActiveSigningSecrets(ctx context.Context, app string, now time.Time) (a []*model.SigningSecret, err error) {
	defer s.observe("ActiveSigningSecrets", time.Now(), &err)
	return s.Store.ActiveSigningSecrets(ctx, app, now)
}

func (s *instrumented) ClaimNotifyEvents(ctx context.Context, now, until time.Time, limit int) (a []model.NotifyEvent, err error) {
	defer s.observe("ClaimNotifyEvents", time.Now(), &err)
	return s.Store.ClaimNotifyEvents(ctx, now, until, limit)
}

func (s *instrumented) ExpandNotifyEvent(ctx context.Context, ev model.NotifyEvent, ns []*model.Notification) (err error) {
	defer s.observe("ExpandNotifyEvent", time.Now(), &err)
	return s.Store.ExpandNotifyEvent(ctx, ev, ns)
}

func (s *instrumented) DueNotifications(ctx context.Context, now, until time.Time, limit int) (a []*model.Notification, err error) {
	defer s.observe("DueNotifications", time.Now(), &err)
	return s.Store.DueNotifications(ctx, now, until, limit)
}

func (s *instrumented) RecordNotification(ctx context.Context, n *model.Notification, next time.Time) (err error) {
	defer s.observe("RecordNotification", time.Now(), &err)
	return s.Store.RecordNotification(ctx, n, next)
}

func (s *instrumented) RunNotifications(ctx context.Context, runID string) (a []*model.Notification, err error) {
	defer s.observe("RunNotifications", time.Now(), &err)
	return s.Store.RunNotifications(ctx, runID)
}

func (s *instrumented) AppNotify(ctx context.Context, app string) (a []model.NotifyRule, err error) {
	defer s.observe("AppNotify", time.Now(), &err)
	return s.Store.AppNotify(ctx, app)
}

func (s *instrumented) SetAppNotify(ctx context.Context, app string, rules []model.NotifyRule, now time.Time) (err error) {
	defer s.observe("SetAppNotify", time.Now(), &err)
	return s.Store.SetAppNotify(ctx, app, rules, now)
}

func (s *instrumented) RunsScheduled(ctx context.Context, f store.PeriodFilter) (a []*model.Run, b string, err error) {
	defer s.observe("RunsScheduled", time.Now(), &err)
	return s.Store.RunsScheduled(ctx, f)
}

func (s *instrumented) Backup(ctx context.Context, base string) (a string, err error) {
	defer s.observe("Backup", time.Now(), &err)
	return s.Store.Backup(ctx, base)
}

func (s *instrumented) BackupIn(ctx context.Context, root *os.Root, base string) (a string, err error) {
	defer s.observe("BackupIn", time.Now(), &err)
	return s.Store.BackupIn(ctx, root, base)
}

func (s *instrumented) Handoff(ctx context.Context, r *model.Run, target string, dueAt time.Time) (err error) {
	defer s.observe("Handoff", time.Now(), &err)
	return s.Store.Handoff(ctx, r, target, dueAt)
}

func (s *instrumented) DirectedRuns(ctx context.Context, node string, until time.Time, limit int) (a []*model.Run, err error) {
	defer s.observe("DirectedRuns", time.Now(), &err)
	return s.Store.DirectedRuns(ctx, node, until, limit)
}

func (s *instrumented) UntargetRuns(ctx context.Context, live []string, limit int) (a []*model.Run, err error) {
	defer s.observe("UntargetRuns", time.Now(), &err)
	return s.Store.UntargetRuns(ctx, live, limit)
}

func (s *instrumented) StartFire(ctx context.Context, fire *model.Run, shards []*model.Run) (err error) {
	defer s.observe("StartFire", time.Now(), &err)
	return s.Store.StartFire(ctx, fire, shards)
}

func (s *instrumented) FinishFires(ctx context.Context, now time.Time, limit int) (a []string, err error) {
	defer s.observe("FinishFires", time.Now(), &err)
	return s.Store.FinishFires(ctx, now, limit)
}

func (s *instrumented) FireShards(ctx context.Context, fireID string) (a []*model.Run, err error) {
	defer s.observe("FireShards", time.Now(), &err)
	return s.Store.FireShards(ctx, fireID)
}

func (s *instrumented) PutStatsMinutes(ctx context.Context, rows []store.StatsMinute) (err error) {
	defer s.observe("PutStatsMinutes", time.Now(), &err)
	return s.Store.PutStatsMinutes(ctx, rows)
}

func (s *instrumented) StatsMinutes(ctx context.Context, since time.Time) (a []store.StatsMinute, err error) {
	defer s.observe("StatsMinutes", time.Now(), &err)
	return s.Store.StatsMinutes(ctx, since)
}

func (s *instrumented) PruneStatsMinutes(ctx context.Context, before time.Time) (a int, err error) {
	defer s.observe("PruneStatsMinutes", time.Now(), &err)
	return s.Store.PruneStatsMinutes(ctx, before)
}

func (s *instrumented) PutAppSecret(ctx context.Context, sec *model.AppSecret) (err error) {
	defer s.observe("PutAppSecret", time.Now(), &err)
	return s.Store.PutAppSecret(ctx, sec)
}

func (s *instrumented) AppSecrets(ctx context.Context, app string) (a []*model.AppSecret, err error) {
	defer s.observe("AppSecrets", time.Now(), &err)
	return s.Store.AppSecrets(ctx, app)
}

func (s *instrumented) DeleteAppSecret(ctx context.Context, app, name string) (err error) {
	defer s.observe("DeleteAppSecret", time.Now(), &err)
	return s.Store.DeleteAppSecret(ctx, app, name)
}
