package executor

// This file: the lease keeper — extending the leases of running attempts,
// confirming the lease of each claimed attempt before its action starts,
// and stopping those whose lease could not be confirmed in time.

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// keeper keeps the leases of this node's attempts, the half of the
// exactly-once guarantee that the claim does not give (docs/guarantees.md):
// no action starts before its full lease is confirmed (start), the
// leases of running attempts and of results waiting to be recorded are
// extended before they run out (extend), and an attempt whose lease could
// not be confirmed in time is stopped before another node may take its run
// over (enforce). It moves the attempts through their states as their
// leases allow (begin, markFinished, forget) and shares the attempts in
// flight, and the mutex that guards them, with the executor.
type keeper struct {
	// mu and inflight are the executor's (Executor.mu, Executor.inflight):
	// mu guards inflight, starts and confirming.
	mu       *sync.Mutex
	inflight map[store.Lease]*attempt
	store    leaseStore
	nodeID   string
	// lease, grace, margin and tick are Config.Lease, Grace, Margin and
	// Tick; renewEvery is how often a running attempt's lease is extended.
	lease, grace, margin, tick time.Duration
	renewEvery                 time.Duration
	clock                      clock.Clock // the cluster's: the leases written
	local                      clock.Clock // this process's: the deadlines
	logger                     *slog.Logger
	metrics                    *metrics.Metrics
	// observe feeds the store's answer times into the executor's lag.
	observe func(time.Duration)
	stop    <-chan struct{} // closed when the executor stops
	done    chan<- struct{} // closed when loop returns

	// extending is set while a lease extension is in flight.
	extending atomic.Bool
	// starts is the batch of attempts waiting for their start to be
	// confirmed, sent when the batch in flight (confirming) answers; mu
	// guards both (start).
	starts     *startBatch
	confirming bool
}

// leaseStore is what the keeper needs of the store.
type leaseStore interface {
	ExtendLeases(ctx context.Context, node string, leases []store.Lease, until time.Time) (lost []store.Lease, err error)
}

// newKeeper returns the lease keeper of e.
func newKeeper(e *Executor) *keeper {
	return &keeper{mu: &e.mu, inflight: e.inflight, store: e.cfg.Store, nodeID: e.cfg.NodeID,
		lease: e.cfg.Lease, grace: e.cfg.Grace, margin: e.cfg.Margin, tick: e.cfg.Tick,
		renewEvery: max(e.cfg.Lease/10, e.cfg.Tick), clock: e.cfg.Clock, local: e.cfg.Local,
		logger: e.cfg.Logger, metrics: e.cfg.Metrics, observe: e.observe, stop: e.stop, done: e.done}
}

// stopWithin is how long after sending a claim or an extension for lease
// the attempt may go on unless the lease is confirmed again: until Margin
// before other nodes may take the run over (lease + Grace).
func (k *keeper) stopWithin(lease time.Duration) time.Duration {
	return lease + k.grace - k.margin
}

// forget drops the attempt l from the attempts in flight.
func (k *keeper) forget(l store.Lease) {
	k.mu.Lock()
	delete(k.inflight, l)
	k.mu.Unlock()
}

// startableLocked returns the attempt l when it is claimed and its lease
// has not run out (the node paused, or the pool was full, past it), nil
// otherwise. k.mu must be held.
func (k *keeper) startableLocked(l store.Lease) *attempt {
	a := k.inflight[l]
	if a == nil || a.state != claimed || !k.local.Now().Before(a.deadline) {
		return nil
	}
	return a
}

// beginLocked moves the claimed attempt a to running and returns its
// action's context. k.mu must be held.
func (k *keeper) beginLocked(a *attempt, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	a.state, a.since, a.cancel = running, k.local.Now(), cancel
	return ctx, cancel
}

// startable reports whether a claimed attempt may still start.
func (k *keeper) startable(r *model.Run) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.startableLocked(leaseOf(r)) != nil
}

// markFinished moves a claimed attempt straight to finished (a skip).
func (k *keeper) markFinished(r *model.Run) {
	k.mu.Lock()
	if a := k.inflight[leaseOf(r)]; a != nil {
		a.state, a.since = finished, k.local.Now()
	}
	k.mu.Unlock()
}

// stopLocked stops attempt a: its action is cancelled and its result will
// not be recorded. k.mu must be held.
func (k *keeper) stopLocked(l store.Lease, a *attempt, why, reason string) {
	switch a.state {
	case stopped:
		return
	case finished:
		// The action is over; only its result waits. Whether it may still
		// be recorded is the store's fence to say.
		return
	}
	if a.state == running {
		k.logger.Warn("stopping attempt", runAttrs(a.run.TimerID, l.RunID, l.Attempt, "why", why)...)
		a.cancel()
	}
	a.state, a.why = stopped, why
	if a.cancel == nil {
		// Not started: nothing will come back for it.
		delete(k.inflight, l)
	}
	if m := k.metrics; m != nil && reason != "" {
		m.LeasesLost.WithLabelValues(reason).Inc()
	}
}

// stopAll stops every running attempt (shutdown) and returns how many; with
// requeue their runs are given back when their actions return.
func (k *keeper) stopAll(why string, requeue bool) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for l, a := range k.inflight {
		switch a.state {
		case running:
			a.requeue = requeue
			k.stopLocked(l, a, why, "")
			n++
		case claimed:
			// Not started: the pool gives it back when its turn comes.
			k.stopLocked(l, a, why, "")
		}
	}
	return n
}

// loop checks the leases every Tick: it stops the attempts whose
// lease it could not confirm in time, and extends the leases that need it,
// one extension in flight at a time, so that a stalled store delays the
// extension but never the stopping.
func (k *keeper) loop() {
	defer close(k.done)
	tick := k.local.NewTicker(k.tick)
	defer tick.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-tick.C():
		}
		k.enforce()
		if k.extending.CompareAndSwap(false, true) {
			go func() {
				defer k.extending.Store(false)
				k.extend()
			}()
		}
	}
}

// enforce stops the attempts whose deadline passed without a confirmed
// lease: before the lease ends (by Margin), the action is cancelled and its
// result will not be recorded, so that another node that takes the run
// over never runs beside it. A claim not started yet is dropped. A finished
// attempt keeps its result: the store's fence decides whether it counts.
func (k *keeper) enforce() {
	now := k.local.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	for l, a := range k.inflight {
		if (a.state == claimed || a.state == running) && !now.Before(a.deadline) {
			k.stopLocked(l, a, "lease not confirmed in time (store unreachable, or the node paused)", "unconfirmed")
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
// on a lease confirmed by start, so the attempts that end within
// renewEvery, nearly all of them, cost no write here). They are extended in chunks of extendChunk, those whose deadline comes
// first first, each chunk confirmed as soon as the store answers it; the
// chunks after one that fails wait for the next round.
func (k *keeper) extend() {
	now := k.local.Now()
	k.mu.Lock()
	type due struct {
		l        store.Lease
		deadline time.Time
	}
	var need []due
	for l, a := range k.inflight {
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
		if a.deadline.Sub(now) < k.startLease() {
			need = append(need, due{l, a.deadline})
		}
	}
	k.mu.Unlock()
	if len(need) == 0 {
		return
	}
	slices.SortFunc(need, func(a, b due) int { return a.deadline.Compare(b.deadline) })
	leases := make([]store.Lease, len(need))
	for i, d := range need {
		leases[i] = d.l
	}
	k.extendAll(leases)
}

// extendAll extends leases chunk by chunk, in their order, each chunk
// confirmed as soon as the store answers it; the chunks after one that
// fails are left for a later round.
func (k *keeper) extendAll(leases []store.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), k.lease/2)
	defer cancel()
	for len(leases) > 0 {
		n := min(len(leases), extendChunk)
		if !k.extendSome(ctx, leases[:n], len(leases)) {
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
func (k *keeper) extendSome(ctx context.Context, leases []store.Lease, left int) bool {
	sent, until := k.local.Now(), k.clock.Now().Add(k.lease)
	lost, err := k.store.ExtendLeases(ctx, k.nodeID, leases, until)
	k.observe(k.local.Now().Sub(sent))
	if err != nil {
		k.logger.Warn("extend leases", "attempts", left, "err", err)
		return false
	}
	gone := leaseSet(lost)
	deadline := sent.Add(k.stopWithin(k.lease))
	k.logger.Debug("leases extended", "attempts", len(leases), "lost", len(lost), "took", k.local.Now().Sub(sent))
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, l := range leases {
		a := k.inflight[l]
		if a == nil {
			continue
		}
		if gone[l] {
			k.stopLocked(l, a, "the run is no longer this attempt's (taken over, cancelled or finished)", "taken_over")
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
func (k *keeper) startLease() time.Duration { return k.stopWithin(k.lease) - k.renewEvery }

// start moves the claimed attempt of r to running, once its lease in the
// store covers the full Lease from about now, and returns its action's
// context; false when it may not start. A claim's lease is short
// (ClaimLease after the instant), so that the runs a dead node claimed
// ahead are taken over within seconds; an action started on it would be
// delivered again by another node after a store stall of this node longer
// than the claim's lease but shorter than Lease. So the attempt's lease is
// extended first, in one ExtendLeases for the attempts that start
// together, and the action starts only once the store confirmed it. While
// the store does not answer, the confirmation is sent again every Tick
// until the claim's deadline passes; then it reports false and the run is
// given back (or, stalled past the claim's lease, taken over by another
// node, which is not a second delivery: nothing was delivered).
func (k *keeper) start(r *model.Run, timeout time.Duration) (context.Context, context.CancelFunc, bool) {
	l := leaseOf(r)
	for {
		k.mu.Lock()
		a := k.startableLocked(l)
		if a == nil {
			k.mu.Unlock()
			return nil, nil, false
		}
		if a.deadline.Sub(k.local.Now()) >= k.startLease() {
			ctx, cancel := k.beginLocked(a, timeout)
			k.mu.Unlock()
			return ctx, cancel, true
		}
		before := a.deadline
		b := k.starts
		if b == nil {
			b = &startBatch{done: make(chan struct{})}
			k.starts = b
		}
		b.leases = append(b.leases, l)
		if !k.confirming {
			k.confirming = true
			go k.confirmStarts()
		}
		k.mu.Unlock()
		<-b.done
		k.mu.Lock()
		if a = k.startableLocked(l); a != nil && a.deadline.After(before) {
			// Confirmed, however long the store took to answer: the
			// lease runs from when the extension was sent.
			ctx, cancel := k.beginLocked(a, timeout)
			k.mu.Unlock()
			return ctx, cancel, true
		}
		k.mu.Unlock()
		if a == nil {
			return nil, nil, false
		}
		_ = clock.Sleep(context.Background(), k.local, k.tick)
	}
}

// confirmStarts sends the batches of start, one at a time, until
// none waits: the attempts that ask while one batch is in flight go in the
// next.
func (k *keeper) confirmStarts() {
	for {
		k.mu.Lock()
		b := k.starts
		k.starts = nil
		if b == nil {
			k.confirming = false
			k.mu.Unlock()
			return
		}
		k.mu.Unlock()
		k.extendAll(b.leases)
		close(b.done)
	}
}
