package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"
)

// Progress counts the store calls of every simulation in the process: a
// watchdog outside the bubble sees from it that a simulation is stuck
// (see the package doc).
var Progress atomic.Int64

// errInjected is what a failed call returns: a store or lock that did not
// answer.
var errInjected = errors.New("sim: injected fault")

// errDead is what a killed process's calls return (it makes none: its
// engine is being torn down with every write refused).
var errDead = errors.New("sim: process killed")

// window is a span of simulated time with a fault in it.
type window struct {
	from, to time.Time
	kind     string // "outage", "stall", "slow", "lost", "pause", "indexdelay"
	delay    time.Duration
}

func (w window) has(t time.Time) bool { return !t.Before(w.from) && t.Before(w.to) }

// writeOps are the store calls that change rows: the ones whose reply a
// fault may lose after the write applied, and that a slow commit delays.
var writeOps = map[string]bool{
	"ClaimRuns": true, "FinishRuns": true, "ExtendLeases": true,
	"Requeue": true, "Release": true, "RescheduleRun": true, "SetRunStatus": true, "StartFire": true,
	"InsertPlanned": true, "InsertRuns": true, "Handoff": true, "SetPlannedUntil": true,
	"FinishFires": true, "UntargetRuns": true,
}

// nodeIO is one process of one node: every call it makes to the store, the
// index and the locks passes its faults. A restart makes a new nodeIO; the
// killed one refuses every call from then on.
type nodeIO struct {
	w    *world
	node string
	gen  int

	mu      sync.Mutex
	dead    bool
	killed  chan struct{} // closed at the kill
	windows []window      // this node's fault windows, from the seed
}

// pausedUntil returns the end of the pause t falls in, or the zero time.
func (n *nodeIO) pausedUntil(t time.Time) time.Time {
	for _, w := range n.windows {
		if w.kind == "pause" && w.has(t) {
			return w.to
		}
	}
	return time.Time{}
}

// wait sleeps d, returning early with errDead when the process is killed.
func (n *nodeIO) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-n.killed:
		return errDead
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *nodeIO) isDead() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dead
}

// frozen waits out a pause: a frozen process makes no progress, whatever
// its timers say.
func (n *nodeIO) frozen(ctx context.Context) error {
	for {
		if n.isDead() {
			return errDead
		}
		until := n.pausedUntil(time.Now())
		if until.IsZero() {
			return nil
		}
		// A frozen process does not see its context end either.
		if err := n.wait(context.WithoutCancel(ctx), time.Until(until)); err != nil {
			return err
		}
	}
}

// chance reports, from the seed, the node, the call and the instant (not
// from the order of calls), whether a call at now meets a fault of
// probability p.
func (n *nodeIO) chance(op string, now time.Time, p float64) bool {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%s/%d", n.w.seed, n.node, op, now.UnixNano())
	return float64(h.Sum64()%1_000_000) < p*1_000_000
}

// before is called before a store call reaches the store.
func (n *nodeIO) before(ctx context.Context, op string) error {
	if err := n.frozen(ctx); err != nil {
		return err
	}
	now := time.Now()
	for _, w := range n.windows {
		if !w.has(now) {
			continue
		}
		switch w.kind {
		case "outage":
			return fmt.Errorf("%s: %w", op, errInjected)
		case "stall":
			// A stalled store answers after the stall, or the caller
			// gives up.
			if err := n.wait(ctx, time.Until(w.to)); err != nil {
				return err
			}
		}
	}
	n.w.storeCalls.Add(1)
	Progress.Add(1)
	return nil
}

// after is called once the store answered.
func (n *nodeIO) after(ctx context.Context, op string, err *error) {
	now := time.Now()
	if writeOps[op] && *err == nil {
		for _, w := range n.windows {
			if !w.has(now) {
				continue
			}
			switch w.kind {
			case "slow":
				_ = n.wait(context.WithoutCancel(ctx), w.delay)
			case "lost":
				if n.chance(op, now, 0.3) {
					*err = fmt.Errorf("%s: reply lost: %w", op, errInjected)
				}
			}
		}
	}
	if e := n.frozen(ctx); e != nil && *err == nil {
		*err = e
	}
}

// indexCall is called before an index or lock call.
func (n *nodeIO) indexCall(ctx context.Context, op string) error {
	if err := n.frozen(ctx); err != nil {
		return err
	}
	now := time.Now()
	for _, w := range n.windows {
		if w.kind == "indexdelay" && w.has(now) {
			if err := n.wait(ctx, w.delay); err != nil {
				return err
			}
		}
	}
	return nil
}
