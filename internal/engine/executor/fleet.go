package executor

// This file: runs placed on nodes. A handler run claimed by a node that
// lacks its handler is handed to a live node that has it (or is skipped at
// once, handler_missing, when none has); a fire of a broadcast or sharded timer is split into
// shards placed on the live nodes; and the runs placed on this node are
// claimed by the directed loop. The claim stays the exactly-once guard: a
// placed run is pending with a target node, which alone may claim it
// (store.Fleet). See docs/fleet.md.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// DefaultDirectedPoll is how often a node looks for the runs placed on it
// (Config.DirectedPoll): how late, at most, a shard or a handed-off run
// starts after its instant, besides the store's answer.
const DefaultDirectedPoll = 100 * time.Millisecond

// ErrNoLiveHandler is the error of a run whose handler no live node has:
// the run ends at once, skipped with the reason model.SkipHandlerMissing.
var ErrNoLiveHandler = errors.New("handler registered on no live node")

// hasHandler reports whether this node has the handler name.
func (e *Executor) hasHandler(name string) bool {
	return e.cfg.HasHandler != nil && e.cfg.HasHandler(name)
}

// liveNodes returns the live nodes that claim, this one always among
// them: a node standing by (model.Node.Standby) gets no work.
func (e *Executor) liveNodes() []model.Node {
	var nodes []model.Node
	if e.cfg.Nodes != nil {
		nodes = slices.DeleteFunc(slices.Clone(e.cfg.Nodes()), func(n model.Node) bool { return n.Standby && n.ID != e.cfg.NodeID })
	}
	if !slices.ContainsFunc(nodes, func(n model.Node) bool { return n.ID == e.cfg.NodeID }) {
		nodes = append(nodes, model.Node{ID: e.cfg.NodeID})
	}
	slices.SortFunc(nodes, func(a, b model.Node) int { return strings.Compare(a.ID, b.ID) })
	return nodes
}

// canRun returns the live nodes that can perform t's action: those that
// advertise its handler (this node: that has it), or every live node for
// the other action types.
func (e *Executor) canRun(t *model.Timer) []model.Node {
	nodes := e.liveNodes()
	if t.Action.Type != model.ActionHandler || t.Action.Handler == nil {
		return nodes
	}
	name := t.Action.Handler.Name
	return slices.DeleteFunc(nodes, func(n model.Node) bool {
		if n.ID == e.cfg.NodeID {
			return !e.hasHandler(name)
		}
		return !n.HasHandler(name)
	})
}

// misplaced reports whether the claimed run r of t is a handler run whose
// handler this node lacks (a fire to split is not: its shards are placed).
func (e *Executor) misplaced(r *model.Run, t *model.Timer) bool {
	if t.Action.Type != model.ActionHandler || t.Action.Handler == nil || e.hasHandler(t.Action.Handler.Name) {
		return false
	}
	return !t.Policy.Splits() || r.Shard != nil
}

// handOffAhead hands the claimed runs of won whose handler this node lacks
// to live nodes that have it, at once (in the background), ahead of their
// instants, so that their node claims them in time; it returns the others.
// A misplaced run that no live node can take stays: execute skips it (model.SkipHandlerMissing).
func (e *Executor) handOffAhead(won []store.ClaimedRun) []store.ClaimedRun {
	var away []store.ClaimedRun
	keep := won[:0:0]
	for _, cr := range won {
		if e.misplaced(cr.Run, cr.Timer) && len(e.canRun(cr.Timer)) > 0 {
			away = append(away, cr)
		} else {
			keep = append(keep, cr)
		}
	}
	if len(away) == 0 {
		return won
	}
	go func() {
		for _, cr := range away {
			e.placeElsewhere(cr.Run, cr.Timer)
		}
	}()
	return keep
}

// placeElsewhere handles a claimed handler run whose handler this node
// lacks, and reports whether it did: the run is handed to a live node that
// advertises the handler, due at its instant, or, when none does, ends at
// once, skipped (model.SkipHandlerMissing, no retry).
func (e *Executor) placeElsewhere(run *model.Run, t *model.Timer) bool {
	if !e.misplaced(run, t) {
		return false
	}
	name := t.Action.Handler.Name
	others := e.canRun(t)
	if len(others) == 0 {
		e.skipMissing(run, t, fmt.Errorf("%w: no such handler %q on any live node (live: %s)", ErrNoLiveHandler, name, nodeIDs(e.liveNodes())))
		return true
	}
	target := others[spread(run.ID, len(others))].ID
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	defer e.forget(leaseOf(run))
	if err := e.cfg.Store.Handoff(ctx, run, target, run.DueAt); err != nil {
		// The claim's lease expires and the sweeper hands the run on.
		e.cfg.Logger.Warn("hand run to a node that has its handler", runAttrs(run.TimerID, run.ID, run.Attempt, "handler", name, "to", target, "err", err)...)
		return true
	}
	e.cfg.Logger.Debug("run handed to a node that has its handler", runAttrs(run.TimerID, run.ID, run.Attempt, "handler", name, "to", target)...)
	return true
}

// skipMissing ends a claimed run whose handler no live node has at once,
// without a retry: skipped, with the reason model.SkipHandlerMissing and
// err as its error.
func (e *Executor) skipMissing(run *model.Run, t *model.Timer, err error) {
	now := e.cfg.Clock.Now()
	e.markFinished(run)
	e.cfg.Logger.Warn("run skipped: its handler is on no live node", runAttrs(run.TimerID, run.ID, run.Attempt, "err", err)...)
	e.rec.add(model.Result{RunID: run.ID, Node: e.cfg.NodeID, Attempt: run.Attempt,
		Status: model.RunSkipped, Reason: model.SkipHandlerMissing, StartedAt: now, FinishedAt: now, Error: err.Error()}, t)
}

// split splits the claimed fire run of a broadcast or sharded timer into
// its shards, placed on the live nodes that can run them: broadcast, one
// per such node; shards, t.Policy.Shards of them, on distinct nodes while
// there are enough, else round the nodes again. The fire then waits,
// running without a lease, until the sweeper sees its shards all ended
// (store.FinishFires).
func (e *Executor) split(run *model.Run, t *model.Timer, now time.Time) {
	nodes := e.canRun(t)
	if len(nodes) == 0 {
		name := ""
		if t.Action.Handler != nil {
			name = t.Action.Handler.Name
		}
		e.skipMissing(run, t, fmt.Errorf("%w: no such handler %q on any live node (live: %s)", ErrNoLiveHandler, name, nodeIDs(e.liveNodes())))
		return
	}
	total := t.Policy.Shards
	if t.Policy.Mode == model.ModeBroadcast {
		total = len(nodes)
	}
	total = min(max(total, 1), model.MaxShards)
	off := 0
	if t.Policy.Mode != model.ModeBroadcast {
		off = spread(run.ID, len(nodes)) // fires of many timers start on different nodes
	}
	shards := make([]*model.Run, total)
	for i := range shards {
		shards[i] = &model.Run{Shard: &model.Shard{Index: i, Total: total}, DueAt: now,
			TargetNode: nodes[(i+off)%len(nodes)].ID}
	}
	// Forget the claim first: the lease keeper must not extend the lease
	// that StartFire removes (a fire waits without one).
	e.forget(leaseOf(run))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.cfg.Store.StartFire(ctx, run, shards); err != nil {
		// Fenced off, or the store failed: then the claim's lease expires
		// and the sweeper gives the fire to be split again (the shards
		// that exist are kept).
		e.cfg.Logger.Warn("split fire into shards", runAttrs(run.TimerID, run.ID, run.Attempt, "shards", total, "err", err)...)
		return
	}
	e.cfg.Logger.Debug("fire split into shards", runAttrs(run.TimerID, run.ID, run.Attempt, "shards", total)...)
	select {
	case e.kickDirected <- struct{}{}:
	default:
	}
}

// spread picks one of n by the hash of id.
func spread(id string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

func nodeIDs(nodes []model.Node) string {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	return strings.Join(ids, ", ")
}

// directedLoop claims the runs placed on this node, due within the next
// poll, and submits them (an early one waits in execute for its instant).
func (e *Executor) directedLoop() {
	tick := e.cfg.Local.NewTicker(e.cfg.DirectedPoll)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C():
		case <-e.kickDirected:
		}
		e.claimDirected()
	}
}

// claimDirected claims and submits the runs placed on this node now due.
func (e *Executor) claimDirected() {
	if e.Saturated() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	runs, err := e.cfg.Store.DirectedRuns(ctx, e.cfg.NodeID, e.cfg.Clock.Now().Add(e.cfg.DirectedPoll), 1000)
	if err != nil || len(runs) == 0 {
		if err != nil {
			e.cfg.Logger.Warn("runs placed on this node", "err", err)
		}
		return
	}
	entries := make([]index.Entry, len(runs))
	for i, r := range runs {
		entries[i] = index.Entry{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt}
	}
	won, err := e.Claim(ctx, entries)
	if err != nil {
		if !errors.Is(err, ErrShutdown) {
			e.cfg.Logger.Warn("claim runs placed on this node", "runs", len(entries), "err", err)
		}
		return
	}
	if len(won) > 0 {
		e.SubmitAll(won)
	}
}
