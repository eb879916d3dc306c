package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/planner"
)

// extender writes the rest of the plans that saves began
// (planner.Planner.Extend), off the save's path: a save writes the runs of
// its first pass interval only, and the extender the rest of many saves at
// once, in time order, so that the runs of one second share the pages
// they go to (a save's own runs land one page each among the other
// timers' runs of their seconds). It has no goroutine while nothing
// waits: the save that finds it idle starts one, which gathers for
// extendGather while fewer than extendBatch timers wait, writes a batch,
// and ends when none is left. A timer it drops (the engine stopping, a
// store error) is planned by the next periodic pass: the save's plan
// covers a pass interval.
type extender struct {
	plan *planner.Planner
	log  *slog.Logger

	mu      sync.Mutex
	queue   []*model.Timer
	running bool
	stopped bool
	stopc   chan struct{} // closed by stop
	wg      sync.WaitGroup
}

// extendBatch is the most timers one ExtendPlans call writes the rest of
// (about 25 runs each for an every-second timer: a transaction of a few
// hundred runs, which joins the group commit on SQLite), and extendGather
// how long a batch waits for others to fill it. Measured with `chime bench
// --scenario api` (docs/performance.md, "Create, update, enable (fifth
// session)"): 48 timers a batch wrote 13% fewer WAL bytes than 16 but
// made the saves that shared its transactions slower (SaveTimer p99
// 51–56 ms against 40–49 at load 5–7), and a gather of 1 s instead of
// 200 ms changed neither.
const (
	extendBatch  = 16
	extendGather = 200 * time.Millisecond
)

// extendTimeout bounds one batch.
const extendTimeout = 30 * time.Second

// add queues t, a timer as its save wrote it.
func (x *extender) add(t *model.Timer) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.stopped {
		return
	}
	if x.stopc == nil {
		x.stopc = make(chan struct{})
	}
	x.queue = append(x.queue, t)
	if x.running {
		return
	}
	x.running = true
	x.wg.Add(1)
	go x.run(x.stopc)
}

// run writes batches until the queue is empty.
func (x *extender) run(stopc chan struct{}) {
	defer x.wg.Done()
	for {
		x.mu.Lock()
		short := len(x.queue) < extendBatch
		x.mu.Unlock()
		if short {
			t := time.NewTimer(extendGather)
			select {
			case <-t.C:
			case <-stopc:
				t.Stop()
			}
		}
		x.mu.Lock()
		n := min(len(x.queue), extendBatch)
		if n == 0 || x.stopped {
			x.queue = nil
			x.running = false
			x.mu.Unlock()
			return
		}
		batch := x.queue[:n:n]
		x.queue = x.queue[n:]
		x.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), extendTimeout)
		if err := x.plan.Extend(ctx, batch); err != nil {
			x.log.Warn("plan: the rest of saved timers' plans is left to the next pass", "timers", len(batch), "err", err)
		}
		cancel()
	}
}

// stop drops what is queued and waits for the batch being written.
func (x *extender) stop() {
	x.mu.Lock()
	if !x.stopped {
		x.stopped = true
		x.queue = nil
		if x.stopc != nil {
			close(x.stopc)
		}
	}
	x.mu.Unlock()
	x.wg.Wait()
}
