package executor

// This file: lanes — the runs of one receiver sent by a few workers at a
// time, as many more as the receiver's answers call for.

import (
	"container/heap"
	"time"

	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// Laner is implemented by a Runner whose actions go to receivers that are
// best sent to a few at a time (action.HTTPRunner: one lane per scheme and host).
// The executor then runs the submitted runs of one lane on a few workers,
// each of which takes the lane's next run when its own ends, instead of one
// worker per run: a herd of a thousand callbacks due at one instant goes
// out over a few warm connections in order, the way a bare client sends
// it, rather than as a thousand goroutines runnable at once that race for
// the cores and the connections and nearly all land as late as the last.
//
// A lane starts with LaneMinWorkers workers and grows, up to conns, in
// three ways:
//   - a callback out longer than LaneStall (or four times the lane's
//     average answer, when that is longer) stops counting against the
//     lane: each such one lets another run start, so a lane whose
//     callbacks do not come back doubles every LaneStall;
//   - while runs wait in the lane, an answer that came back within twice
//     the quickest one seen raises the limit by one (a receiver a few
//     milliseconds away doubles its lane every round trip);
//   - runs that waited in the lane for LaneStall without a break raise
//     the limit by a quarter, every LaneStall, so that a lane keeps up
//     with what comes due even when its answers' times say nothing.
//
// A receiver that takes a second per callback so gets conns callbacks in
// flight within a few LaneStall; one on loopback that answers about as
// fast as the node can send keeps a few.
//
// A lane grows only while growing pays: at each check (every LaneStall
// while runs wait in it), the callbacks answered since the previous check
// give its throughput. When the lane was widened and does not answer a
// tenth faster than before, the node, not the receiver, is what holds the
// callbacks back (its CPU: a herd on loopback, a loaded machine), and more
// workers would only cost more connections and more of that CPU: for
// LaneHold the lane then grows neither on its backlog nor on quick
// answers (callbacks that stall still let others start). Between two
// checks quick answers at most double it, so that each widening is
// measured before the next. The limit never falls: a lane is dropped,
// and made anew at LaneMinWorkers, when it has no run left.
//
// A run submitted before its instant gets a worker of its own (it waits
// for its instant in it).
type Laner interface {
	// Lane names the receiver of t's action ("" for none: the run gets a
	// worker of its own, as every run of a Runner that is no Laner) and
	// the most of its runs that may be in flight at once.
	Lane(t *model.Timer) (key string, conns int)
}

// HTTPRunner's callbacks go out in lanes: a Lane that no longer matches
// Laner would turn them off without a word.
var _ Laner = (*action.HTTPRunner)(nil)

// LaneMinWorkers is how many runs of a lane may be in flight whatever
// their answers: as many as the bare client's connections that drain a
// herd on loopback fastest (docs/performance.md, "Knobs").
const LaneMinWorkers = 4

// LaneStall is how long a run of a lane may be out before it stops
// counting against the lane's workers.
const LaneStall = 10 * time.Millisecond

// LaneHold is how long a lane does not grow after a widening that did not
// raise its throughput.
const LaneHold = 100 * time.Millisecond

// lanePays is how much faster a wider lane must answer for its widening
// to count as paid.
const lanePays = 1.1

// lane is the state of one receiver's runs; the work queue's mu guards it.
// It exists while it has workers; a run waits in its queue only while it
// has one (a run of a lane with none is admitted at once).
type lane struct {
	key   string
	conns int
	queue runQueue
	slots []*laneSlot
	// limit is how many workers not stalled the lane may have.
	limit  int
	minRTT time.Duration
	// srtt is a moving average of the lane's answers (a quarter weight
	// to the latest).
	srtt time.Duration
	// waitSince is when runs began to wait in the queue without a break
	// (zero while none waits).
	waitSince time.Time
	// armed: a growth check is due (time.AfterFunc).
	armed bool
	// answers counts the lane's runs that ended; checkAt, checkAnswers
	// and checkLimit are the time, answers and limit of its last growth
	// check (checkAt zero: none since runs began to wait).
	answers      int
	checkAt      time.Time
	checkAnswers int
	checkLimit   int
	// lastRate is the answers per second measured between the last two
	// checks, lastLimit the limit then (0: none measured).
	lastRate  float64
	lastLimit int
	// holdUntil: the lane does not grow before it (a widening did not
	// pay).
	holdUntil time.Time
}

// laneSlot is one worker of a lane.
type laneSlot struct {
	since time.Time // the machine's clock: when its current run started
	i     int       // in lane.slots
}

// job is a run for a worker: in a lane (l, s) or not (l nil).
type job struct {
	cr store.ClaimedRun
	l  *lane
	s  *laneSlot
}

// admit reports whether the lane may start another worker at now.
func (l *lane) admit(now time.Time) bool {
	n := len(l.slots)
	if n >= l.conns {
		return false
	}
	if n < l.limit {
		return true
	}
	stalled, after := 0, l.stallAfter()
	for _, s := range l.slots {
		if now.Sub(s.since) >= after {
			stalled++
		}
	}
	return n-stalled < max(l.limit, stalled)
}

// push queues q in the lane.
func (l *lane) push(q queued, now time.Time) {
	if l.queue.Len() == 0 {
		l.waitSince = now
	}
	heap.Push(&l.queue, q)
}

// pop takes the lane's next run.
func (l *lane) pop() queued {
	q := heap.Pop(&l.queue).(queued)
	if l.queue.Len() == 0 {
		l.waitSince, l.checkAt = time.Time{}, time.Time{}
	}
	return q
}

// backlogged raises the limit by a quarter (one at least) when runs have
// waited in the lane for LaneStall without a break: its workers do not
// keep up with what comes due (answers of a few milliseconds at a
// thousand fires a second), whatever their answers' times say.
func (l *lane) backlogged(now time.Time) {
	if l.waitSince.IsZero() || now.Sub(l.waitSince) < LaneStall || now.Before(l.holdUntil) {
		return
	}
	l.limit = min(l.conns, l.limit+max(1, l.limit/4))
	l.waitSince = now
}

// check measures the lane's throughput since its previous check, at the
// limit it had then, and when the lane was widened since the check before
// without answering a tenth faster than in the interval before, holds its
// growth for LaneHold. A lane without answers since (a receiver that does
// not answer) is left as it is.
func (l *lane) check(now time.Time) {
	if !l.checkAt.IsZero() && now.After(l.checkAt) {
		n := l.answers - l.checkAnswers
		rate := float64(n) / now.Sub(l.checkAt).Seconds()
		if n > 0 && l.lastLimit > 0 && l.checkLimit > l.lastLimit && rate < lanePays*l.lastRate {
			l.holdUntil = now.Add(LaneHold)
		}
		l.lastRate, l.lastLimit = rate, l.checkLimit
	} else {
		l.lastRate, l.lastLimit = 0, 0
	}
	l.checkAt, l.checkAnswers, l.checkLimit = now, l.answers, l.limit
}

// stallAfter is how long a run of the lane is out before it stops
// counting against its workers: LaneStall, or four times the lane's
// average answer when that is longer. Answers that slow down because the
// node itself is short of CPU (a herd on loopback, a loaded machine) then
// do not make the lane grow, which would only slow them down more.
func (l *lane) stallAfter() time.Duration { return max(LaneStall, 4*l.srtt) }

func (l *lane) add(now time.Time) *laneSlot {
	s := &laneSlot{since: now, i: len(l.slots)}
	l.slots = append(l.slots, s)
	return s
}

func (l *lane) remove(s *laneSlot) {
	last := l.slots[len(l.slots)-1]
	l.slots[s.i], last.i = last, s.i
	l.slots[len(l.slots)-1] = nil
	l.slots = l.slots[:len(l.slots)-1]
}

// answered adapts the lane's limit to a run that took rtt, while runs wait.
func (l *lane) answered(rtt time.Duration, now time.Time) {
	l.answers++
	if l.minRTT == 0 || rtt < l.minRTT {
		l.minRTT = rtt
	}
	if l.srtt == 0 {
		l.srtt = rtt
	} else {
		l.srtt += (rtt - l.srtt) / 4
	}
	if l.queue.Len() == 0 || now.Before(l.holdUntil) {
		// Nothing waits: the answer says nothing about the limit; or the
		// lane's last widening did not pay.
		return
	}
	if rtt <= 2*l.minRTT && l.limit < 2*max(l.checkLimit, LaneMinWorkers) {
		// At most double between two checks, so that each widening is
		// measured before the next.
		l.limit = min(l.limit+1, l.conns)
	}
}

// laneOf returns the lane key and width of t's action, "" for none.
func (e *Executor) laneOf(t *model.Timer) (string, int) {
	if t == nil {
		return "", 0
	}
	ln, ok := e.cfg.Runners[t.Action.Type].(Laner)
	if !ok {
		return "", 0
	}
	return ln.Lane(t)
}
