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
// shares each timer's id, 48 bytes a fire. Not safe for concurrent use.
type firesHeld struct {
	fires  []loggedFire
	odd    map[int]string    // run ids not of model.RunID's form, by index in fires
	timers map[string]string // one copy of each timer id
}

type loggedFire struct {
	run         [16]byte // model.ParseRunID of the run id, unless in firesHeld.odd
	timerID     string
	sched, recv int64
}

func newFiresHeld() firesHeld { return firesHeld{fires: make([]loggedFire, 0, 1<<16)} }

func (l *firesHeld) add(f fire) {
	run, ok := model.ParseRunID(f.runID)
	if !ok {
		if l.odd == nil {
			l.odd = map[int]string{}
		}
		l.odd[len(l.fires)] = f.runID
	}
	if l.timers == nil {
		l.timers = map[string]string{}
	}
	timer, ok := l.timers[f.timerID]
	if !ok {
		timer = f.timerID
		l.timers[timer] = timer
	}
	l.fires = append(l.fires, loggedFire{run: run, timerID: timer, sched: f.sched, recv: f.recv})
}

func (l *firesHeld) len() int { return len(l.fires) }

// slice returns the fires of [from, to) as fire values.
func (l *firesHeld) slice(from, to int) []fire {
	out := make([]fire, 0, to-from)
	for i := from; i < to; i++ {
		lf := l.fires[i]
		id, ok := l.odd[i]
		if !ok {
			id = hex.EncodeToString(lf.run[:])
		}
		out = append(out, fire{runID: id, timerID: lf.timerID, sched: lf.sched, recv: lf.recv})
	}
	return out
}
