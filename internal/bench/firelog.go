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
// shares each timer's id, 48 bytes a fire. The fires are kept in blocks of
// fireBlock: one slice grown by append held up to twice the fires' size,
// and copied them at each doubling (25 MiB live for 260,000 fires at the
// peak of a 10,000 fires/s run). Not safe for concurrent use.
type firesHeld struct {
	blocks [][]loggedFire    // full blocks, then the one being filled
	n      int               // fires held
	odd    map[int]string    // run ids not of model.RunID's form, by index
	timers map[string]string // one copy of each timer id
}

// fireBlock is the number of fires in one block of firesHeld (192 KiB).
const fireBlock = 4096

type loggedFire struct {
	run         [16]byte // model.ParseRunID of the run id, unless in firesHeld.odd
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
		l.odd[l.n] = f.runID
	}
	if l.timers == nil {
		l.timers = map[string]string{}
	}
	timer, ok := l.timers[f.timerID]
	if !ok {
		timer = f.timerID
		l.timers[timer] = timer
	}
	if l.n%fireBlock == 0 {
		l.blocks = append(l.blocks, make([]loggedFire, 0, fireBlock))
	}
	last := &l.blocks[len(l.blocks)-1]
	*last = append(*last, loggedFire{run: run, timerID: timer, sched: f.sched, recv: f.recv})
	l.n++
}

func (l *firesHeld) len() int { return l.n }

// slice returns the fires of [from, to) as fire values.
func (l *firesHeld) slice(from, to int) []fire {
	out := make([]fire, 0, to-from)
	for i := from; i < to; i++ {
		lf := l.blocks[i/fireBlock][i%fireBlock]
		id, ok := l.odd[i]
		if !ok {
			id = hex.EncodeToString(lf.run[:])
		}
		out = append(out, fire{runID: id, timerID: lf.timerID, sched: lf.sched, recv: lf.recv})
	}
	return out
}
