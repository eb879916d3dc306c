package executor

// This file: the lease keeper — extending the leases of running attempts
// and stopping those whose lease could not be confirmed in time.

import (
	"context"
	"slices"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// stopLocked stops attempt a: its action is cancelled and its result will
// not be recorded. e.mu must be held.
func (e *Executor) stopLocked(l store.Lease, a *attempt, why, reason string) {
	switch a.state {
	case stopped:
		return
	case finished:
		// The action is over; only its result waits. Whether it may still
		// be recorded is the store's fence to say.
		return
	}
	if a.state == running {
		e.cfg.Logger.Warn("stopping attempt", runAttrs(a.run.TimerID, l.RunID, l.Attempt, "why", why)...)
		a.cancel()
	}
	a.state, a.why = stopped, why
	if a.cancel == nil {
		// Not started: nothing will come back for it.
		delete(e.inflight, l)
	}
	if m := e.cfg.Metrics; m != nil && reason != "" {
		m.LeasesLost.WithLabelValues(reason).Inc()
	}
}

// stopAll stops every running attempt (shutdown) and returns how many; with
// requeue their runs are given back when their actions return.
func (e *Executor) stopAll(why string, requeue bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for l, a := range e.inflight {
		switch a.state {
		case running:
			a.requeue = requeue
			e.stopLocked(l, a, why, "")
			n++
		case claimed:
			// Not started: the pool gives it back when its turn comes.
			e.stopLocked(l, a, why, "")
		}
	}
	return n
}

// keepLeases checks the leases every Tick: it stops the attempts whose
// lease it could not confirm in time, and extends the leases that need it,
// one extension in flight at a time, so that a stalled store delays the
// extension but never the stopping.
func (e *Executor) keepLeases() {
	defer close(e.done)
	tick := e.cfg.Local.NewTicker(e.cfg.Tick)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C():
		}
		e.enforce()
		if e.extending.CompareAndSwap(false, true) {
			go func() {
				defer e.extending.Store(false)
				e.extend()
			}()
		}
	}
}

// enforce stops the attempts whose deadline passed without a confirmed
// lease: before the lease ends (by Margin), the action is cancelled and its
// result will not be recorded, so that another node that takes the run
// over never runs beside it. A claim not started yet is dropped. A finished
// attempt keeps its result: the store's fence decides whether it counts.
func (e *Executor) enforce() {
	now := e.cfg.Local.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for l, a := range e.inflight {
		if (a.state == claimed || a.state == running) && !now.Before(a.deadline) {
			e.stopLocked(l, a, "lease not confirmed in time (store unreachable, or the node paused)", "unconfirmed")
		}
	}
}

// extendChunk is the most leases one ExtendLeases call of the keeper
// carries: the keeper confirms the leases chunk by chunk, the most urgent
// first, so that a store that answers slowly (a server database under
// overload) confirms some leases in time instead of none.
const extendChunk = 500

// extend extends the leases of the attempts that need it: those running,
// or finished with their result waiting, for PromoteAfter at least, whose
// lease was last confirmed more than renewEvery ago (every action starts
// on a lease confirmed by confirmStart, so the attempts that end within
// renewEvery, nearly all of them, cost no write here). They are extended in chunks of extendChunk, those whose deadline comes
// first first, each chunk confirmed as soon as the store answers it; the
// chunks after one that fails wait for the next round.
func (e *Executor) extend() {
	now := e.cfg.Local.Now()
	e.mu.Lock()
	type due struct {
		l        store.Lease
		deadline time.Time
	}
	var need []due
	for l, a := range e.inflight {
		switch {
		case a.state == claimed:
			// Due but not started (waiting for a pool worker): extend it
			// too once it waited PromoteAfter, rather than let the claim
			// run out in the queue and hand the run round again.
			if !a.submitted || now.Sub(a.since) < PromoteAfter {
				continue
			}
		case a.state != running && a.state != finished, now.Sub(a.since) < PromoteAfter:
			continue
		}
		if a.deadline.Sub(now) < e.stopWithin(e.cfg.Lease)-e.renewEvery {
			need = append(need, due{l, a.deadline})
		}
	}
	e.mu.Unlock()
	if len(need) == 0 {
		return
	}
	slices.SortFunc(need, func(a, b due) int { return a.deadline.Compare(b.deadline) })
	leases := make([]store.Lease, len(need))
	for i, d := range need {
		leases[i] = d.l
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Lease/2)
	defer cancel()
	for len(leases) > 0 {
		n := min(len(leases), extendChunk)
		if !e.extendSome(ctx, leases[:n], len(leases)) {
			return
		}
		leases = leases[n:]
	}
}

// leaseSet returns the leases of ls as a set.
func leaseSet(ls []store.Lease) map[store.Lease]bool {
	set := make(map[store.Lease]bool, len(ls))
	for _, l := range ls {
		set[l] = true
	}
	return set
}

// extendSome extends leases (left of them still to extend this round) and
// applies the answer; it reports whether the store answered.
func (e *Executor) extendSome(ctx context.Context, leases []store.Lease, left int) bool {
	sent, until := e.cfg.Local.Now(), e.cfg.Clock.Now().Add(e.cfg.Lease)
	lost, err := e.cfg.Store.ExtendLeases(ctx, e.cfg.NodeID, leases, until)
	e.observe(e.cfg.Local.Now().Sub(sent))
	if err != nil {
		e.cfg.Logger.Warn("extend leases", "attempts", left, "err", err)
		return false
	}
	gone := leaseSet(lost)
	deadline := sent.Add(e.stopWithin(e.cfg.Lease))
	e.cfg.Logger.Debug("leases extended", "attempts", len(leases), "lost", len(lost), "took", e.cfg.Local.Now().Sub(sent))
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range leases {
		a := e.inflight[l]
		if a == nil {
			continue
		}
		if gone[l] {
			e.stopLocked(l, a, "the run is no longer this attempt's (taken over, cancelled or finished)", "taken_over")
			continue
		}
		if deadline.After(a.deadline) {
			a.deadline = deadline
		}
	}
	return true
}

// startBatch is a batch of claimed attempts whose start waits for their
// leases to be extended to the full Lease; done is closed when the store
// answered (or not).
type startBatch struct {
	leases []store.Lease
	done   chan struct{}
}

// startLease is how much of its lease, by this node's reckoning, a claimed
// attempt must have left for its action to start without a confirmation:
// as much as the keeper keeps for a running one.
func (e *Executor) startLease() time.Duration { return e.stopWithin(e.cfg.Lease) - e.renewEvery }

// confirmStart reports whether the claimed attempt of r may start: its
// lease in the store covers the full Lease from about now. A claim's
// lease is short (ClaimLease after the instant), so that the runs a dead
// node claimed ahead are taken over within seconds; an action started on
// it would be delivered again by another node after a store stall of this
// node longer than the claim's lease but shorter than Lease. So the
// attempt's lease is extended first, in one ExtendLeases for the attempts
// that start together, and the action starts only once the store
// confirmed it. While the store does not answer, the confirmation is sent
// again every Tick until the claim's deadline passes; then it reports
// false and the run is given back (or, stalled past the claim's lease,
// taken over by another node, which is not a second delivery: nothing was
// delivered).
func (e *Executor) confirmStart(r *model.Run) bool {
	l := leaseOf(r)
	for {
		e.mu.Lock()
		a := e.inflight[l]
		now := e.cfg.Local.Now()
		if a == nil || a.state != claimed || !now.Before(a.deadline) {
			e.mu.Unlock()
			return false
		}
		if a.deadline.Sub(now) >= e.startLease() {
			e.mu.Unlock()
			return true
		}
		before := a.deadline
		b := e.starts
		if b == nil {
			b = &startBatch{done: make(chan struct{})}
			e.starts = b
		}
		b.leases = append(b.leases, l)
		if !e.confirming {
			e.confirming = true
			go e.confirmStarts()
		}
		e.mu.Unlock()
		<-b.done
		e.mu.Lock()
		a = e.inflight[l]
		ok := a != nil && a.state == claimed && e.cfg.Local.Now().Before(a.deadline)
		confirmed := ok && a.deadline.After(before)
		e.mu.Unlock()
		if !ok || confirmed {
			// Confirmed, however long the store took to answer: the
			// lease runs from when the extension was sent.
			return ok
		}
		_ = clock.Sleep(context.Background(), e.cfg.Local, e.cfg.Tick)
	}
}

// confirmStarts sends the batches of confirmStart, one at a time, until
// none waits: the attempts that ask while one batch is in flight go in the
// next.
func (e *Executor) confirmStarts() {
	for {
		e.mu.Lock()
		b := e.starts
		e.starts = nil
		if b == nil {
			e.confirming = false
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Lease/2)
		for leases := b.leases; len(leases) > 0; {
			n := min(len(leases), extendChunk)
			if !e.extendSome(ctx, leases[:n], len(leases)) {
				break
			}
			leases = leases[n:]
		}
		cancel()
		close(b.done)
	}
}
