package trigger

import (
	"container/heap"
	"context"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index"
)

const maxClaimBatch = 500

// roomer is an Executor that says how many more runs it takes now
// (executor.Executor.Room).
type roomer interface {
	Room() int
}

// maxClaiming bounds the claims in progress at once. Claims of one node
// queue for the same store (a single writer on SQLite), so more of them at
// once only adds waiting; and runs that are claimed long before the
// executor can start them see their leases run out. With this bound, a
// burst of 100,000 runs due at one instant is claimed a few thousand at a
// time, as fast as the executor takes them, while the rest wait unclaimed.
const maxClaiming = 4

// saturatedWait is how long the dispatch loop waits while the executor is
// saturated.
const saturatedWait = 10 * time.Millisecond

func (t *Trigger) dispatchLoop() {
	defer t.wg.Done()
	timer := t.cfg.Clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		t.mu.Lock()
		var wait time.Duration = time.Hour
		var batch []item
		now := t.cfg.Clock.Now()
		limit := maxClaimBatch
		if r, ok := t.cfg.Executor.(roomer); ok {
			// No more than the executor has room for, counting the runs
			// of the claims in flight: what waits unclaimed here is
			// claimed by priority when room comes, while runs claimed
			// beyond the room would wait in the executor, ahead of
			// higher-priority runs due later.
			limit = min(limit, r.Room()-int(t.claimingRuns.Load()))
		}
		if t.claiming.Load() >= maxClaiming || limit <= 0 || t.cfg.Executor.Saturated() {
			// Backpressure: let the executor catch up; the runs wait here,
			// late but unclaimed, rather than in flight with their leases
			// running out.
			wait = saturatedWait
		}
		// Once the first run is due for its claim, the runs due within the
		// next claimWindow join it: one claim per window, not one per run,
		// however the instants spread.
		horizon := now.Add(t.cfg.ClaimAhead)
		if t.ready.Len() > 0 || t.heap.Len() > 0 && !t.heap[0].entry.DueAt.After(horizon) {
			horizon = horizon.Add(t.cfg.ClaimAhead / 2)
		}
		// The runs due for their claim move to the ready heap, whose order
		// is priority first: when more are due than the executor takes
		// (saturated, or more than a batch), higher priorities are claimed
		// first, and within a priority earlier instants.
		for t.heap.Len() > 0 && !t.heap[0].entry.DueAt.After(horizon) {
			heap.Push(&t.ready, heap.Pop(&t.heap))
		}
		if wait != saturatedWait && t.heap.Len() > 0 {
			wait = max(t.heap[0].entry.DueAt.Sub(now)-t.cfg.ClaimAhead, time.Millisecond)
		}
		for wait != saturatedWait && t.ready.Len() > 0 && len(batch) < limit {
			top := heap.Pop(&t.ready).(item)
			if cur := t.slices[top.slice]; cur != top.st || top.st.dropped {
				// Queued by an earlier holding of the slice, since dropped.
				t.doneLocked(top.slice, top.st, 1)
				continue
			}
			batch = append(batch, top)
		}
		if len(batch) == maxClaimBatch {
			wait = 0
		} else if len(batch) > 0 && len(batch) == limit && t.ready.Len() > 0 {
			wait = saturatedWait // the executor's room is taken
		}
		t.mu.Unlock()
		if len(batch) > 0 {
			t.claims.Add(1)
			t.claiming.Add(1)
			t.claimingRuns.Add(int64(len(batch)))
			go t.claimAndSchedule(batch)
		}
		if wait == 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-t.stop:
			return
		case <-t.wake:
			if !timer.Stop() {
				select {
				case <-timer.C():
				default:
				}
			}
		case <-timer.C():
		}
	}
}

func (t *Trigger) claimAndSchedule(batch []item) {
	defer t.claims.Done()
	defer func() {
		t.claimingRuns.Add(-int64(len(batch)))
		t.claiming.Add(-1)
		t.kick()
	}()
	entries := make([]index.Entry, len(batch))
	for i, it := range batch {
		entries[i] = it.entry
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	won, err := t.cfg.Executor.Claim(ctx, entries)
	if err != nil {
		t.cfg.Logger.Warn("claim runs", "runs", len(entries), "err", err)
		t.requeue(batch)
		return
	}
	// Claimed or not, these entries are settled: a run that was not
	// claimed belongs to another node or no longer exists. They leave the
	// index before any action starts, so that a fast failure's retry, added
	// to the index by the executor, is never removed by this.
	bySlice := map[index.Slice][]string{}
	for _, it := range batch {
		bySlice[it.slice] = append(bySlice[it.slice], it.entry.RunID)
	}
	for s, ids := range bySlice {
		if err := t.cfg.Index.Remove(ctx, s, ids...); err != nil {
			t.cfg.Logger.Warn("index remove", "slice", s.String(), "err", err)
		}
	}
	t.mu.Lock()
	for _, cr := range won {
		t.setPriorityLocked(cr.Timer.ID, cr.Timer.EffectivePriority())
	}
	for _, it := range batch {
		// Settled: the run is running (here or elsewhere) or gone. If it
		// comes back pending at the same instant — given back by this
		// node (its claim went stale) or another one, or requeued — it
		// must be queued again rather than taken for already seen.
		delete(it.st.seen, seenKey{it.entry.RunID, it.entry.DueAt.UnixMilli()})
		t.doneLocked(it.slice, it.st, 1)
	}
	t.mu.Unlock()
	t.arm(won)
}

// requeue gives items of a claim back to the ready heap, a little later
// (RetryClaim), unless their slice was dropped or taken again since.
func (t *Trigger) requeue(items []item) {
	if len(items) == 0 {
		return
	}
	_ = clock.Sleep(context.Background(), t.cfg.Clock, RetryClaim)
	t.mu.Lock()
	for _, it := range items {
		if t.slices[it.slice] == it.st && !it.st.dropped {
			heap.Push(&t.ready, it)
		} else {
			t.doneLocked(it.slice, it.st, 1)
		}
	}
	t.mu.Unlock()
	t.kick()
}
