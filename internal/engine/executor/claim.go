package executor

// This file: claiming due runs (the exactly-once guard) and sizing the
// claim's lease from the observed lag.

import (
	"context"
	"fmt"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// Claim claims the runs of entries for this node and returns those it won,
// with their timers. Runs that another node claimed, or that were cancelled
// or deleted, are left out: that is not an error. The claim's lease ends
// ClaimLease after the batch's latest instant (or after now, for late runs).
func (e *Executor) Claim(ctx context.Context, entries []index.Entry) ([]store.ClaimedRun, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	if e.cfg.MayClaim != nil {
		if err := e.cfg.MayClaim(); err != nil {
			return nil, fmt.Errorf("claim %d runs: %w", len(entries), err)
		}
	}
	e.mu.Lock()
	closing := e.closing
	e.mu.Unlock()
	if closing {
		return nil, fmt.Errorf("claim %d runs: %w", len(entries), ErrShutdown)
	}
	sent, now := e.cfg.Local.Now(), e.cfg.Clock.Now()
	// One DueBy for the batch (its latest instant), so that the store
	// claims the batch in one statement. A stale entry still cannot claim
	// a run rescheduled past the batch; one rescheduled within it starts at
	// its own instant, which the claim returns.
	var dueBy time.Time
	for _, en := range entries {
		if en.DueAt.After(dueBy) {
			dueBy = en.DueAt
		}
	}
	dueBy = dueBy.Add(time.Millisecond)
	lease := e.claimLease()
	leaseUntil := now.Add(lease)
	if dueBy.After(now) {
		leaseUntil = dueBy.Add(lease)
	}
	claims := make([]store.Claim, len(entries))
	for i, en := range entries {
		claims[i] = store.Claim{RunID: en.RunID, Node: e.cfg.NodeID, LeaseUntil: leaseUntil, Now: now, DueBy: dueBy}
	}
	won, err := e.cfg.Store.ClaimRuns(ctx, claims)
	e.observe(e.cfg.Local.Now().Sub(sent))
	if err != nil {
		return nil, fmt.Errorf("claim %d runs: %w", len(entries), err)
	}
	// The lease runs from when the claim was sent, by this node's clock.
	deadline := sent.Add(e.keep.stopWithin(leaseUntil.Sub(now)))
	e.mu.Lock()
	for _, cr := range won {
		e.inflight[leaseOf(cr.Run)] = &attempt{run: cr.Run, deadline: deadline}
	}
	e.mu.Unlock()
	if m := e.cfg.Metrics; m != nil {
		m.Claims.WithLabelValues("won").Add(float64(len(won)))
		m.Claims.WithLabelValues("lost").Add(float64(len(entries) - len(won)))
	}
	return e.route.handOffAhead(won), nil
}

func leaseOf(r *model.Run) store.Lease { return store.Lease{RunID: r.ID, Attempt: r.Attempt} }

// observe feeds a store answer time or an action's start lag into the
// decaying peak that lengthens claim leases.
func (e *Executor) observe(d time.Duration) {
	for {
		cur := e.lag.Load()
		next := cur - cur/16 + int64(d)/16
		if int64(d) > cur {
			next = int64(d)
		}
		if e.lag.CompareAndSwap(cur, next) {
			return
		}
	}
}

// claimLease is how long after its instant a claim lasts: ClaimLease, or
// more while the store is slow or the pool full, enough for the action to
// start and its lease to be extended (three times the recent peak lag,
// plus PromoteAfter), but never more than Lease. A node that holds many
// attempts (a tenth of its pool) claims with the full Lease: under such a
// load its extensions queue behind its own claims and results, and a short
// claim would stop actions that are only slow.
func (e *Executor) claimLease() time.Duration {
	e.mu.Lock()
	n := len(e.inflight)
	e.mu.Unlock()
	if n >= e.cfg.PoolSize/10 {
		return e.cfg.Lease
	}
	need := 3*time.Duration(e.lag.Load()) + PromoteAfter + e.cfg.Margin
	return min(max(e.cfg.ClaimLease, need), e.cfg.Lease)
}
