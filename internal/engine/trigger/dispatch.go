package trigger

import (
	"context"
	"sync"
	"sync/atomic"
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

// dispatcher claims the runs the holder hands it, in batches a little
// ahead of their instants and no faster than the executor takes them, and
// starts each won run at its instant (arming.go). It is apart from the
// holder because its state is the claims in flight and the runs already
// claimed, which no longer belong to a slice: a run leaves the holder's
// queue when its claim settles, and a dropped slice's claimed runs still
// run.
type dispatcher struct {
	cfg  *Config
	held *holder
	// wake is kicked when runs were queued or a claim ended.
	wake   chan struct{}
	claims sync.WaitGroup
	// claiming counts the claims in progress (see maxClaiming), and
	// claimingRuns their runs.
	claiming     atomic.Int32
	claimingRuns atomic.Int64

	// armed holds the claimed runs waiting for their instant, by instant
	// (Unix ns).
	armedMu sync.Mutex
	armed   map[int64]*armedGroup
	stopped bool

	signals *testSignals
}

func newDispatcher(cfg *Config, signals *testSignals) *dispatcher {
	return &dispatcher{cfg: cfg, wake: make(chan struct{}, 1), armed: map[int64]*armedGroup{}, signals: signals}
}

// kick wakes the dispatch loop.
func (d *dispatcher) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// loop claims the runs due for their claims until stop is closed.
func (d *dispatcher) loop(stop <-chan struct{}) {
	timer := d.cfg.Clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		limit := maxClaimBatch
		if r, ok := d.cfg.Executor.(roomer); ok {
			// No more than the executor has room for, counting the runs
			// of the claims in flight: what waits unclaimed in the
			// holder is claimed by priority when room comes, while runs
			// claimed beyond the room would wait in the executor, ahead
			// of higher-priority runs due later.
			limit = min(limit, r.Room()-int(d.claimingRuns.Load()))
		}
		blocked := d.claiming.Load() >= maxClaiming || limit <= 0 || d.cfg.Executor.Saturated()
		batch, wait := d.held.claimable(d.cfg.Clock.Now(), limit, blocked)
		if len(batch) > 0 {
			d.claims.Add(1)
			d.claiming.Add(1)
			d.claimingRuns.Add(int64(len(batch)))
			go d.claimAndSchedule(batch)
		}
		if wait == 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return
		case <-d.wake:
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

// claimAndSchedule claims the runs of batch, takes them out of the index
// and of the holder's queue, and arms the runs won; a batch whose claim
// failed is queued again.
func (d *dispatcher) claimAndSchedule(batch []item) {
	defer d.claims.Done()
	defer func() {
		d.claimingRuns.Add(-int64(len(batch)))
		d.claiming.Add(-1)
		d.kick()
	}()
	entries := make([]index.Entry, len(batch))
	for i, it := range batch {
		entries[i] = it.entry
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	won, err := d.cfg.Executor.Claim(ctx, entries)
	if err != nil {
		d.cfg.Logger.Warn("claim runs", "runs", len(entries), "err", err)
		d.requeue(batch)
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
		if err := d.cfg.Index.Remove(ctx, s, ids...); err != nil {
			d.cfg.Logger.Warn("index remove", "slice", s.String(), "err", err)
		}
	}
	d.held.settle(batch, won)
	d.arm(won)
}

// requeue gives items of a claim back to the ready heap, a little later
// (RetryClaim), unless their slice was dropped or taken again since.
func (d *dispatcher) requeue(items []item) {
	if len(items) == 0 {
		return
	}
	_ = clock.Sleep(context.Background(), d.cfg.Clock, RetryClaim)
	d.held.putBack(items)
}
