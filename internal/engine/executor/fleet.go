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
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
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

// router places runs on the nodes of the fleet: it hands a claimed
// handler run this node cannot perform to a live node that can (or skips
// it at once, handler_missing, when none can), splits the fires of
// broadcast and sharded timers into shards over the live nodes, and claims
// the runs placed on this node (the directed loop). The executor asks it
// about each claimed run; it reaches back into the executor only through
// the hooks below.
type router struct {
	nodeID     string
	hasHandler func(name string) bool // Config.HasHandler; nil: none
	nodes      func() []model.Node    // Config.Nodes; nil: this node alone
	store      fleetStore
	clock      clock.Clock // the cluster's: due times
	local      clock.Clock // this process's: the directed loop's ticker
	poll       time.Duration
	logger     *slog.Logger
	stop       <-chan struct{} // closed when the executor stops
	// kick wakes the directed loop (a fire was just split here).
	kick chan struct{}

	// The executor's hooks: forget drops a claim from the attempts in
	// flight, finish moves a claimed attempt to finished (a skip), record
	// queues a result, and saturated, claim and submit take in the runs
	// placed on this node.
	forget    func(store.Lease)
	finish    func(*model.Run)
	record    func(model.Result, *model.Timer)
	saturated func() bool
	claim     func(ctx context.Context, entries []index.Entry) ([]store.ClaimedRun, error)
	submit    func([]store.ClaimedRun)
}

// fleetStore is what the router needs of the store (store.Fleet).
type fleetStore interface {
	Handoff(ctx context.Context, r *model.Run, target string, dueAt time.Time) error
	DirectedRuns(ctx context.Context, node string, until time.Time, limit int) ([]*model.Run, error)
	StartFire(ctx context.Context, fire *model.Run, shards []*model.Run) error
}

// newRouter returns the router of e.
func newRouter(e *Executor) *router {
	return &router{nodeID: e.cfg.NodeID, hasHandler: e.cfg.HasHandler, nodes: e.cfg.Nodes, store: e.cfg.Store,
		clock: e.cfg.Clock, local: e.cfg.Local, poll: e.cfg.DirectedPoll, logger: e.cfg.Logger,
		stop: e.stop, kick: make(chan struct{}, 1),
		forget: e.keep.forget, finish: e.keep.markFinished, record: func(r model.Result, t *model.Timer) { e.rec.add(r, t) },
		saturated: e.Saturated, claim: e.Claim, submit: e.SubmitAll}
}

// has reports whether this node has the handler name.
func (r *router) has(name string) bool {
	return r.hasHandler != nil && r.hasHandler(name)
}

// liveNodes returns the live nodes that claim, this one always among
// them: a node standing by (model.Node.Standby) gets no work.
func (r *router) liveNodes() []model.Node {
	var nodes []model.Node
	if r.nodes != nil {
		nodes = slices.DeleteFunc(slices.Clone(r.nodes()), func(n model.Node) bool { return n.Standby && n.ID != r.nodeID })
	}
	if !slices.ContainsFunc(nodes, func(n model.Node) bool { return n.ID == r.nodeID }) {
		nodes = append(nodes, model.Node{ID: r.nodeID})
	}
	slices.SortFunc(nodes, func(a, b model.Node) int { return strings.Compare(a.ID, b.ID) })
	return nodes
}

// canRun returns the live nodes that can perform t's action: those that
// advertise its handler (this node: that has it), or every live node for
// the other action types.
func (r *router) canRun(t *model.Timer) []model.Node {
	nodes := r.liveNodes()
	if t.Action.Type != model.ActionHandler || t.Action.Handler == nil {
		return nodes
	}
	name := t.Action.Handler.Name
	return slices.DeleteFunc(nodes, func(n model.Node) bool {
		if n.ID == r.nodeID {
			return !r.has(name)
		}
		return !n.HasHandler(name)
	})
}

// misplaced reports whether run, a claimed run of t, is a handler run
// whose handler this node lacks (a fire to split is not: its shards are placed).
func (r *router) misplaced(run *model.Run, t *model.Timer) bool {
	if t.Action.Type != model.ActionHandler || t.Action.Handler == nil || r.has(t.Action.Handler.Name) {
		return false
	}
	return !t.Policy.Splits() || run.Shard != nil
}

// handOffAhead hands the claimed runs of won whose handler this node lacks
// to live nodes that have it, at once (in the background), ahead of their
// instants, so that their node claims them in time; it returns the others.
// A misplaced run that no live node can take stays: execute skips it (model.SkipHandlerMissing).
func (r *router) handOffAhead(won []store.ClaimedRun) []store.ClaimedRun {
	var away []store.ClaimedRun
	keep := won[:0:0]
	for _, cr := range won {
		if r.misplaced(cr.Run, cr.Timer) && len(r.canRun(cr.Timer)) > 0 {
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
			r.placeElsewhere(cr.Run, cr.Timer)
		}
	}()
	return keep
}

// placeElsewhere handles a claimed handler run whose handler this node
// lacks, and reports whether it did: the run is handed to a live node that
// advertises the handler, due at its instant, or, when none does, ends at
// once, skipped (model.SkipHandlerMissing, no retry).
func (r *router) placeElsewhere(run *model.Run, t *model.Timer) bool {
	if !r.misplaced(run, t) {
		return false
	}
	name := t.Action.Handler.Name
	others := r.canRun(t)
	if len(others) == 0 {
		r.skipMissing(run, t, fmt.Errorf("%w: no such handler %q on any live node (live: %s)", ErrNoLiveHandler, name, nodeIDs(r.liveNodes())))
		return true
	}
	target := others[spread(run.ID, len(others))].ID
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	defer r.forget(leaseOf(run))
	if err := r.store.Handoff(ctx, run, target, run.DueAt); err != nil {
		// The claim's lease expires and the sweeper hands the run on.
		r.logger.Warn("hand run to a node that has its handler", runAttrs(run.TimerID, run.ID, run.Attempt, "handler", name, "to", target, "err", err)...)
		return true
	}
	r.logger.Debug("run handed to a node that has its handler", runAttrs(run.TimerID, run.ID, run.Attempt, "handler", name, "to", target)...)
	return true
}

// skipMissing ends a claimed run whose handler no live node has at once,
// without a retry: skipped, with the reason model.SkipHandlerMissing and
// err as its error.
func (r *router) skipMissing(run *model.Run, t *model.Timer, err error) {
	now := r.clock.Now()
	r.finish(run)
	r.logger.Warn("run skipped: its handler is on no live node", runAttrs(run.TimerID, run.ID, run.Attempt, "err", err)...)
	r.record(model.Result{RunID: run.ID, Node: r.nodeID, Attempt: run.Attempt,
		Status: model.RunSkipped, Reason: model.SkipHandlerMissing, StartedAt: now, FinishedAt: now, Error: err.Error()}, t)
}

// split splits the claimed fire run of a broadcast or sharded timer into
// its shards, placed on the live nodes that can run them: broadcast, one
// per such node; shards, t.Policy.Shards of them, on distinct nodes while
// there are enough, else round the nodes again. The fire then waits,
// running without a lease, until the sweeper sees its shards all ended
// (store.FinishFires).
func (r *router) split(run *model.Run, t *model.Timer, now time.Time) {
	nodes := r.canRun(t)
	if len(nodes) == 0 {
		name := ""
		if t.Action.Handler != nil {
			name = t.Action.Handler.Name
		}
		r.skipMissing(run, t, fmt.Errorf("%w: no such handler %q on any live node (live: %s)", ErrNoLiveHandler, name, nodeIDs(r.liveNodes())))
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
	r.forget(leaseOf(run))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.store.StartFire(ctx, run, shards); err != nil {
		// Fenced off, or the store failed: then the claim's lease expires
		// and the sweeper gives the fire to be split again (the shards
		// that exist are kept).
		r.logger.Warn("split fire into shards", runAttrs(run.TimerID, run.ID, run.Attempt, "shards", total, "err", err)...)
		return
	}
	r.logger.Debug("fire split into shards", runAttrs(run.TimerID, run.ID, run.Attempt, "shards", total)...)
	select {
	case r.kick <- struct{}{}:
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
func (r *router) directedLoop() {
	tick := r.local.NewTicker(r.poll)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C():
		case <-r.kick:
		}
		r.claimDirected()
	}
}

// claimDirected claims and submits the runs placed on this node now due.
func (r *router) claimDirected() {
	if r.saturated() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	runs, err := r.store.DirectedRuns(ctx, r.nodeID, r.clock.Now().Add(r.poll), 1000)
	if err != nil || len(runs) == 0 {
		if err != nil {
			r.logger.Warn("runs placed on this node", "err", err)
		}
		return
	}
	entries := make([]index.Entry, len(runs))
	for i, run := range runs {
		entries[i] = index.EntryOf(run)
	}
	won, err := r.claim(ctx, entries)
	if err != nil {
		if !errors.Is(err, ErrShutdown) {
			r.logger.Warn("claim runs placed on this node", "runs", len(entries), "err", err)
		}
		return
	}
	if len(won) > 0 {
		r.submit(won)
	}
}
