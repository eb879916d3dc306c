package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop"
	"github.com/chimehq/chime/internal/engine/sweeper"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/model"
)

// ErrClockSkew is returned by claims of a node whose clock is further off
// the store's than MaxClockSkew.
var ErrClockSkew = model.ErrClockSkew

// ErrNodeIDInUse is returned by Start when a live node with this node's id
// and another address heartbeats: two processes would share one node's
// runs and slices.
var ErrNodeIDInUse = errors.New("node id in use")

// ErrCoordinationMismatch is returned by Start when a live node of the
// store runs another coordination mode than this one: two modes would each
// hand the same slices to a node of their own.
var ErrCoordinationMismatch = errors.New("coordination mode differs from a live node's")

// liveFor is how many heartbeat intervals a node stays in the node list
// after its last heartbeat.
const liveFor = 3

// memberStore is what membership needs of the store: its clock and the
// node list (store.Store implements it).
type memberStore interface {
	Now(ctx context.Context) (time.Time, error)
	Heartbeat(ctx context.Context, n model.Node) error
	ListNodes(ctx context.Context, seenSince time.Time) ([]model.Node, error)
	DeleteNode(ctx context.Context, id string) error
}

// membership is the node's place in the cluster, as a service: it measures
// the node's clock against the store's (and stands the node by when the
// offset is too large), writes the heartbeat that lists the node and its
// slices, and reads the other live nodes back, for the scheduler's fair
// share. It starts first: nothing is claimed before the node knows its
// offset from the store's clock.
type membership struct {
	store        memberStore
	nodeID, addr string
	interval     time.Duration // heartbeat
	maxSkew      time.Duration
	clock        *clock.Corrected
	sweep        *sweeper.Sweeper
	slices       func() []string // held now, for the heartbeat
	pool         func() (inUse, capacity int)
	handlers     func() []string // registered on this node, for the heartbeat
	// lockTTL is the slice locks' TTL: how long a node of an earlier
	// version that ran lazy claims may go on starting runs after it last
	// held a slice (checkModes).
	lockTTL time.Duration
	// coordination is the node's coordination mode, published with its
	// heartbeat and checked against the live nodes' at join.
	coordination string
	log          *slog.Logger
	metrics      *metrics.Metrics

	// skew holds why the node must not claim (its clock is too far off the
	// store's), or nil.
	skew atomic.Pointer[string]
	// modes holds why the node must not take slices (a live node of an
	// earlier version may still start runs without a claim write), or nil.
	modes atomic.Pointer[string]
	// joinedAt is when this node's first heartbeat was written (0 before);
	// lazyPeers is what checkModes knows of each live lazy peer. The
	// heartbeat loop alone uses both.
	joinedAt  time.Time
	lazyPeers map[lazyPeer]lazyState
	liveNodes atomic.Int64
	peers     atomic.Pointer[[]model.Node] // other live nodes, from the last heartbeat
	live      atomic.Pointer[[]model.Node] // every live node, this one included, from the last heartbeat
	startedAt time.Time

	loop startstop.Loop
}

// lazyPeer names one process of a node of an earlier version that runs
// lazy claims.
type lazyPeer struct {
	id      string
	started time.Time
}

// lazyState is what checkModes knows of a lazy peer: whether it was seen
// holding slices, and, once found clear, when its lazy attempts have
// ended (until; zero when it never started any beside this node).
type lazyState struct {
	held, clear bool
	until       time.Time
}

func newMembership(m *membership) *membership {
	m.liveNodes.Store(1)
	why := "the node list has not been read yet: taking no slices until it is (a live node may run lazy claims)"
	m.modes.Store(&why)
	m.lazyPeers = map[lazyPeer]lazyState{}
	m.loop = startstop.Loop{Name: "heartbeat loop", Interval: m.interval, Clock: m.clock, First: m.join, Pass: m.heartbeat}
	return m
}

// join measures the clock (its error is Start's), writes the first
// heartbeat, and gives back the runs that this node id held when its
// previous process died: they are nobody's now.
func (m *membership) join(ctx context.Context) error {
	if err := m.measureClock(ctx); err != nil {
		return err
	}
	if err := m.checkIDFree(ctx); err != nil {
		return err
	}
	if err := m.checkCoordination(ctx); err != nil {
		return err
	}
	m.startedAt = m.clock.Now()
	m.heartbeat(ctx)
	if _, err := m.sweep.Recover(ctx, m.nodeID); err != nil {
		m.log.Warn("recover the runs of this node's previous process", "err", err)
	}
	return nil
}

// checkIDFree refuses to join while another process runs with this node's
// id: a node of this id listed with another address whose heartbeat goes
// on. A record left by this id's previous process, which died, does not
// count: its heartbeat stops, so a record seen again after one heartbeat
// interval unchanged is not live. Nodes without an address (the library's)
// are not compared.
func (m *membership) checkIDFree(ctx context.Context) error {
	if m.addr == "" {
		return nil
	}
	other := func() (model.Node, bool, error) {
		nodes, err := m.store.ListNodes(ctx, m.clock.Now().Add(-liveFor*m.interval))
		if err != nil {
			return model.Node{}, false, fmt.Errorf("read the node list: %w", err)
		}
		for _, n := range nodes {
			if n.ID == m.nodeID && n.Addr != "" && n.Addr != m.addr {
				return n, true, nil
			}
		}
		return model.Node{}, false, nil
	}
	first, found, err := other()
	if err != nil || !found {
		return err
	}
	t := time.NewTimer(m.interval + m.interval/2)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	again, found, err := other()
	if err != nil || !found || !again.SeenAt.After(first.SeenAt) {
		return err
	}
	return fmt.Errorf("%w: node %s already runs at %s (last heartbeat %s ago); this process would run as %s at %s: "+
		"give each process its own --node-id or --data-dir, or stop the other",
		ErrNodeIDInUse, m.nodeID, again.Addr, m.clock.Now().Sub(again.SeenAt).Round(time.Millisecond), m.nodeID, m.addr)
}

// checkCoordination fails with ErrCoordinationMismatch, naming the nodes,
// when a live node other than this one publishes another coordination mode
// than this node's.
func (m *membership) checkCoordination(ctx context.Context) error {
	if m.coordination == "" {
		return nil
	}
	nodes, err := m.store.ListNodes(ctx, m.clock.Now().Add(-liveFor*m.interval))
	if err != nil {
		return fmt.Errorf("read the node list: %w", err)
	}
	for _, n := range nodes {
		if n.ID != m.nodeID && n.Coordination != "" && n.Coordination != m.coordination {
			return fmt.Errorf("%w: node %s (%s) runs --coordination %s, this node (%s) %s; give every node of a cluster the same mode",
				ErrCoordinationMismatch, n.ID, n.Addr, n.Coordination, m.nodeID, m.coordination)
		}
	}
	return nil
}

// Start joins the cluster and starts the heartbeat loop.
func (m *membership) Start(ctx context.Context) error { return m.loop.Start(ctx) }

// Stop stops the heartbeat loop; leave removes the node from the list.
func (m *membership) Stop(ctx context.Context) error { return m.loop.Stop(ctx) }

// leave removes this node from the node list, so that the others count it
// out of the fair share at once.
func (m *membership) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.store.DeleteNode(ctx, m.nodeID); err != nil {
		m.log.Warn("remove node", "err", err)
	}
}

// standby reports whether the node must hold no slice and sweep nothing:
// its clock is too far off the store's, or a live node of an earlier
// version may still start runs without a claim write (checkModes). Only
// the first makes the node unready (Engine.Ready): a node that waits for
// its peers serves the API, so that a rolling upgrade goes on.
func (m *membership) standby() bool { return m.skew.Load() != nil || m.modes.Load() != nil }

// checkModes stands this node by while a live node of an earlier version
// that runs lazy claims (model.ClaimsLazy) may still start runs without a
// claim write: a claim with a write does not see such a start, and this
// node does not fence the slices it takes, so the two must not share
// slices (docs/cluster.md, "Rolling upgrades"). Such a node itself stands
// by, hands its slices back and starts nothing lazily once it has read a
// live node that claims with a write. So a lazy peer is clear once its
// heartbeat, written after it could read this node's (SeenAt later than
// this node's first heartbeat by more than the clock bound), lists no
// slice; this node takes slices one lock TTL after every live lazy peer
// was first found clear, when the lazy attempts that peer started under
// its last lock have ended. A lazy process that started after this node
// joined, and never seen holding a slice, needs no wait: it read this
// node's heartbeat at its own join, before its scheduler started. A lazy
// peer that dies counts until it leaves the live list.
func (m *membership) checkModes(peers []model.Node) {
	seen := map[lazyPeer]bool{}
	var waiting []string
	var until time.Time
	for _, p := range peers {
		if p.ClaimMode != model.ClaimsLazy {
			continue
		}
		k := lazyPeer{p.ID, p.StartedAt}
		seen[k] = true
		st := m.lazyPeers[k]
		if len(p.Slices) > 0 || m.joinedAt.IsZero() || !p.SeenAt.After(m.joinedAt.Add(m.maxSkew)) {
			st = lazyState{held: st.held || len(p.Slices) > 0}
			m.lazyPeers[k] = st
			waiting = append(waiting, p.ID)
			continue
		}
		if !st.clear {
			st.clear, st.until = true, p.SeenAt.Add(m.lockTTL)
			if !st.held && p.StartedAt.After(m.joinedAt.Add(m.maxSkew)) {
				st.until = time.Time{}
			}
			m.lazyPeers[k] = st
		}
		if st.until.After(until) {
			until = st.until
		}
	}
	for k := range m.lazyPeers {
		if !seen[k] {
			delete(m.lazyPeers, k)
		}
	}
	if m.metrics != nil {
		m.metrics.ClaimModesDisagree.Set(float64(len(seen)))
	}
	var why string
	switch {
	case len(waiting) > 0:
		why = fmt.Sprintf("live nodes of an earlier version run lazy claims and may start runs without a claim write: %s; "+
			"taking no slices until they hold none (docs/cluster.md, \"Rolling upgrades\")", strings.Join(waiting, ", "))
	case m.clock.Now().Before(until):
		why = fmt.Sprintf("live nodes of an earlier version that ran lazy claims hold no slice now; taking slices after %s, "+
			"when their last lazy attempts have ended (docs/cluster.md, \"Rolling upgrades\")", until.UTC().Format(time.RFC3339Nano))
	default:
		if old := m.modes.Swap(nil); old != nil {
			m.log.Info("no live node starts runs without a claim write; taking slices")
		}
		return
	}
	if old := m.modes.Swap(&why); old == nil || *old != why {
		m.log.Warn(why)
	}
}

func (m *membership) mayClaim() error {
	if why := m.skew.Load(); why != nil {
		return fmt.Errorf("%w: %s", ErrClockSkew, *why)
	}
	return nil
}

// measureClock measures this node's offset from the store's clock and
// corrects the node's clock by it. A node further off than maxSkew stands
// by: it claims nothing and hands its slices over until a later
// measurement finds it within bounds again.
func (m *membership) measureClock(ctx context.Context) error {
	offset, rtt, err := clock.Estimate(m.clock.Base(), 3, func() (time.Time, error) { return m.store.Now(ctx) })
	if err != nil {
		return fmt.Errorf("measure the clock against the store: %w", err)
	}
	if rtt > m.maxSkew/2 {
		// Too slow an answer to tell the offset within the bound; keep the
		// last one.
		m.log.Warn("clock measurement discarded: the store answered too slowly", "rtt", rtt)
		return nil
	}
	m.clock.SetOffset(offset)
	skew := -offset // this node's clock minus the store's
	if m.metrics != nil {
		m.metrics.ClockSkew.Set(skew.Seconds())
	}
	if skew.Abs() > m.maxSkew {
		why := fmt.Sprintf("clock skew: this node's clock is %s off the store's, more than --max-clock-skew %s; not claiming runs",
			skew.Round(time.Millisecond), m.maxSkew)
		if old := m.skew.Swap(&why); old == nil {
			m.log.Error(why, "skew", skew)
		}
		return nil
	}
	if old := m.skew.Swap(nil); old != nil {
		m.log.Info("clock skew back within bounds; claiming again", "skew", skew)
	}
	return nil
}

// heartbeat measures the clock, writes this node's record and reads the
// other live nodes.
func (m *membership) heartbeat(ctx context.Context) {
	if err := m.measureClock(ctx); err != nil {
		m.log.Warn("heartbeat", "err", err)
	}
	now := m.clock.Now()
	n := model.Node{ID: m.nodeID, Addr: m.addr, StartedAt: m.startedAt, SeenAt: now, Slices: m.slices(), ClaimMode: model.ClaimsEager,
		Standby: m.skew.Load() != nil, Coordination: m.coordination}
	if m.pool != nil {
		n.PoolInUse, n.PoolCapacity = m.pool()
	}
	n.Handlers = []string{}
	if m.handlers != nil {
		if h := m.handlers(); h != nil {
			n.Handlers = h
		}
	}
	if err := m.store.Heartbeat(ctx, n); err != nil {
		m.log.Warn("heartbeat", "err", err)
		return
	}
	if m.joinedAt.IsZero() {
		m.joinedAt = m.clock.Now() // the write is in: a peer's later read sees it
	}
	nodes, err := m.store.ListNodes(ctx, now.Add(-liveFor*m.interval))
	if err == nil && len(nodes) > 0 {
		m.liveNodes.Store(int64(claimingNodes(m.nodeID, nodes)))
		if m.metrics != nil {
			m.metrics.NodesLive.Set(float64(len(nodes)))
		}
		peers := make([]model.Node, 0, len(nodes))
		for _, nd := range nodes {
			if nd.ID != m.nodeID {
				peers = append(peers, nd)
			}
		}
		m.peers.Store(&peers)
		m.live.Store(&nodes)
		m.checkModes(peers)
	}
}

// claimingNodes counts the nodes that share the slices: those of nodes
// not standing by, and self (whose own standby the scheduler sees).
func claimingNodes(self string, nodes []model.Node) int {
	n := 0
	for _, nd := range nodes {
		if nd.ID == self || !nd.Standby {
			n++
		}
	}
	return max(n, 1)
}

// nodes returns the live nodes, this one included, as of the last
// heartbeat (nil before the first).
func (m *membership) nodes() []model.Node {
	if p := m.live.Load(); p != nil {
		return *p
	}
	return nil
}

// quietAfter is how long after its last heartbeat a listed node counts as
// gone for the runs placed on it: an interval and a half, so that a live
// node, whose heartbeat read fresh is at most an interval old (and the
// write's round trip), never does, and a node that stopped is left out
// within 3 s with the default 2 s heartbeat.
func (m *membership) quietAfter() time.Duration { return m.interval + m.interval/2 }

// liveIDs returns the ids of the live nodes that claim, this one always
// among them, and whether a node of the node list was left out: nil before
// a heartbeat has read the node list (the sweeper then frees no placed
// run). A peer standing by (model.Node.Standby) is left out, and so is a
// peer whose last heartbeat is more than quietAfter old: the sweeper frees
// the runs placed on them (sweeper.SweepPlaced). The list of the last
// heartbeat may be an interval old, so before it takes a peer for quiet it
// reads the list again (and keeps it as the last one); when that read
// fails, it answers nil.
func (m *membership) liveIDs() ([]string, bool) {
	nodes := m.nodes()
	if nodes == nil {
		return nil, false
	}
	now := m.clock.Now()
	quiet := func(n model.Node) bool { return n.ID != m.nodeID && now.Sub(n.SeenAt) > m.quietAfter() }
	if slices.ContainsFunc(nodes, quiet) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fresh, err := m.store.ListNodes(ctx, now.Add(-liveFor*m.interval))
		cancel()
		if err != nil {
			m.log.Warn("read the node list", "err", err)
			return nil, false
		}
		m.live.Store(&fresh)
		nodes, now = fresh, m.clock.Now()
	}
	ids := []string{m.nodeID}
	left := false
	for _, n := range nodes {
		switch {
		case n.ID == m.nodeID:
		case n.Standby || quiet(n):
			left = true
		default:
			ids = append(ids, n.ID)
		}
	}
	return ids, left
}

// peerNeedsWork reports whether another live node held fewer than share
// slices of minute mn at its last heartbeat. When the peers read at this
// node's last heartbeat say so, the node list is read again, so that a
// peer that stopped since (and left the list) does not count. A peer whose
// last heartbeat is more than two intervals old does not count either: a
// node that died is still listed for liveFor heartbeats, but takes
// nothing. Either would leave a slice handed over to it undispatched until
// taken back.
func (m *membership) peerNeedsWork(mn int64, share int) bool {
	p := m.peers.Load()
	if p == nil || !m.needy(*p, mn, share) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	nodes, err := m.store.ListNodes(ctx, m.clock.Now().Add(-liveFor*m.interval))
	if err != nil {
		m.log.Warn("read the node list", "err", err)
		return false
	}
	return m.needy(nodes, mn, share)
}

// joiningFor is how many heartbeat intervals after its start a node that
// holds no slice yet counts as joining (peerJoining): long enough for the
// others to read it and hand it slices, short enough that a node that
// cannot take any keeps the others from the free slices only for a while.
const joiningFor = 5

// peerJoining reports whether another node, with a heartbeat at most two
// intervals old and not standing by, started less than joiningFor
// intervals ago and listed no slice at its last heartbeat, as of this
// node's last heartbeat (it reads no store: the scheduler asks on every
// tick). While one does, the nodes at their share leave it the current
// minute's free slices (scheduler.Config.PeerJoining). It tries a free
// slice within LockTTL/3 and a tick, as any node does, so the slices of a
// node that died are taken over within the usual bound; if it dies itself
// before it holds one, the others take them again once its heartbeat is
// two intervals old (or joiningFor intervals after its start).
func (m *membership) peerJoining() bool {
	p := m.peers.Load()
	if p == nil {
		return false
	}
	now := m.clock.Now()
	for _, nd := range *p {
		if nd.ID == m.nodeID || nd.Standby || now.Sub(nd.SeenAt) > 2*m.interval {
			continue
		}
		if len(nd.Slices) == 0 && now.Sub(nd.StartedAt) < joiningFor*m.interval {
			return true
		}
	}
	return false
}

// needy reports whether one of nodes other than this one, with a heartbeat
// at most two intervals old and not standing by, held fewer than share
// slices of minute mn.
func (m *membership) needy(nodes []model.Node, mn int64, share int) bool {
	prefix := fmt.Sprintf("%d:", mn)
	now := m.clock.Now()
	for _, nd := range nodes {
		if nd.ID == m.nodeID || nd.Standby || now.Sub(nd.SeenAt) > 2*m.interval {
			continue
		}
		n := 0
		for _, s := range nd.Slices {
			if strings.HasPrefix(s, prefix) {
				n++
			}
		}
		if n < share {
			return true
		}
	}
	return false
}
