package metrics

// This file: the store's calls, timed and counted (chime_store_duration_seconds,
// chime_store_errors_total).

import (
	"context"
	"errors"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// InstrumentStore returns s with the calls that the node makes all the
// time timed in m.StoreDuration and, when they fail, counted in
// m.StoreErrors, both labelled by the method's name (op): the claims,
// results and leases of the fire path, planning and the reads of due
// runs, the sweeper's and the fleet's passes, the heartbeat and the node
// list, the store's clock, saves, the token lookup of each API request,
// and Ping. The store's other methods (the API's reads and the rarer
// writes) pass through the embedded store untimed.
//
// An answer that is part of the store's contract is not a failure: errors
// wrapping model.ErrNotFound, model.ErrConflict or model.ErrNotClaimed (a
// lost race, a fenced write), and calls whose context was cancelled. With
// a nil m it returns s.
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

func (s *instrumented) ClaimRuns(ctx context.Context, claims []store.Claim) (a []store.ClaimedRun, err error) {
	defer s.observe("ClaimRuns", time.Now(), &err)
	return s.Store.ClaimRuns(ctx, claims)
}

func (s *instrumented) FinishRuns(ctx context.Context, rs []model.Result) (a []bool, made []*model.Run, err error) {
	defer s.observe("FinishRuns", time.Now(), &err)
	return s.Store.FinishRuns(ctx, rs)
}

func (s *instrumented) ExtendLeases(ctx context.Context, node string, leases []store.Lease, until time.Time) (a []store.Lease, err error) {
	defer s.observe("ExtendLeases", time.Now(), &err)
	return s.Store.ExtendLeases(ctx, node, leases, until)
}

func (s *instrumented) Release(ctx context.Context, r *model.Run, dueAt time.Time) (err error) {
	defer s.observe("Release", time.Now(), &err)
	return s.Store.Release(ctx, r, dueAt)
}

func (s *instrumented) Requeue(ctx context.Context, r *model.Run, dueAt, now time.Time) (err error) {
	defer s.observe("Requeue", time.Now(), &err)
	return s.Store.Requeue(ctx, r, dueAt, now)
}

func (s *instrumented) SetRunStatus(ctx context.Context, runID string, from, to model.RunStatus, reason string) (made []*model.Run, err error) {
	defer s.observe("SetRunStatus", time.Now(), &err)
	return s.Store.SetRunStatus(ctx, runID, from, to, reason)
}

func (s *instrumented) TimersToPlan(ctx context.Context, horizon time.Time, after store.PlanCursor, limit int) (a []*model.Timer, err error) {
	defer s.observe("TimersToPlan", time.Now(), &err)
	return s.Store.TimersToPlan(ctx, horizon, after, limit)
}

func (s *instrumented) InsertPlanned(ctx context.Context, runs []*model.Run, versions map[string]int64) (a []*model.Run, err error) {
	defer s.observe("InsertPlanned", time.Now(), &err)
	return s.Store.InsertPlanned(ctx, runs, versions)
}

func (s *instrumented) InsertRuns(ctx context.Context, runs []*model.Run) (a []*model.Run, err error) {
	defer s.observe("InsertRuns", time.Now(), &err)
	return s.Store.InsertRuns(ctx, runs)
}

func (s *instrumented) SetPlannedUntil(ctx context.Context, plans map[string]store.Plan) (err error) {
	defer s.observe("SetPlannedUntil", time.Now(), &err)
	return s.Store.SetPlannedUntil(ctx, plans)
}

func (s *instrumented) DueRuns(ctx context.Context, from, to time.Time, buckets int, in ...int) (a []*model.Run, err error) {
	defer s.observe("DueRuns", time.Now(), &err)
	return s.Store.DueRuns(ctx, from, to, buckets, in...)
}

func (s *instrumented) PendingRuns(ctx context.Context, from, to time.Time, limit int) (a []*model.Run, err error) {
	defer s.observe("PendingRuns", time.Now(), &err)
	return s.Store.PendingRuns(ctx, from, to, limit)
}

func (s *instrumented) ExpiredLeases(ctx context.Context, since, now time.Time, limit int) (a []*model.Run, err error) {
	defer s.observe("ExpiredLeases", time.Now(), &err)
	return s.Store.ExpiredLeases(ctx, since, now, limit)
}

func (s *instrumented) DirectedRuns(ctx context.Context, node string, until time.Time, limit int) (a []*model.Run, err error) {
	defer s.observe("DirectedRuns", time.Now(), &err)
	return s.Store.DirectedRuns(ctx, node, until, limit)
}

func (s *instrumented) Handoff(ctx context.Context, r *model.Run, target string, dueAt time.Time) (err error) {
	defer s.observe("Handoff", time.Now(), &err)
	return s.Store.Handoff(ctx, r, target, dueAt)
}

func (s *instrumented) StartFire(ctx context.Context, fire *model.Run, shards []*model.Run) (err error) {
	defer s.observe("StartFire", time.Now(), &err)
	return s.Store.StartFire(ctx, fire, shards)
}

func (s *instrumented) FinishFires(ctx context.Context, now time.Time, limit int) (a []string, made []*model.Run, err error) {
	defer s.observe("FinishFires", time.Now(), &err)
	return s.Store.FinishFires(ctx, now, limit)
}

func (s *instrumented) Heartbeat(ctx context.Context, n model.Node) (err error) {
	defer s.observe("Heartbeat", time.Now(), &err)
	return s.Store.Heartbeat(ctx, n)
}

func (s *instrumented) ListNodes(ctx context.Context, seenSince time.Time) (a []model.Node, err error) {
	defer s.observe("ListNodes", time.Now(), &err)
	return s.Store.ListNodes(ctx, seenSince)
}

func (s *instrumented) Now(ctx context.Context) (a time.Time, err error) {
	defer s.observe("Now", time.Now(), &err)
	return s.Store.Now(ctx)
}

func (s *instrumented) SaveTimer(ctx context.Context, w store.TimerWrite) (a []*model.Run, err error) {
	defer s.observe("SaveTimer", time.Now(), &err)
	return s.Store.SaveTimer(ctx, w)
}

func (s *instrumented) TokenByHash(ctx context.Context, hash string) (a *model.Token, err error) {
	defer s.observe("TokenByHash", time.Now(), &err)
	return s.Store.TokenByHash(ctx, hash)
}

func (s *instrumented) Ping(ctx context.Context) (err error) {
	defer s.observe("Ping", time.Now(), &err)
	return s.Store.Ping(ctx)
}
