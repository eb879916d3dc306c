package sim

// This file: every call of the store.Store interface passes through the
// node's faults (faults.go) before and after the shared store answers.
// TestStoreCoversInterface fails when store.Store gains a method that is
// not listed here.

import (
	"context"
	"os"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// faultStore is one node's view of the shared store.
type faultStore struct {
	store.Store
	n *nodeIO
}

func (s *faultStore) SaveTimer(ctx context.Context, w store.TimerWrite) (a []*model.Run, err error) {
	if err = s.n.before(ctx, "SaveTimer"); err != nil {
		return
	}
	defer s.n.after(ctx, "SaveTimer", &err)
	return s.Store.SaveTimer(ctx, w)
}

func (s *faultStore) TimerHistories(ctx context.Context, after string, limit int) (a []store.TimerHistory, err error) {
	if err = s.n.before(ctx, "TimerHistories"); err != nil {
		return
	}
	defer s.n.after(ctx, "TimerHistories", &err)
	return s.Store.TimerHistories(ctx, after, limit)
}

func (s *faultStore) PruneRuns(ctx context.Context, p store.RunPrune) (n int, err error) {
	if err = s.n.before(ctx, "PruneRuns"); err != nil {
		return
	}
	defer s.n.after(ctx, "PruneRuns", &err)
	return s.Store.PruneRuns(ctx, p)
}

func (s *faultStore) PruneAudit(ctx context.Context, before time.Time, limit int) (n int, err error) {
	if err = s.n.before(ctx, "PruneAudit"); err != nil {
		return
	}
	defer s.n.after(ctx, "PruneAudit", &err)
	return s.Store.PruneAudit(ctx, before, limit)
}

func (s *faultStore) GetTimer(ctx context.Context, id string) (a *model.Timer, err error) {
	if err = s.n.before(ctx, "GetTimer"); err != nil {
		return
	}
	defer s.n.after(ctx, "GetTimer", &err)
	return s.Store.GetTimer(ctx, id)
}

func (s *faultStore) GetTimerByName(ctx context.Context, app, name string) (a *model.Timer, err error) {
	if err = s.n.before(ctx, "GetTimerByName"); err != nil {
		return
	}
	defer s.n.after(ctx, "GetTimerByName", &err)
	return s.Store.GetTimerByName(ctx, app, name)
}

func (s *faultStore) UpdateTimer(ctx context.Context, t *model.Timer) (err error) {
	if err = s.n.before(ctx, "UpdateTimer"); err != nil {
		return
	}
	defer s.n.after(ctx, "UpdateTimer", &err)
	return s.Store.UpdateTimer(ctx, t)
}

func (s *faultStore) DeleteTimer(ctx context.Context, id string) (err error) {
	if err = s.n.before(ctx, "DeleteTimer"); err != nil {
		return
	}
	defer s.n.after(ctx, "DeleteTimer", &err)
	return s.Store.DeleteTimer(ctx, id)
}

func (s *faultStore) Downstreams(ctx context.Context, id string) (a []model.Edge, err error) {
	if err = s.n.before(ctx, "Downstreams"); err != nil {
		return
	}
	defer s.n.after(ctx, "Downstreams", &err)
	return s.Store.Downstreams(ctx, id)
}

func (s *faultStore) DetachDependents(ctx context.Context, id string) (a []string, err error) {
	if err = s.n.before(ctx, "DetachDependents"); err != nil {
		return
	}
	defer s.n.after(ctx, "DetachDependents", &err)
	return s.Store.DetachDependents(ctx, id)
}

func (s *faultStore) ListTimers(ctx context.Context, f store.TimerFilter) (a []*model.Timer, b string, err error) {
	if err = s.n.before(ctx, "ListTimers"); err != nil {
		return
	}
	defer s.n.after(ctx, "ListTimers", &err)
	return s.Store.ListTimers(ctx, f)
}

func (s *faultStore) TimersToPlan(ctx context.Context, horizon time.Time, after store.PlanCursor, limit int) (a []*model.Timer, err error) {
	if err = s.n.before(ctx, "TimersToPlan"); err != nil {
		return
	}
	defer s.n.after(ctx, "TimersToPlan", &err)
	return s.Store.TimersToPlan(ctx, horizon, after, limit)
}

func (s *faultStore) SetPlannedUntil(ctx context.Context, plans map[string]store.Plan) (err error) {
	if err = s.n.before(ctx, "SetPlannedUntil"); err != nil {
		return
	}
	defer s.n.after(ctx, "SetPlannedUntil", &err)
	return s.Store.SetPlannedUntil(ctx, plans)
}

func (s *faultStore) InsertRuns(ctx context.Context, runs []*model.Run) (a []*model.Run, err error) {
	if err = s.n.before(ctx, "InsertRuns"); err != nil {
		return
	}
	defer s.n.after(ctx, "InsertRuns", &err)
	return s.Store.InsertRuns(ctx, runs)
}

func (s *faultStore) InsertPlanned(ctx context.Context, runs []*model.Run, versions map[string]int64) (a []*model.Run, err error) {
	if err = s.n.before(ctx, "InsertPlanned"); err != nil {
		return
	}
	defer s.n.after(ctx, "InsertPlanned", &err)
	return s.Store.InsertPlanned(ctx, runs, versions)
}

func (s *faultStore) RunAttempts(ctx context.Context, id string) (a []model.Attempt, err error) {
	if err = s.n.before(ctx, "RunAttempts"); err != nil {
		return
	}
	defer s.n.after(ctx, "RunAttempts", &err)
	return s.Store.RunAttempts(ctx, id)
}

func (s *faultStore) InsertRerun(ctx context.Context, r *model.Run) (err error) {
	if err = s.n.before(ctx, "InsertRerun"); err != nil {
		return
	}
	defer s.n.after(ctx, "InsertRerun", &err)
	return s.Store.InsertRerun(ctx, r)
}

func (s *faultStore) GetRun(ctx context.Context, id string) (a *model.Run, err error) {
	if err = s.n.before(ctx, "GetRun"); err != nil {
		return
	}
	defer s.n.after(ctx, "GetRun", &err)
	return s.Store.GetRun(ctx, id)
}

func (s *faultStore) RunCounts(ctx context.Context, f store.RunFilter) (a map[model.RunStatus]int64, err error) {
	if err = s.n.before(ctx, "RunCounts"); err != nil {
		return
	}
	defer s.n.after(ctx, "RunCounts", &err)
	return s.Store.RunCounts(ctx, f)
}

func (s *faultStore) ListRuns(ctx context.Context, f store.RunFilter) (a []*model.Run, b string, err error) {
	if err = s.n.before(ctx, "ListRuns"); err != nil {
		return
	}
	defer s.n.after(ctx, "ListRuns", &err)
	return s.Store.ListRuns(ctx, f)
}

func (s *faultStore) PendingRuns(ctx context.Context, from, to time.Time, limit int) (a []*model.Run, err error) {
	if err = s.n.before(ctx, "PendingRuns"); err != nil {
		return
	}
	defer s.n.after(ctx, "PendingRuns", &err)
	return s.Store.PendingRuns(ctx, from, to, limit)
}

func (s *faultStore) DueRuns(ctx context.Context, from, to time.Time, buckets int, in ...int) (a []*model.Run, err error) {
	if err = s.n.before(ctx, "DueRuns"); err != nil {
		return
	}
	defer s.n.after(ctx, "DueRuns", &err)
	return s.Store.DueRuns(ctx, from, to, buckets, in...)
}

func (s *faultStore) ClaimRuns(ctx context.Context, claims []store.Claim) (a []store.ClaimedRun, err error) {
	if err = s.n.before(ctx, "ClaimRuns"); err != nil {
		return
	}
	defer s.n.after(ctx, "ClaimRuns", &err)
	return s.Store.ClaimRuns(ctx, claims)
}

func (s *faultStore) FinishRuns(ctx context.Context, rs []model.Result) (a []bool, made []*model.Run, err error) {
	if err = s.n.before(ctx, "FinishRuns"); err != nil {
		return
	}
	defer s.n.after(ctx, "FinishRuns", &err)
	return s.Store.FinishRuns(ctx, rs)
}

func (s *faultStore) SetRunStatus(ctx context.Context, runID string, from, to model.RunStatus, reason string) (made []*model.Run, err error) {
	if err = s.n.before(ctx, "SetRunStatus"); err != nil {
		return
	}
	defer s.n.after(ctx, "SetRunStatus", &err)
	return s.Store.SetRunStatus(ctx, runID, from, to, reason)
}

func (s *faultStore) RescheduleRun(ctx context.Context, runID string, dueAt time.Time) (err error) {
	if err = s.n.before(ctx, "RescheduleRun"); err != nil {
		return
	}
	defer s.n.after(ctx, "RescheduleRun", &err)
	return s.Store.RescheduleRun(ctx, runID, dueAt)
}

func (s *faultStore) ExtendLeases(ctx context.Context, node string, leases []store.Lease, until time.Time) (a []store.Lease, err error) {
	if err = s.n.before(ctx, "ExtendLeases"); err != nil {
		return
	}
	defer s.n.after(ctx, "ExtendLeases", &err)
	return s.Store.ExtendLeases(ctx, node, leases, until)
}

func (s *faultStore) Release(ctx context.Context, r *model.Run, dueAt time.Time) (err error) {
	if err = s.n.before(ctx, "Release"); err != nil {
		return
	}
	defer s.n.after(ctx, "Release", &err)
	return s.Store.Release(ctx, r, dueAt)
}

func (s *faultStore) CountRuns(ctx context.Context, timerID string, statuses ...model.RunStatus) (a int, err error) {
	if err = s.n.before(ctx, "CountRuns"); err != nil {
		return
	}
	defer s.n.after(ctx, "CountRuns", &err)
	return s.Store.CountRuns(ctx, timerID, statuses...)
}

func (s *faultStore) ExpiredLeases(ctx context.Context, since, now time.Time, limit int) (a []*model.Run, err error) {
	if err = s.n.before(ctx, "ExpiredLeases"); err != nil {
		return
	}
	defer s.n.after(ctx, "ExpiredLeases", &err)
	return s.Store.ExpiredLeases(ctx, since, now, limit)
}

func (s *faultStore) Requeue(ctx context.Context, r *model.Run, dueAt, now time.Time) (err error) {
	if err = s.n.before(ctx, "Requeue"); err != nil {
		return
	}
	defer s.n.after(ctx, "Requeue", &err)
	return s.Store.Requeue(ctx, r, dueAt, now)
}

func (s *faultStore) RunningOn(ctx context.Context, node string, limit int) (a []*model.Run, err error) {
	if err = s.n.before(ctx, "RunningOn"); err != nil {
		return
	}
	defer s.n.after(ctx, "RunningOn", &err)
	return s.Store.RunningOn(ctx, node, limit)
}

func (s *faultStore) Now(ctx context.Context) (a time.Time, err error) {
	if err = s.n.before(ctx, "Now"); err != nil {
		return
	}
	defer s.n.after(ctx, "Now", &err)
	return s.Store.Now(ctx)
}

func (s *faultStore) Heartbeat(ctx context.Context, n model.Node) (err error) {
	if err = s.n.before(ctx, "Heartbeat"); err != nil {
		return
	}
	defer s.n.after(ctx, "Heartbeat", &err)
	return s.Store.Heartbeat(ctx, n)
}

func (s *faultStore) ListNodes(ctx context.Context, seenSince time.Time) (a []model.Node, err error) {
	if err = s.n.before(ctx, "ListNodes"); err != nil {
		return
	}
	defer s.n.after(ctx, "ListNodes", &err)
	return s.Store.ListNodes(ctx, seenSince)
}

func (s *faultStore) DeleteNode(ctx context.Context, id string) (err error) {
	if err = s.n.before(ctx, "DeleteNode"); err != nil {
		return
	}
	defer s.n.after(ctx, "DeleteNode", &err)
	return s.Store.DeleteNode(ctx, id)
}

func (s *faultStore) Stats(ctx context.Context) (a store.Stats, err error) {
	if err = s.n.before(ctx, "Stats"); err != nil {
		return
	}
	defer s.n.after(ctx, "Stats", &err)
	return s.Store.Stats(ctx)
}

func (s *faultStore) CountTimers(ctx context.Context, f store.TimerFilter) (a store.TimerCounts, err error) {
	if err = s.n.before(ctx, "CountTimers"); err != nil {
		return
	}
	defer s.n.after(ctx, "CountTimers", &err)
	return s.Store.CountTimers(ctx, f)
}

func (s *faultStore) Ping(ctx context.Context) (err error) {
	if err = s.n.before(ctx, "Ping"); err != nil {
		return
	}
	defer s.n.after(ctx, "Ping", &err)
	return s.Store.Ping(ctx)
}

func (s *faultStore) CreateToken(ctx context.Context, t *model.Token) (err error) {
	if err = s.n.before(ctx, "CreateToken"); err != nil {
		return
	}
	defer s.n.after(ctx, "CreateToken", &err)
	return s.Store.CreateToken(ctx, t)
}

func (s *faultStore) TokenByHash(ctx context.Context, hash string) (a *model.Token, err error) {
	if err = s.n.before(ctx, "TokenByHash"); err != nil {
		return
	}
	defer s.n.after(ctx, "TokenByHash", &err)
	return s.Store.TokenByHash(ctx, hash)
}

func (s *faultStore) ListTokens(ctx context.Context) (a []*model.Token, err error) {
	if err = s.n.before(ctx, "ListTokens"); err != nil {
		return
	}
	defer s.n.after(ctx, "ListTokens", &err)
	return s.Store.ListTokens(ctx)
}

func (s *faultStore) DeleteToken(ctx context.Context, id string) (err error) {
	if err = s.n.before(ctx, "DeleteToken"); err != nil {
		return
	}
	defer s.n.after(ctx, "DeleteToken", &err)
	return s.Store.DeleteToken(ctx, id)
}

func (s *faultStore) HasTokens(ctx context.Context) (a bool, err error) {
	if err = s.n.before(ctx, "HasTokens"); err != nil {
		return
	}
	defer s.n.after(ctx, "HasTokens", &err)
	return s.Store.HasTokens(ctx)
}

func (s *faultStore) AppendAudit(ctx context.Context, e *model.AuditEntry) (err error) {
	if err = s.n.before(ctx, "AppendAudit"); err != nil {
		return
	}
	defer s.n.after(ctx, "AppendAudit", &err)
	return s.Store.AppendAudit(ctx, e)
}

func (s *faultStore) ListAudit(ctx context.Context, f store.AuditFilter) (a []*model.AuditEntry, b string, err error) {
	if err = s.n.before(ctx, "ListAudit"); err != nil {
		return
	}
	defer s.n.after(ctx, "ListAudit", &err)
	return s.Store.ListAudit(ctx, f)
}

func (s *faultStore) EnsureSigningSecret(ctx context.Context, app, secret string, now time.Time) (a bool, err error) {
	if err = s.n.before(ctx, "EnsureSigningSecret"); err != nil {
		return
	}
	defer s.n.after(ctx, "EnsureSigningSecret", &err)
	return s.Store.EnsureSigningSecret(ctx, app, secret, now)
}

func (s *faultStore) RotateSigningSecret(ctx context.Context, app, secret string, now, oldUntil time.Time) (a *model.SigningSecret, err error) {
	if err = s.n.before(ctx, "RotateSigningSecret"); err != nil {
		return
	}
	defer s.n.after(ctx, "RotateSigningSecret", &err)
	return s.Store.RotateSigningSecret(ctx, app, secret, now, oldUntil)
}

func (s *faultStore) ActiveSigningSecrets(ctx context.Context, app string, now time.Time) (a []*model.SigningSecret, err error) {
	if err = s.n.before(ctx, "ActiveSigningSecrets"); err != nil {
		return
	}
	defer s.n.after(ctx, "ActiveSigningSecrets", &err)
	return s.Store.ActiveSigningSecrets(ctx, app, now)
}

func (s *faultStore) ClaimNotifyEvents(ctx context.Context, now, until time.Time, limit int) (a []model.NotifyEvent, err error) {
	if err = s.n.before(ctx, "ClaimNotifyEvents"); err != nil {
		return
	}
	defer s.n.after(ctx, "ClaimNotifyEvents", &err)
	return s.Store.ClaimNotifyEvents(ctx, now, until, limit)
}

func (s *faultStore) ExpandNotifyEvent(ctx context.Context, ev model.NotifyEvent, ns []*model.Notification) (err error) {
	if err = s.n.before(ctx, "ExpandNotifyEvent"); err != nil {
		return
	}
	defer s.n.after(ctx, "ExpandNotifyEvent", &err)
	return s.Store.ExpandNotifyEvent(ctx, ev, ns)
}

func (s *faultStore) DueNotifications(ctx context.Context, now, until time.Time, limit int) (a []*model.Notification, err error) {
	if err = s.n.before(ctx, "DueNotifications"); err != nil {
		return
	}
	defer s.n.after(ctx, "DueNotifications", &err)
	return s.Store.DueNotifications(ctx, now, until, limit)
}

func (s *faultStore) RecordNotification(ctx context.Context, n *model.Notification, next time.Time) (err error) {
	if err = s.n.before(ctx, "RecordNotification"); err != nil {
		return
	}
	defer s.n.after(ctx, "RecordNotification", &err)
	return s.Store.RecordNotification(ctx, n, next)
}

func (s *faultStore) RunNotifications(ctx context.Context, runID string) (a []*model.Notification, err error) {
	if err = s.n.before(ctx, "RunNotifications"); err != nil {
		return
	}
	defer s.n.after(ctx, "RunNotifications", &err)
	return s.Store.RunNotifications(ctx, runID)
}

func (s *faultStore) AppNotify(ctx context.Context, app string) (a []model.NotifyRule, err error) {
	if err = s.n.before(ctx, "AppNotify"); err != nil {
		return
	}
	defer s.n.after(ctx, "AppNotify", &err)
	return s.Store.AppNotify(ctx, app)
}

func (s *faultStore) SetAppNotify(ctx context.Context, app string, rules []model.NotifyRule, now time.Time) (err error) {
	if err = s.n.before(ctx, "SetAppNotify"); err != nil {
		return
	}
	defer s.n.after(ctx, "SetAppNotify", &err)
	return s.Store.SetAppNotify(ctx, app, rules, now)
}

func (s *faultStore) RunsScheduled(ctx context.Context, f store.PeriodFilter) (a []*model.Run, b string, err error) {
	if err = s.n.before(ctx, "RunsScheduled"); err != nil {
		return
	}
	defer s.n.after(ctx, "RunsScheduled", &err)
	return s.Store.RunsScheduled(ctx, f)
}

func (s *faultStore) Handoff(ctx context.Context, r *model.Run, target string, dueAt time.Time) (err error) {
	if err = s.n.before(ctx, "Handoff"); err != nil {
		return
	}
	defer s.n.after(ctx, "Handoff", &err)
	return s.Store.Handoff(ctx, r, target, dueAt)
}

func (s *faultStore) DirectedRuns(ctx context.Context, node string, until time.Time, limit int) (a []*model.Run, err error) {
	if err = s.n.before(ctx, "DirectedRuns"); err != nil {
		return
	}
	defer s.n.after(ctx, "DirectedRuns", &err)
	return s.Store.DirectedRuns(ctx, node, until, limit)
}

func (s *faultStore) UntargetRuns(ctx context.Context, live []string, limit int) (a []*model.Run, err error) {
	if err = s.n.before(ctx, "UntargetRuns"); err != nil {
		return
	}
	defer s.n.after(ctx, "UntargetRuns", &err)
	return s.Store.UntargetRuns(ctx, live, limit)
}

func (s *faultStore) StartFire(ctx context.Context, fire *model.Run, shards []*model.Run) (err error) {
	if err = s.n.before(ctx, "StartFire"); err != nil {
		return
	}
	defer s.n.after(ctx, "StartFire", &err)
	return s.Store.StartFire(ctx, fire, shards)
}

func (s *faultStore) FinishFires(ctx context.Context, now time.Time, limit int) (a []string, made []*model.Run, err error) {
	if err = s.n.before(ctx, "FinishFires"); err != nil {
		return
	}
	defer s.n.after(ctx, "FinishFires", &err)
	return s.Store.FinishFires(ctx, now, limit)
}

func (s *faultStore) FireShards(ctx context.Context, fireID string) (a []*model.Run, err error) {
	if err = s.n.before(ctx, "FireShards"); err != nil {
		return
	}
	defer s.n.after(ctx, "FireShards", &err)
	return s.Store.FireShards(ctx, fireID)
}

func (s *faultStore) PutStatsMinutes(ctx context.Context, rows []store.StatsMinute) (err error) {
	if err = s.n.before(ctx, "PutStatsMinutes"); err != nil {
		return
	}
	defer s.n.after(ctx, "PutStatsMinutes", &err)
	return s.Store.PutStatsMinutes(ctx, rows)
}

func (s *faultStore) StatsMinutes(ctx context.Context, since time.Time) (a []store.StatsMinute, err error) {
	if err = s.n.before(ctx, "StatsMinutes"); err != nil {
		return
	}
	defer s.n.after(ctx, "StatsMinutes", &err)
	return s.Store.StatsMinutes(ctx, since)
}

func (s *faultStore) PruneStatsMinutes(ctx context.Context, before time.Time) (a int, err error) {
	if err = s.n.before(ctx, "PruneStatsMinutes"); err != nil {
		return
	}
	defer s.n.after(ctx, "PruneStatsMinutes", &err)
	return s.Store.PruneStatsMinutes(ctx, before)
}

func (s *faultStore) CountFires(ctx context.Context, timerID string) (a store.FireCount, err error) {
	if err = s.n.before(ctx, "CountFires"); err != nil {
		return
	}
	defer s.n.after(ctx, "CountFires", &err)
	return s.Store.CountFires(ctx, timerID)
}

func (s *faultStore) TouchToken(ctx context.Context, id string, at time.Time) (err error) {
	if err = s.n.before(ctx, "TouchToken"); err != nil {
		return
	}
	defer s.n.after(ctx, "TouchToken", &err)
	return s.Store.TouchToken(ctx, id, at)
}

func (s *faultStore) PutAppSecret(ctx context.Context, sec *model.AppSecret) (err error) {
	if err = s.n.before(ctx, "PutAppSecret"); err != nil {
		return
	}
	defer s.n.after(ctx, "PutAppSecret", &err)
	return s.Store.PutAppSecret(ctx, sec)
}

func (s *faultStore) AppSecrets(ctx context.Context, app string) (a []*model.AppSecret, err error) {
	if err = s.n.before(ctx, "AppSecrets"); err != nil {
		return
	}
	defer s.n.after(ctx, "AppSecrets", &err)
	return s.Store.AppSecrets(ctx, app)
}

func (s *faultStore) DeleteAppSecret(ctx context.Context, app, name string) (err error) {
	if err = s.n.before(ctx, "DeleteAppSecret"); err != nil {
		return
	}
	defer s.n.after(ctx, "DeleteAppSecret", &err)
	return s.Store.DeleteAppSecret(ctx, app, name)
}

func (s *faultStore) BackupIn(ctx context.Context, root *os.Root, base string) (a string, err error) {
	if err = s.n.before(ctx, "BackupIn"); err != nil {
		return
	}
	defer s.n.after(ctx, "BackupIn", &err)
	return s.Store.BackupIn(ctx, root, base)
}
