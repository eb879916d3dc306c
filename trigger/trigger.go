// Package trigger dispatches the runs of the slices this node holds, each at
// its instant. It keeps the due runs of its slices in one in-memory heap and
// a single timer armed for the earliest, instead of polling once a second:
// a run is claimed a little ahead of its instant (ClaimAhead) and its action
// is started at the instant itself, so that fires land within a millisecond
// or two of their schedule.
//
// Runs reach the heap three ways: reads of the store when a slice is taken
// and every few seconds after (the index is only a cache), a poll of the
// slice index every Poll for runs that other nodes planned, and Notify for
// runs planned or retried on this node.
package trigger

import (
	"container/heap"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/store"
)

// Executor is what the trigger needs of the executor.
type Executor interface {
	Claim(ctx context.Context, entries []index.Entry) ([]store.ClaimedRun, error)
	Submit(cr store.ClaimedRun)
	// GiveBack returns a claimed run that will not be started to pending,
	// due at its instant, for another node to run.
	GiveBack(cr store.ClaimedRun)
	// Saturated reports whether the executor should be given no more runs
	// for now (backpressure).
	Saturated() bool
}

// Config configures a Trigger.
type Config struct {
	Store    store.Store
	Index    index.Index
	Executor Executor
	// ClaimAhead is how long before its instant a run is claimed, so that
	// the claim's round trip, and a busy store, do not delay the fire: the
	// action still starts at the instant. Default DefaultClaimAhead (the
	// claim's lease covers it).
	ClaimAhead time.Duration
	// ReadAhead is how far ahead each poll of the index reads. Default 3s.
	ReadAhead time.Duration
	// Poll is the interval of index polls. Default 200ms.
	Poll time.Duration
	// DoneGrace is how long after its minute a slice is kept before it is
	// reported done. Default 2s.
	DoneGrace time.Duration
	// OnDone is called (from the trigger's goroutine) when a slice is done:
	// its minute is over and every run in it was dispatched.
	OnDone func(s index.Slice)
	// Now is the cluster's clock, which instants are judged by. Default
	// time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

type item struct {
	entry index.Entry
	slice index.Slice
	st    *sliceState // the holding of the slice that queued the item
}

type itemHeap []item

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[i].entry.DueAt.Before(h[j].entry.DueAt) }
func (h itemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)        { *h = append(*h, x.(item)) }
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
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
}

// recheckEvery is how often a held slice's pending runs are read from the
// store again, besides the index polls: a safety net for index updates lost
// to races between nodes (a run given back by a stopping node just as
// another node removed its stale entry), which would otherwise wait for the
// sweeper.
const recheckEvery = 5 * time.Second

// Trigger dispatches runs of held slices at their instants.
type Trigger struct {
	cfg          Config
	recheckEvery time.Duration // recheckEvery; tests shorten it before Start

	mu     sync.Mutex
	heap   itemHeap
	slices map[index.Slice]*sliceState

	wake   chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
	claims sync.WaitGroup
	// claiming counts the claims in progress (see maxClaiming).
	claiming atomic.Int32
	// rechecking is set while a train of rechecks runs.
	rechecking atomic.Bool

	// armed holds the claimed runs waiting for their instant.
	armedMu sync.Mutex
	armed   map[string]armedRun
	stopped bool
}

type armedRun struct {
	timer *time.Timer
	cr    store.ClaimedRun
}

// New returns a Trigger; call Start.
func New(cfg Config) *Trigger {
	if cfg.ClaimAhead <= 0 {
		cfg.ClaimAhead = DefaultClaimAhead
	}
	if cfg.ReadAhead <= 0 {
		cfg.ReadAhead = 3 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	if cfg.DoneGrace <= 0 {
		cfg.DoneGrace = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Trigger{cfg: cfg, recheckEvery: recheckEvery, slices: map[index.Slice]*sliceState{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), armed: map[string]armedRun{}}
}

// Start starts the dispatch and poll loops.
func (t *Trigger) Start() {
	t.wg.Add(2)
	go t.dispatchLoop()
	go t.pollLoop()
}

// Stop stops dispatching and waits for claims in progress. Runs claimed
// ahead of an instant that has not come yet are given back, so that
// another node runs them at their instant.
func (t *Trigger) Stop() {
	close(t.stop)
	t.wg.Wait()
	t.claims.Wait()
	t.armedMu.Lock()
	t.stopped = true
	armed := t.armed
	t.armed = nil
	t.armedMu.Unlock()
	for _, a := range armed {
		if a.timer.Stop() {
			t.cfg.Executor.GiveBack(a.cr)
		}
	}
}

// arm submits cr at its instant, or gives it back if the trigger stopped.
func (t *Trigger) arm(cr store.ClaimedRun) {
	d := cr.Run.DueAt.Sub(t.cfg.Now())
	if d <= 200*time.Microsecond {
		t.cfg.Executor.Submit(cr)
		return
	}
	t.armedMu.Lock()
	defer t.armedMu.Unlock()
	if t.stopped {
		t.cfg.Executor.GiveBack(cr)
		return
	}
	id := cr.Run.ID
	t.armed[id] = armedRun{cr: cr, timer: time.AfterFunc(d, func() {
		t.armedMu.Lock()
		_, ok := t.armed[id]
		delete(t.armed, id)
		t.armedMu.Unlock()
		if ok {
			t.cfg.Executor.Submit(cr)
		}
	})}
}

// Take starts dispatching slice s. Its runs due in the next seconds are
// read from the store in the background, and the rest of the slice by the
// rechecks that follow as its minute goes by (see recheck): reading a whole
// minute of runs at once, for every bucket taken, made the CPU spike that
// delayed the fires of that moment by tens of milliseconds. A slice the
// index does not know is rebuilt whole by the first poll.
func (t *Trigger) Take(s index.Slice) {
	t.mu.Lock()
	if st, ok := t.slices[s]; ok && !st.dropped {
		t.mu.Unlock()
		return
	}
	t.slices[s] = &sliceState{seen: map[seenKey]struct{}{}, checked: t.cfg.Now()}
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.reconcileRange(s, false, s.Start(), t.readUntil(s, t.cfg.Now()))
	}()
}

// Drop stops dispatching slice s (its lock was lost or released). Runs of s
// already claimed still run.
func (t *Trigger) Drop(s index.Slice) {
	t.mu.Lock()
	if st, ok := t.slices[s]; ok {
		st.dropped = true
		if st.queued == 0 {
			delete(t.slices, s)
		}
	}
	t.mu.Unlock()
}

// Held returns the slices being dispatched.
func (t *Trigger) Held() []index.Slice {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]index.Slice, 0, len(t.slices))
	for s, st := range t.slices {
		if !st.dropped {
			out = append(out, s)
		}
	}
	return out
}

// Notify offers runs planned or retried on this node; those in held slices
// are queued at once, the others are left to their slices' owners.
func (t *Trigger) Notify(entries []index.Entry) {
	buckets := t.cfg.Index.Buckets()
	t.mu.Lock()
	n := 0
	for _, e := range entries {
		s := index.SliceOf(e.TimerID, e.DueAt, buckets)
		if st, ok := t.slices[s]; ok && !st.dropped {
			if t.pushLocked(s, st, e) {
				n++
			}
		}
	}
	t.mu.Unlock()
	if n > 0 {
		t.kick()
	}
}

func (t *Trigger) kick() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// pushLocked queues e unless it was seen already. t.mu must be held.
func (t *Trigger) pushLocked(s index.Slice, st *sliceState, e index.Entry) bool {
	k := seenKey{e.RunID, e.DueAt.UnixMilli()}
	if _, ok := st.seen[k]; ok {
		return false
	}
	st.seen[k] = struct{}{}
	st.queued++
	heap.Push(&t.heap, item{entry: e, slice: s, st: st})
	return true
}

func (t *Trigger) push(s index.Slice, entries []index.Entry) {
	t.mu.Lock()
	st, ok := t.slices[s]
	n := 0
	if ok && !st.dropped {
		for _, e := range entries {
			if t.pushLocked(s, st, e) {
				n++
			}
		}
	}
	t.mu.Unlock()
	if n > 0 {
		t.kick()
	}
}

// rebuild reads all of s's pending runs from the store, puts them back in
// the index, marks the slice known there, and queues them: for a slice the
// index lost (Redis flushed or restarted) or never had.
func (t *Trigger) rebuild(s index.Slice) {
	t.reconcileRange(s, true, s.Start(), s.End())
}

// recheck reads the pending runs of s due around now, in
// [now-2·recheckEvery, now+ReadAhead+recheckEvery): consecutive rechecks
// overlap, so every run of the slice is read by one while it is due, and a
// recheck costs the runs of seconds, not of the whole minute. Runs inserted
// after their window has passed are overdue, which is the sweeper's part.
func (t *Trigger) recheck(s index.Slice, now time.Time) {
	from, to := s.Start(), t.readUntil(s, now)
	if f := now.Add(-2 * t.recheckEvery); f.After(from) {
		from = f
	}
	if !from.Before(to) {
		return
	}
	t.reconcileRange(s, false, from, to)
}

// readUntil is where a read of s's runs at now may stop: the next recheck,
// recheckEvery later, reads on from there.
func (t *Trigger) readUntil(s index.Slice, now time.Time) time.Time {
	if e := now.Add(t.cfg.ReadAhead + t.recheckEvery); e.Before(s.End()) {
		return e
	}
	return s.End()
}

// reconcileRange reads s's pending runs due in [from, to), puts them back in
// the index and marks s known there when repair is set, and queues them.
func (t *Trigger) reconcileRange(s index.Slice, repair bool, from, to time.Time) {
	buckets := t.cfg.Index.Buckets()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		runs, err := t.cfg.Store.DueRuns(ctx, from, to, buckets, s.Bucket)
		if err == nil {
			entries := make([]index.Entry, len(runs))
			for i, r := range runs {
				entries[i] = index.Entry{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt}
			}
			if repair && len(entries) > 0 {
				err = t.cfg.Index.Add(ctx, entries...)
			}
			if repair && err == nil {
				err = t.cfg.Index.MarkKnown(ctx, s)
			}
			if err != nil {
				t.cfg.Logger.Warn("repair slice index", "slice", s.String(), "err", err)
			}
			cancel()
			t.mu.Lock()
			if st, ok := t.slices[s]; ok {
				st.ready = true
			}
			t.mu.Unlock()
			t.push(s, entries)
			return
		}
		cancel()
		t.cfg.Logger.Warn("reconcile slice", "slice", s.String(), "attempt", attempt+1, "err", err)
		select {
		case <-t.stop:
			return
		case <-time.After(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second)):
		}
	}
}

func (t *Trigger) pollLoop() {
	defer t.wg.Done()
	tick := time.NewTicker(t.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		t.pollOnce()
	}
}

func (t *Trigger) pollOnce() {
	now := t.cfg.Now()
	until := now.Add(t.cfg.ReadAhead)
	// One train of rechecks at a time: on a slow machine a train can
	// outlast recheckEvery, and the next one waits for it.
	rechecking := t.rechecking.Load()
	t.mu.Lock()
	var held, done, recheck []index.Slice
	for s, st := range t.slices {
		switch {
		case st.dropped || !st.ready:
		case st.queued == 0 && now.After(s.End().Add(t.cfg.DoneGrace)):
			done = append(done, s)
		default:
			held = append(held, s)
			if !rechecking && now.Sub(st.checked) >= t.recheckEvery {
				st.checked = now
				recheck = append(recheck, s)
			}
		}
	}
	t.mu.Unlock()
	if len(recheck) > 0 {
		// One slice after the other, in one goroutine: the rechecks of
		// every held slice come due at the same poll, and run at once
		// they kept both cores of a small machine busy for 15–25 ms,
		// long enough to delay the timers of the fires due then.
		t.rechecking.Store(true)
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer t.rechecking.Store(false)
			for _, s := range recheck {
				t.recheck(s, now)
			}
		}()
	}
	for _, s := range held {
		ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Poll*5)
		entries, known, err := t.cfg.Index.Range(ctx, s, until)
		cancel()
		if err != nil {
			t.cfg.Logger.Warn("poll slice", "slice", s.String(), "err", err)
			continue
		}
		if !known {
			// The index lost the slice (Redis flushed or restarted):
			// rebuild it from the store.
			t.mu.Lock()
			if st, ok := t.slices[s]; ok {
				st.ready = false
			}
			t.mu.Unlock()
			t.wg.Add(1)
			go func() {
				defer t.wg.Done()
				t.rebuild(s)
			}()
			continue
		}
		t.push(s, entries)
	}
	for _, s := range done {
		// One last look at the index: a run may have been added late.
		ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Poll*5)
		entries, known, err := t.cfg.Index.Range(ctx, s, s.End().Add(time.Minute))
		cancel()
		if err != nil {
			continue
		}
		if known && len(entries) > 0 {
			t.push(s, entries)
			if t.queued(s) > 0 {
				continue
			}
		}
		t.mu.Lock()
		delete(t.slices, s)
		t.mu.Unlock()
		if t.cfg.OnDone != nil {
			t.cfg.OnDone(s)
		}
	}
}

func (t *Trigger) queued(s index.Slice) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st, ok := t.slices[s]; ok {
		return st.queued
	}
	return 0
}

const maxClaimBatch = 500

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
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		t.mu.Lock()
		var wait time.Duration = time.Hour
		var batch []item
		now := t.cfg.Now()
		if t.claiming.Load() >= maxClaiming || t.cfg.Executor.Saturated() {
			// Backpressure: let the executor catch up; the runs wait here,
			// late but unclaimed, rather than in flight with their leases
			// running out.
			wait = saturatedWait
		}
		// Once the first run is due for its claim, the runs due within the
		// next claimWindow join it: one claim per window, not one per run,
		// however the instants spread.
		horizon := now.Add(t.cfg.ClaimAhead)
		if t.heap.Len() > 0 && !t.heap[0].entry.DueAt.After(horizon) {
			horizon = horizon.Add(t.cfg.ClaimAhead / 2)
		}
		for wait != saturatedWait && t.heap.Len() > 0 && len(batch) < maxClaimBatch {
			top := t.heap[0]
			if top.entry.DueAt.After(horizon) {
				wait = max(top.entry.DueAt.Sub(now)-t.cfg.ClaimAhead, time.Millisecond)
				break
			}
			heap.Pop(&t.heap)
			if cur := t.slices[top.slice]; cur != top.st || top.st.dropped {
				// Queued by an earlier holding of the slice, since dropped.
				t.doneLocked(top.slice, top.st, 1)
				continue
			}
			batch = append(batch, top)
		}
		if len(batch) == maxClaimBatch {
			wait = 0
		}
		t.mu.Unlock()
		if len(batch) > 0 {
			t.claims.Add(1)
			t.claiming.Add(1)
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
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
	}
}

// doneLocked accounts for n items of holding st of slice s leaving the
// queue; a dropped holding is forgotten with its last item.
func (t *Trigger) doneLocked(s index.Slice, st *sliceState, n int) {
	st.queued -= n
	if st.dropped && st.queued <= 0 && t.slices[s] == st {
		delete(t.slices, s)
	}
}

func (t *Trigger) claimAndSchedule(batch []item) {
	defer t.claims.Done()
	defer func() {
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
		// Give the entries back to the heap, a little later.
		time.Sleep(100 * time.Millisecond)
		t.mu.Lock()
		for _, it := range batch {
			if t.slices[it.slice] == it.st && !it.st.dropped {
				heap.Push(&t.heap, it)
			} else {
				t.doneLocked(it.slice, it.st, 1)
			}
		}
		t.mu.Unlock()
		t.kick()
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
	for _, it := range batch {
		// Settled: the run is running (here or elsewhere) or gone. If it
		// comes back pending at the same instant — given back by this
		// node (its claim went stale) or another one, or requeued — it
		// must be queued again rather than taken for already seen.
		delete(it.st.seen, seenKey{it.entry.RunID, it.entry.DueAt.UnixMilli()})
		t.doneLocked(it.slice, it.st, 1)
	}
	t.mu.Unlock()
	for _, cr := range won {
		t.arm(cr)
	}
}
