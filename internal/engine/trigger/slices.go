package trigger

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/store"
)

// holder keeps the slices this node holds and the runs queued for them,
// waiting for their claims. It learns the runs of its slices three ways —
// reads of the store (rechecks.go), polls of the index (polling.go) and
// Notify — and queues each run once per holding of its slice, so that
// the dispatcher sees every run of a held slice, and no run twice. It is
// one type with the reads because a read's results are only good for the
// holding of the slice that started it: the holdings, their queues and
// the marks the reads have reached change together, under one mutex.
type holder struct {
	cfg          *Config
	recheckEvery time.Duration // recheckEvery; tests shorten it before Start

	mu   sync.Mutex
	heap itemHeap
	// ready holds the runs whose claim is due and that wait for the
	// executor, by priority (see claimable).
	ready  readyHeap
	prio   priorities
	slices map[index.Slice]*sliceState
	// stopping is set (under mu) when Stop begins: Take starts no more
	// reads.
	stopping bool
	// rechecking is set while a train of rechecks runs.
	rechecking atomic.Bool

	// stop and wg are the Trigger's: reads end when stop is closed, and wg
	// counts them.
	stop <-chan struct{}
	wg   *sync.WaitGroup
	// kick wakes the dispatcher when runs were queued.
	kick    func()
	signals *testSignals
}

func newHolder(cfg *Config, stop <-chan struct{}, wg *sync.WaitGroup, kick func(), signals *testSignals) *holder {
	return &holder{cfg: cfg, recheckEvery: recheckEvery, prio: priorities{}, slices: map[index.Slice]*sliceState{},
		stop: stop, wg: wg, kick: kick, signals: signals}
}

type seenKey struct {
	run string
	due int64 // ms
}

type sliceState struct {
	queued  int // items in the heap or being claimed
	dropped bool
	ready   bool // reconciled with the store
	seen    map[seenKey]struct{}
	// checked is when the slice's pending runs were last read from the
	// store (see recheckEvery).
	checked time.Time
	// mark is where the polls of an index.SinceRanger have read the slice
	// to: each poll is offered only what the index holds beyond it.
	mark index.Mark
}

// stopTaking makes Take start nothing more; Stop calls it before it waits
// for the reads in progress.
func (h *holder) stopTaking() {
	h.mu.Lock()
	h.stopping = true
	h.mu.Unlock()
}

// Take starts dispatching slice s. Its runs due in the next seconds are
// read from the store in the background, and the rest of the slice by the
// rechecks that follow as its minute goes by (see recheck): reading a whole
// minute of runs at once, for every bucket taken, made the CPU spike that
// delayed the fires of that moment by tens of milliseconds. A slice the
// index does not know is rebuilt whole by the first poll.
func (h *holder) Take(s index.Slice) {
	h.mu.Lock()
	if st, ok := h.slices[s]; ok && !st.dropped || h.stopping {
		h.mu.Unlock()
		return
	}
	h.slices[s] = &sliceState{seen: map[seenKey]struct{}{}, checked: h.cfg.Clock.Now()}
	// Under mu, ordered with Stop's: the scheduler calls Take from its own
	// goroutine, which wg does not count, so an Add once Stop waits on wg
	// would race with the Wait.
	h.wg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		h.reconcileRange(s, s.Start(), h.readUntil(s, h.cfg.Clock.Now()))
	}()
}

// Drop stops dispatching slice s (its lock was lost or released). Runs of s
// already claimed still run.
func (h *holder) Drop(s index.Slice) {
	h.mu.Lock()
	if st, ok := h.slices[s]; ok {
		st.dropped = true
		if st.queued == 0 {
			delete(h.slices, s)
		}
	}
	h.mu.Unlock()
}

// Notify offers runs planned or retried on this node; those in held slices
// due within the next ReadAhead are queued at once, the others are left to
// their slices' owners, or to the polls of the index (and the rechecks of
// the store) that read them as their instant nears. A planning pass offers
// each timer's next fires, up to a minute ahead: queued at once, the
// trigger held about 20 s of runs at 10,000 fires/s where its polls hold 3.
func (h *holder) Notify(entries []index.Entry) {
	buckets := h.cfg.Index.Buckets()
	until := h.cfg.Clock.Now().Add(h.cfg.ReadAhead)
	h.mu.Lock()
	n := 0
	for _, e := range entries {
		if !e.DueAt.Before(until) {
			continue
		}
		s := index.SliceOf(e.TimerID, e.DueAt, buckets)
		if st, ok := h.slices[s]; ok && !st.dropped {
			if h.pushLocked(s, st, e) {
				n++
			}
		}
	}
	h.mu.Unlock()
	if n > 0 {
		h.kick()
	}
}

// pushLocked queues e unless it was seen already. h.mu must be held.
func (h *holder) pushLocked(s index.Slice, st *sliceState, e index.Entry) bool {
	k := seenKey{e.RunID, e.DueAt.UnixMilli()}
	if _, ok := st.seen[k]; ok {
		return false
	}
	st.seen[k] = struct{}{}
	st.queued++
	heap.Push(&h.heap, item{entry: e, slice: s, st: st, prio: h.prio.of(e.TimerID)})
	return true
}

func (h *holder) push(s index.Slice, entries []index.Entry) {
	h.pushPolled(s, nil, entries, index.Mark{})
}

// pushPolled queues entries as push does. With st, they were read from the
// index for that holding of s up to mark, which it records; nothing is
// queued if s is no longer held by st (dropped, or taken again since).
func (h *holder) pushPolled(s index.Slice, st *sliceState, entries []index.Entry, mark index.Mark) {
	h.mu.Lock()
	cur, ok := h.slices[s]
	n := 0
	if ok && !cur.dropped && (st == nil || st == cur) {
		for _, e := range entries {
			if h.pushLocked(s, cur, e) {
				n++
			}
		}
		if st != nil {
			st.mark = mark
		}
	}
	h.mu.Unlock()
	if n > 0 {
		h.kick()
	}
}

func (h *holder) queued(s index.Slice) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st, ok := h.slices[s]; ok {
		return st.queued
	}
	return 0
}

// doneLocked accounts for n items of holding st of slice s leaving the
// queue; a dropped holding is forgotten with its last item.
func (h *holder) doneLocked(s index.Slice, st *sliceState, n int) {
	st.queued -= n
	if st.dropped && st.queued <= 0 && h.slices[s] == st {
		delete(h.slices, s)
	}
}

// SetPriority records the priority of a timer's runs (Trigger.SetPriority).
func (h *holder) SetPriority(timerID string, p int) {
	h.mu.Lock()
	h.prio.set(timerID, p)
	h.mu.Unlock()
}

// claimable hands the dispatcher the runs to claim now, at most limit of
// them, and how long it may wait before it asks again; blocked (the
// executor is saturated, or enough claims are in flight) hands none.
//
// Once the first run is due for its claim (ClaimAhead before its
// instant), the runs due within the next ClaimAhead/2 join it: one claim
// per window, not one per run, however the instants spread. The runs due
// for their claim move to the ready heap, whose order is priority first:
// when more are due than the executor takes (saturated, or more than a
// batch), higher priorities are claimed first, and within a priority
// earlier instants.
func (h *holder) claimable(now time.Time, limit int, blocked bool) (batch []item, wait time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	wait = time.Hour
	if blocked {
		// Backpressure: let the executor catch up; the runs wait here,
		// late but unclaimed, rather than in flight with their leases
		// running out.
		wait = saturatedWait
	}
	horizon := now.Add(h.cfg.ClaimAhead)
	if h.ready.Len() > 0 || h.heap.Len() > 0 && !h.heap[0].entry.DueAt.After(horizon) {
		horizon = horizon.Add(h.cfg.ClaimAhead / 2)
	}
	for h.heap.Len() > 0 && !h.heap[0].entry.DueAt.After(horizon) {
		heap.Push(&h.ready, heap.Pop(&h.heap))
	}
	if !blocked && h.heap.Len() > 0 {
		wait = max(h.heap[0].entry.DueAt.Sub(now)-h.cfg.ClaimAhead, time.Millisecond)
	}
	for !blocked && h.ready.Len() > 0 && len(batch) < limit {
		top := heap.Pop(&h.ready).(item)
		if cur := h.slices[top.slice]; cur != top.st || top.st.dropped {
			// Queued by an earlier holding of the slice, since dropped.
			h.doneLocked(top.slice, top.st, 1)
			continue
		}
		batch = append(batch, top)
	}
	if len(batch) == maxClaimBatch {
		wait = 0
	} else if len(batch) > 0 && len(batch) == limit && h.ready.Len() > 0 {
		wait = saturatedWait // the executor's room is taken
	}
	return batch, wait
}

// settle takes the items of a claim out of the queue, claimed or not: the
// run is running (here or elsewhere) or gone. If it comes back pending at
// the same instant — given back by this node (its claim went stale) or
// another one, or requeued — it must be queued again rather than taken
// for already seen. The priorities of the timers of the runs won are
// learnt.
func (h *holder) settle(batch []item, won []store.ClaimedRun) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cr := range won {
		h.prio.set(cr.Timer.ID, cr.Timer.EffectivePriority())
	}
	for _, it := range batch {
		delete(it.st.seen, seenKey{it.entry.RunID, it.entry.DueAt.UnixMilli()})
		h.doneLocked(it.slice, it.st, 1)
	}
}

// putBack returns the items of a failed claim to the ready heap, unless
// their slice was dropped or taken again since, and wakes the dispatcher.
func (h *holder) putBack(items []item) {
	h.mu.Lock()
	for _, it := range items {
		if h.slices[it.slice] == it.st && !it.st.dropped {
			heap.Push(&h.ready, it)
		} else {
			h.doneLocked(it.slice, it.st, 1)
		}
	}
	h.mu.Unlock()
	h.kick()
}
