package trigger

import (
	"container/heap"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
)

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

// Take starts dispatching slice s. Its runs due in the next seconds are
// read from the store in the background, and the rest of the slice by the
// rechecks that follow as its minute goes by (see recheck): reading a whole
// minute of runs at once, for every bucket taken, made the CPU spike that
// delayed the fires of that moment by tens of milliseconds. A slice the
// index does not know is rebuilt whole by the first poll.
func (t *Trigger) Take(s index.Slice) {
	t.mu.Lock()
	if st, ok := t.slices[s]; ok && !st.dropped || t.stopping {
		t.mu.Unlock()
		return
	}
	t.slices[s] = &sliceState{seen: map[seenKey]struct{}{}, checked: t.cfg.Clock.Now()}
	// Under mu, ordered with Stop's: the scheduler calls Take from its own
	// goroutine, which wg does not count, so an Add once Stop waits on wg
	// would race with the Wait.
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		t.reconcileRange(s, s.Start(), t.readUntil(s, t.cfg.Clock.Now()))
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
// due within the next ReadAhead are queued at once, the others are left to
// their slices' owners, or to the polls of the index (and the rechecks of
// the store) that read them as their instant nears. A planning pass offers
// each timer's next fires, up to a minute ahead: queued at once, the
// trigger held about 20 s of runs at 10,000 fires/s where its polls hold 3.
func (t *Trigger) Notify(entries []index.Entry) {
	buckets := t.cfg.Index.Buckets()
	until := t.cfg.Clock.Now().Add(t.cfg.ReadAhead)
	t.mu.Lock()
	n := 0
	for _, e := range entries {
		if !e.DueAt.Before(until) {
			continue
		}
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
	heap.Push(&t.heap, item{entry: e, slice: s, st: st, prio: t.priorityLocked(e.TimerID)})
	return true
}

func (t *Trigger) push(s index.Slice, entries []index.Entry) {
	t.pushPolled(s, nil, entries, index.Mark{})
}

// pushPolled queues entries as push does. With st, they were read from the
// index for that holding of s up to mark, which it records; nothing is
// queued if s is no longer held by st (dropped, or taken again since).
func (t *Trigger) pushPolled(s index.Slice, st *sliceState, entries []index.Entry, mark index.Mark) {
	t.mu.Lock()
	cur, ok := t.slices[s]
	n := 0
	if ok && !cur.dropped && (st == nil || st == cur) {
		for _, e := range entries {
			if t.pushLocked(s, cur, e) {
				n++
			}
		}
		if st != nil {
			st.mark = mark
		}
	}
	t.mu.Unlock()
	if n > 0 {
		t.kick()
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

// doneLocked accounts for n items of holding st of slice s leaving the
// queue; a dropped holding is forgotten with its last item.
func (t *Trigger) doneLocked(s index.Slice, st *sliceState, n int) {
	st.queued -= n
	if st.dropped && st.queued <= 0 && t.slices[s] == st {
		delete(t.slices, s)
	}
}
