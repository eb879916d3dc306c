package executor

// This file: lazy claims — runs started without a claim write, fenced by
// the slice lock of their minute (docs/guarantees.md, "Lazy claims").
//
// A claim is a row write that exists so that no second node runs the same
// pending run. The slice owner is already the only node that dispatches a
// slice's runs while its lock holds, so with a LazyFence the executor
// skips that write for the runs it may: it reads them (Store.PeekRuns, no
// write), holds the attempt in memory with the lock's confirmed end as its
// deadline, and writes the result onto the still-pending row, fenced on
// the run being pending at the attempt before (model.Result.Lazy). An
// attempt that outlives PromoteAfter, or whose lock is about to end, is
// promoted: its claim is written after all (Store.PromoteRuns), and from
// then on it is an ordinary attempt with a lease. A node that takes a
// slice over fences the runs its previous holder may have started
// (Store.FenceSlice, scheduler), so that their next attempt carries a new
// attempt number and a stale lazy result fails its fence.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/chimehq/chime/clock"
	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// LazyFence says which runs this node may start on a lazy claim: the
// scheduler, which holds the slice locks.
type LazyFence interface {
	// LazyDeadline reports whether this node may start the run of
	// timerID due at dueAt without a claim write, and until when, by the
	// cluster's clock: the end of its slice's lock as last confirmed, less
	// a margin. False when the node does not hold the slice, hands it
	// over, or took it so recently that its previous holder may still
	// start runs of it.
	LazyDeadline(timerID string, dueAt time.Time) (time.Time, bool)
	// Fenced reports whether this node holds the slice of the run of
	// timerID due at dueAt, has fenced it since it took it, and the run is
	// due within the window after the taking in which the slice's runs
	// are claimed with a write: no node starts such a run lazily, so a
	// claim with a write cannot race a lazy start of it. The deadline is
	// LazyDeadline's: a run due after it waits for the lock's next
	// extension (the next holder of a lock that expires starts such runs
	// lazily).
	Fenced(timerID string, dueAt time.Time) (time.Time, bool)
}

// promoteSoon is how long before its lock's deadline a lazy attempt is
// promoted whatever its age: the lock is not being confirmed (Redis is
// slow or unreachable, or the node lost the slice).
const promoteSoon = 500 * time.Millisecond

// lazyKind reports whether run r of timer t is of the kind that a node
// may start on a lazy claim: a scheduled fire (not manual, not a shard,
// broadcast or placed run) of a timer whose overlap policy does not read
// the store's running runs. Its slice's owner starts it lazily when it
// performs the action itself (not misplaced). Another node may claim a
// run of another kind with a write: nobody starts it lazily.
func lazyKind(r *model.Run, t *model.Timer) bool {
	if t == nil || r.Manual || r.Shard != nil || r.FireID != "" || r.TargetNode != "" {
		return false
	}
	return (t.Policy.Overlap == "" || t.Policy.Overlap == model.OverlapAllow) && !t.Policy.Splits()
}

// lazyDeadline is LazyDeadline of r's slice on the Local clock, false when
// the node may not (or no longer) start r lazily.
func (e *Executor) lazyDeadline(r *model.Run, local time.Time) (time.Time, bool) {
	d, ok := e.cfg.Lazy.LazyDeadline(r.TimerID, r.DueAt)
	if !ok {
		return time.Time{}, false
	}
	return local.Add(d.Sub(e.cfg.Clock.Now())), true
}

// refreshLocked moves a lazy attempt's deadline to its lock's latest
// confirmed end. When the node may no longer start its run lazily (the
// slice was lost or handed over), a claim not started may not start at
// all, and a started attempt is promoted at the keeper's next round
// (orphan): until its deadline, the end of the lock as last confirmed,
// no other node performs the run, and after it the run is stopped
// unless its promotion held. e.mu must be held.
func (e *Executor) refreshLocked(a *attempt, now time.Time) {
	if !a.lazy {
		return
	}
	d, ok := e.lazyDeadline(a.run, now)
	if ok && !a.lazyCap.IsZero() && d.After(a.lazyCap) {
		d = a.lazyCap
	}
	switch {
	case !ok && a.state == claimed:
		if now.Before(a.deadline) {
			a.deadline = now
		}
	case !ok:
		a.orphan = true
	case d.After(a.deadline):
		a.deadline = d
	}
}

// claimLazy takes the runs of entries that this node may start lazily:
// it reads them (no write) and holds those still pending, eligible and
// not in flight here already. It returns them, and the entries to claim
// the usual way: runs of slices this node holds and fenced, due within
// the window after it took them (LazyFence.Fenced), and runs of a kind
// that no node starts lazily (lazyKind). A run of that kind in a slice
// this node does not hold, or no longer holds, is neither: its slice's
// owner may be performing it lazily, which a claim with a write does not
// see, and that owner is the one to start it. Nor are runs it read that
// were no longer pending: another node has them, or they are gone, as a
// claim that found them not pending would say.
func (e *Executor) claimLazy(ctx context.Context, entries []index.Entry, dueBy time.Time) (won []store.ClaimedRun, rest, again []index.Entry, err error) {
	byID := make(map[string]index.Entry, len(entries))
	var ids []string
	for _, en := range entries {
		if _, ok := e.cfg.Lazy.LazyDeadline(en.TimerID, en.DueAt); !ok {
			if d, fenced := e.cfg.Lazy.Fenced(en.TimerID, en.DueAt); fenced {
				if en.DueAt.After(d) {
					again = append(again, en)
				} else {
					rest = append(rest, en)
				}
				continue
			}
		}
		// Held lazily, or not held: read to know which.
		byID[en.RunID] = en
		ids = append(ids, en.RunID)
	}
	if len(ids) == 0 {
		return nil, rest, again, nil
	}
	e.mu.Lock()
	since := e.peeks.begin()
	e.mu.Unlock()
	peeked, err := e.cfg.Store.PeekRuns(ctx, e.cfg.NodeID, ids, dueBy)
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.peeks.end(since)
	if err != nil {
		// As a claim that failed: the trigger queues the batch again.
		return nil, nil, nil, fmt.Errorf("read %d runs for lazy claims: %w", len(ids), err)
	}
	now := e.cfg.Clock.Now()
	local := e.cfg.Local.Now()
	for _, cr := range peeked {
		r := cr.Run
		en, asked := byID[r.ID]
		if !asked {
			continue
		}
		deadline, ok := e.lazyDeadline(r, local)
		switch {
		case !lazyKind(r, cr.Timer):
			rest = append(rest, en)
			continue
		case !ok:
			// Not (or no longer) this node's slice: its owner's.
			continue
		case e.misplaced(r, cr.Timer):
			// Held, but for another node's handler: claimed with a
			// write while the lock is confirmed, and due before its
			// deadline (the next holder of a lock that expires starts
			// later runs lazily, and this claim may land late), as a
			// lazy start would be; otherwise back to the index (again)
			// until it is, or until the slice is dropped.
			if due := local.Add(r.DueAt.Sub(now)); local.Before(deadline) && !due.After(deadline) {
				rest = append(rest, en)
			} else {
				again = append(again, en)
			}
			continue
		}
		held := *r
		held.Status, held.Node, held.Attempt = model.RunRunning, e.cfg.NodeID, r.Attempt+1
		held.StartedAt, held.LeaseUntil = &now, nil
		l := leaseOf(&held)
		if e.inflight[l] != nil || e.peeks.forgotSince(l, since) {
			// In flight here, or ended while the read was on its way: the
			// run reads pending until its result is recorded, and a
			// recheck (or a store-backed index) found it again.
			continue
		}
		e.inflight[l] = &attempt{run: &held, deadline: deadline, lazy: true, lazyClaim: true}
		won = append(won, store.ClaimedRun{Run: &held, Timer: cr.Timer})
	}
	return won, rest, again, nil
}

// promoteLazy writes the claims of the lazy attempts for which want is
// true (all when nil) and that are past their start: running, finished
// with their result waiting, or submitted and waiting for a worker. A
// promoted attempt gets the full lease; one whose run is no longer
// pending at the attempt before is stopped (the slice was taken over).
// Lazy attempts not submitted yet are left alone: their start checks the
// fence again. When the store does not answer, the attempts stay lazy,
// to be promoted at a later round or stopped at their deadline.
func (e *Executor) promoteLazy(ctx context.Context, want func(a *attempt) bool) error {
	e.promoteMu.Lock()
	defer e.promoteMu.Unlock()
	e.mu.Lock()
	var leases []store.Lease
	for l, a := range e.inflight {
		if !a.lazy || a.state == stopped || a.state == claimed && !a.submitted {
			continue
		}
		if want == nil || want(a) {
			leases = append(leases, l)
		}
	}
	e.mu.Unlock()
	if len(leases) == 0 {
		return nil
	}
	sent, now := e.cfg.Local.Now(), e.cfg.Clock.Now()
	lost, err := e.cfg.Store.PromoteRuns(ctx, e.cfg.NodeID, leases, now, now.Add(e.cfg.Lease))
	e.observe(e.cfg.Local.Now().Sub(sent))
	if err != nil {
		e.cfg.Logger.Warn("promote lazy claims", "attempts", len(leases), "err", err)
		return fmt.Errorf("promote %d lazy claims: %w", len(leases), err)
	}
	gone := leaseSet(lost)
	deadline := sent.Add(e.stopWithin(e.cfg.Lease))
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range leases {
		a := e.inflight[l]
		if a == nil {
			continue
		}
		if gone[l] {
			started := a.cancel != nil
			e.stopLocked(l, a, "the run is no longer this attempt's (its slice was taken over, or it finished)", "taken_over")
			if started {
				a.lazy = false // fenced already by whoever took it: nothing to write
			}
			continue
		}
		a.lazy = false
		if deadline.After(a.deadline) {
			a.deadline = deadline
		}
	}
	if m := e.cfg.Metrics; m != nil {
		m.Claims.WithLabelValues("promoted").Add(float64(len(leases) - len(lost)))
	}
	e.cfg.Logger.Debug("lazy claims promoted", "attempts", len(leases), "lost", len(lost), "took", e.cfg.Local.Now().Sub(sent))
	return nil
}

// PromoteLazy writes the claims of the lazy attempts of the runs for which
// want is true (all when nil) that have started (promoteLazy). The
// scheduler calls it before it releases slice locks (shutdown, standby,
// handover), so that the next holder's fence does not take from this node
// the runs it is performing. It returns nil when every such attempt was
// promoted, or had no run to promote any more (it finished, or its timer
// was changed), and every claim in flight when it began has ended, which
// it waits for up to ClaimsWait (ErrClaiming otherwise): the caller may
// then release the slices clean.
//
// Why the claims in flight: a claim with a write decided while the slice
// was held (a run of its fenced window) may be written after the release.
// A next holder that took the slice as released clean would start that
// run lazily beside it, under the same attempt number (a chaos run on
// PostgreSQL, eighth session: 23 fires delivered twice at attempt 2).
// Claims that begin after the caller ended the slices' fences claim none
// of their runs with a write.
func (e *Executor) PromoteLazy(ctx context.Context, want func(timerID string, dueAt time.Time) bool) error {
	if e.cfg.Lazy == nil {
		return nil
	}
	inFlight := e.claims.snapshot()
	var f func(a *attempt) bool
	if want != nil {
		f = func(a *attempt) bool { return want(a.run.TimerID, a.run.DueAt) }
	}
	if err := e.promoteLazy(ctx, f); err != nil {
		return err
	}
	if len(inFlight) == 0 {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = clock.Sleep(wctx, e.cfg.Local, ClaimsWait)
		cancel()
	}()
	for _, done := range inFlight {
		select {
		case <-done:
		case <-wctx.Done():
			return ErrClaiming
		}
	}
	return nil
}

// ClaimsWait is how long PromoteLazy waits for the claims in flight when
// it began: a claim takes milliseconds unless the store is slow, and then
// the release is not clean.
const ClaimsWait = 250 * time.Millisecond

// ErrClaiming is PromoteLazy's answer when claims in flight when it began
// had not ended within ClaimsWait: every started lazy attempt was
// promoted, but the release is not clean.
var ErrClaiming = errors.New("claims in flight")

// claimsInFlight tracks the Claim calls in flight, each by a channel
// closed when it ends.
type claimsInFlight struct {
	mu   sync.Mutex
	seq  uint64
	open map[uint64]chan struct{}
}

// begin records a claim in flight; the function it returns ends it.
func (c *claimsInFlight) begin() (end func()) {
	done := make(chan struct{})
	c.mu.Lock()
	if c.open == nil {
		c.open = map[uint64]chan struct{}{}
	}
	c.seq++
	id := c.seq
	c.open[id] = done
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.open, id)
		c.mu.Unlock()
		close(done)
	}
}

// snapshot returns the channels of the claims in flight now.
func (c *claimsInFlight) snapshot() []chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]chan struct{}, 0, len(c.open))
	for _, done := range c.open {
		out = append(out, done)
	}
	return out
}

// isLazyClaim reports whether the attempt l was claimed lazily (its result
// is then fenced on the pending run, or on its promoted claim).
func (e *Executor) isLazyClaim(l store.Lease) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.inflight[l]
	return a != nil && a.lazyClaim
}

// dropLazy forgets a lazy attempt that did not start and puts its run
// back in the index, due at its stored instant: nothing was written for
// it.
func (e *Executor) dropLazy(r *model.Run) bool {
	e.mu.Lock()
	a := e.inflight[leaseOf(r)]
	lazy := a != nil && a.lazy
	if lazy {
		delete(e.inflight, leaseOf(r))
	}
	e.mu.Unlock()
	if !lazy {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.addToIndex(ctx, []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt}})
	return true
}

// promotable reports whether the lazy attempt a is to be promoted now: it
// runs and has run PromoteAfter (a long action gets its lease, as a
// claimed one does) or its lock's deadline is near, or its slice is gone
// while it runs or its result waits. A lazy claim that waits for a worker
// or its lane is not promoted: its start checks the lock, and gives the
// run back when the lock is gone (under overload, promoting the queue
// would write a claim for every fire). Nor is a finished attempt whose
// result waits while its slice is held, however near its deadline: its
// action is over, and its result's fence (the run pending at the attempt
// before) holds until a new holder fences the slice; promoting it only
// spares a redelivery after a takeover, and under overload, when results
// wait and lock extensions come late, it would write a claim for nearly
// every fire. e.mu must be held.
func (e *Executor) promotable(a *attempt, now time.Time) bool {
	switch {
	case !a.lazy:
		return false
	case a.state == finished:
		return a.orphan
	case a.state != running:
		return false
	}
	return a.orphan || a.deadline.Sub(now) < promoteSoon || now.Sub(a.since) >= PromoteAfter
}

// fenceStopped bumps the attempt count of the run of a lazy attempt that
// was stopped after it began (its lock's deadline passed before its claim
// could be written, or the node shuts down), so that the run's next
// attempt, here or on another node, carries the next attempt number: the
// stopped one may have had its effect. Until the store takes it the
// attempt stays in flight here, so that this node does not start the run
// lazily again under the same number; then the run goes back to the
// index, due now. A run that is no longer pending at the attempt before
// (another node fenced or took it) needs nothing more.
func (e *Executor) fenceStopped(r *model.Run) {
	defer e.forget(leaseOf(r))
	wait := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		due := later(r.DueAt, e.cfg.Clock.Now())
		// From the count the attempt started from: a retry after a bump
		// that was applied, its answer lost, finds the run bumped and
		// stops (ErrNotClaimed), where a second bump would fence off the
		// attempt this node or another may have started since.
		err := e.cfg.Store.RescheduleRun(ctx, r.ID, due, r.Attempt-1)
		if err == nil {
			e.addToIndex(ctx, []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: due}})
		}
		cancel()
		if err == nil || errors.Is(err, model.ErrNotClaimed) {
			return
		}
		e.cfg.Logger.Warn("fence a stopped lazy attempt's run", runAttrs(r.TimerID, r.ID, r.Attempt, "err", err)...)
		select {
		case <-e.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// peekGuard closes the gap between a lazy claim's read and its check of
// the attempts in flight: an attempt whose result is recorded, and which
// is forgotten, after the read saw its run pending must not start again.
// Each read notes the count of forgotten lazy attempts when it begins;
// the attempts forgotten while some read is in flight are kept, with their
// number, until no read that began before them is in flight.
type peekGuard struct {
	seq      uint64                 // lazy attempts forgotten so far
	inFlight map[uint64]int         // reads in flight, by seq at their start
	gone     map[store.Lease]uint64 // forgotten while reads were in flight, with their seq
}

// begin notes a read that begins and returns its start.
func (g *peekGuard) begin() uint64 {
	if g.inFlight == nil {
		g.inFlight, g.gone = map[uint64]int{}, map[store.Lease]uint64{}
	}
	g.inFlight[g.seq]++
	return g.seq
}

// end notes that the read that began at since ended, and drops what no
// read in flight needs any more.
func (g *peekGuard) end(since uint64) {
	if g.inFlight[since]--; g.inFlight[since] <= 0 {
		delete(g.inFlight, since)
	}
	if len(g.inFlight) == 0 {
		clear(g.gone)
		return
	}
	oldest := g.seq
	for s := range g.inFlight {
		oldest = min(oldest, s)
	}
	for l, s := range g.gone {
		if s <= oldest {
			delete(g.gone, l)
		}
	}
}

// forgot notes a lazy attempt forgotten.
func (g *peekGuard) forgot(l store.Lease) {
	g.seq++
	if len(g.inFlight) > 0 {
		g.gone[l] = g.seq
	}
}

// forgotSince reports whether l was forgotten after a read that began at
// since began.
func (g *peekGuard) forgotSince(l store.Lease, since uint64) bool {
	s, ok := g.gone[l]
	return ok && s > since
}
