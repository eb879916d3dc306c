package executor

// This file: the work queue — the submitted runs waiting for a worker, by
// priority, and the lanes (lanes.go) that hold back a receiver's runs.

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chimehq/chime/internal/store"
)

// workQueue holds the submitted runs until a worker takes them: at most
// size workers run at once, each taking the next run when its own ends
// (next). Runs wait higher timer priority first, then earlier due, then in
// the order pushed; a Laner's runs also wait for their lane.
type workQueue struct {
	size int
	// start starts a worker for a job that a lane's check made (armLocked).
	start func(job)

	// mu guards queue, seq, workers (the workers running) and lanes.
	mu      sync.Mutex
	queue   runQueue
	seq     uint64
	workers int
	// lanes are the lanes with workers, by key. laneQueued counts the runs
	// waiting in their queues (changed under mu; the recorder reads it to
	// hold a herd's results until the herd is sent).
	lanes      map[string]*lane
	laneQueued atomic.Int64
}

// push queues qs and returns the jobs of the workers that may start now.
func (w *workQueue) push(qs []queued, now time.Time) []job {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range qs {
		w.seq++
		q.seq = w.seq
		heap.Push(&w.queue, q)
	}
	var start []job
	for w.workers < w.size {
		j, ok := w.takeLocked(now)
		if !ok {
			break
		}
		w.workers++
		start = append(start, j)
	}
	return start
}

// held is the number of runs running or waiting for a worker.
func (w *workQueue) held() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.workers + w.queue.Len() + int(w.laneQueued.Load())
}

// next takes the next run for the worker that just performed (ran) or
// gave back prev: the next run of prev's lane, unless a run waiting for
// the pool comes before it, or else the executor's next queued run. When
// there is none, it ends the calling worker. more are the workers prev's
// lane may have besides, to start.
func (w *workQueue) next(prev job, ran bool) (j job, more []job, ok bool) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if l := prev.l; l != nil {
		if ran {
			l.answered(now.Sub(prev.s.since), now)
		}
		l.remove(prev.s)
		if l.queue.Len() > 0 && (w.queue.Len() == 0 || !w.queue.first(w.queue[0], l.queue[0])) && l.admit(now) {
			w.laneQueued.Add(-1)
			j = job{cr: l.pop().cr, l: l, s: l.add(now)}
			return j, w.growLocked(l, now), true
		}
		w.dropIdleLocked(l)
	}
	if j, ok = w.takeLocked(now); !ok {
		w.workers--
	}
	return j, nil, ok
}

// laneLocked returns the lane of key, made when there is none. w.mu held.
func (w *workQueue) laneLocked(key string, conns int) *lane {
	l := w.lanes[key]
	if l == nil {
		if w.lanes == nil {
			w.lanes = map[string]*lane{}
		}
		l = &lane{key: key, conns: max(conns, 1), limit: min(LaneMinWorkers, max(conns, 1))}
		w.lanes[key] = l
	}
	return l
}

// takeLocked takes the next run of the queue for a free worker: a run of a
// lane that may not start another worker goes to its lane's queue instead.
// w.mu held.
func (w *workQueue) takeLocked(now time.Time) (job, bool) {
	for w.queue.Len() > 0 {
		q := heap.Pop(&w.queue).(queued)
		if q.lane == "" {
			return job{cr: q.cr}, true
		}
		l := w.laneLocked(q.lane, q.conns)
		if l.admit(now) {
			return job{cr: q.cr, l: l, s: l.add(now)}, true
		}
		l.push(q, now)
		w.laneQueued.Add(1)
		w.armLocked(l)
	}
	return job{}, false
}

// growLocked starts the workers that lane l may have more of, while runs
// wait in it and the pool has room, and returns their jobs. w.mu held.
func (w *workQueue) growLocked(l *lane, now time.Time) []job {
	var more []job
	for l.queue.Len() > 0 && w.workers < w.size && l.admit(now) {
		w.workers++
		w.laneQueued.Add(-1)
		more = append(more, job{cr: l.pop().cr, l: l, s: l.add(now)})
	}
	if l.queue.Len() > 0 {
		w.armLocked(l)
	}
	return more
}

// armLocked arranges a check of lane l after LaneStall, when its runs out
// may count as stalled. w.mu held.
func (w *workQueue) armLocked(l *lane) {
	if l.armed {
		return
	}
	l.armed = true
	time.AfterFunc(LaneStall, func() {
		w.mu.Lock()
		l.armed = false
		var more []job
		if w.lanes[l.key] == l {
			now := time.Now()
			l.check(now)
			l.backlogged(now)
			more = w.growLocked(l, now)
		}
		w.mu.Unlock()
		for _, j := range more {
			w.start(j)
		}
	})
}

// dropIdleLocked drops lane l when it has no worker left; the runs still
// in its queue go back to the executor's queue. w.mu held.
func (w *workQueue) dropIdleLocked(l *lane) {
	if len(l.slots) > 0 {
		return
	}
	for l.queue.Len() > 0 {
		w.laneQueued.Add(-1)
		heap.Push(&w.queue, l.pop())
	}
	if w.lanes[l.key] == l {
		delete(w.lanes, l.key)
	}
}

// queued is a submitted run waiting for a worker.
type queued struct {
	cr   store.ClaimedRun
	prio int
	seq  uint64
	// lane and conns are the run's lane (Laner), "" for none.
	lane  string
	conns int
}

// runQueue is a heap of queued runs: higher priority, then earlier due,
// then submitted first.
type runQueue []queued

func (q runQueue) Len() int           { return len(q) }
func (q runQueue) Less(i, j int) bool { return q.first(q[i], q[j]) }

// first reports whether a comes before b.
func (runQueue) first(a, b queued) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if c := a.cr.Run.DueAt.Compare(b.cr.Run.DueAt); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}
func (q runQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *runQueue) Push(x any)   { *q = append(*q, x.(queued)) }
func (q *runQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = queued{}
	*q = old[:len(old)-1]
	return it
}
