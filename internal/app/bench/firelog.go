package bench

import (
	"encoding/hex"

	"github.com/chimehq/chime/model"
)

// firesHeld is how the in-process receiver and the handler log hold the fires
// while the node runs. They run in the node's process, and at 10,000 fires/s
// a minute of fires held as fire values (a run id and a timer id string
// each, 112 bytes a fire) was 70 MiB of the memory the bench reports as the
// node's: a loggedFire keeps the run id as the 16 bytes it spells and
// shares each timer's id, 48 bytes a fire, kept in blocks (see blocks).
// Not safe for concurrent use.
type firesHeld struct {
	fires  blocks[loggedFire]
	odd    map[int]string    // run ids not of model.RunID's form, by index
	timers map[string]string // one copy of each timer id
}

// blocks is a list that grows by blocks of blockLen, never copying what it
// holds: one slice grown by append held up to twice its values' size, and
// copied them at each doubling (the bench's fire log was 25 MiB live for
// 260,000 fires at the peak of a 10,000 fires/s run, in the memory the
// bench reports as the node's). Not safe for concurrent use.
type blocks[T any] struct {
	full [][]T // full blocks, then the one being filled
	n    int   // values held
}

// blockLen is the number of values in one block of blocks.
const blockLen = 4096

func (b *blocks[T]) add(v T) {
	if b.n%blockLen == 0 {
		b.full = append(b.full, make([]T, 0, blockLen))
	}
	last := &b.full[len(b.full)-1]
	*last = append(*last, v)
	b.n++
}

func (b *blocks[T]) len() int { return b.n }

func (b *blocks[T]) at(i int) T { return b.full[i/blockLen][i%blockLen] }

type loggedFire struct {
	run         [model.RunIDLen]byte // model.ParseRunID of the run id, unless in firesHeld.odd
	timerID     string
	sched, recv int64
}

func newFiresHeld() firesHeld { return firesHeld{} }

func (l *firesHeld) add(f fire) {
	run, ok := model.ParseRunID(f.runID)
	if !ok {
		if l.odd == nil {
			l.odd = map[int]string{}
		}
		l.odd[l.fires.len()] = f.runID
	}
	if l.timers == nil {
		l.timers = map[string]string{}
	}
	timer, ok := l.timers[f.timerID]
	if !ok {
		timer = f.timerID
		l.timers[timer] = timer
	}
	l.fires.add(loggedFire{run: run, timerID: timer, sched: f.sched, recv: f.recv})
}

func (l *firesHeld) len() int { return l.fires.len() }

// slice returns the fires of [from, to) as fire values.
func (l *firesHeld) slice(from, to int) []fire {
	out := make([]fire, 0, to-from)
	for i := from; i < to; i++ {
		lf := l.fires.at(i)
		id, ok := l.odd[i]
		if !ok {
			id = hex.EncodeToString(lf.run[:])
		}
		out = append(out, fire{runID: id, timerID: lf.timerID, sched: lf.sched, recv: lf.recv})
	}
	return out
}
