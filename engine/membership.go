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

	"github.com/chimehq/chime/clock"
	"github.com/chimehq/chime/internal/startstop"
	"github.com/chimehq/chime/metrics"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
	"github.com/chimehq/chime/sweeper"
)

// ErrClockSkew is returned by claims of a node whose clock is further off
// the store's than MaxClockSkew.
var ErrClockSkew = errors.New("clock skew")

// ErrCoordinationMismatch is returned by Start when a live node of the
// store runs another coordination mode than this one: two modes would each
// hand the same slices to a node of their own.
var ErrCoordinationMismatch = errors.New("coordination mode differs from a live node's")

// liveFor is how many heartbeat intervals a node stays in the node list
// after its last heartbeat.
const liveFor = 3

// membership is the node's place in the cluster, as a service: it measures
// the node's clock against the store's (and stands the node by when the
// offset is too large), writes the heartbeat that lists the node and its
// slices, and reads the other live nodes back, for the scheduler's fair
// share. It starts first: nothing is claimed before the node knows its
// offset from the store's clock.
type membership struct {
	store        store.Store
	nodeID, addr string
	interval     time.Duration // heartbeat
	maxSkew      time.Duration
	clock        *clock.Corrected
	sweep        *sweeper.Sweeper
	slices       func() []string // held now, for the heartbeat
	pool         func() (inUse, capacity int)
	handlers     func() []string // registered on this node, for the heartbeat
	// lazy: this node starts runs with lazy claims; it then takes no slice
	// while a live peer does not (modes).
	lazy bool
	// localLocks: the slice locks live in this process (Config.LocalLocks).
	localLocks bool
	// coordination is the node's coordination mode, published with its
	// heartbeat and checked against the live nodes' at join.
	coordination string
	// prevClean: with localLocks, this node id's previous process left the
	// node list after a clean stop (or there was none), read at join.
	prevClean atomic.Bool
	log       *slog.Logger
	metrics   *metrics.Metrics

	// skew holds why the node must not claim (its clock is too far off the
	// store's), or nil.
	skew atomic.Pointer[string]
	// modes holds why the node must not take slices (it runs lazy claims
	// and a live peer does not), or nil.
	modes     atomic.Pointer[string]
	liveNodes atomic.Int64
	peers     atomic.Pointer[[]model.Node] // other live nodes, from the last heartbeat
	live      atomic.Pointer[[]model.Node] // every live node, this one included, from the last heartbeat
	startedAt time.Time

	loop startstop.Loop
}

func newMembership(m *membership) *membership {
	m.liveNodes.Store(1)
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
	if err := m.checkCoordination(ctx); err != nil {
		return err
	}
	if m.localLocks {
		nodes, err := m.store.ListNodes(ctx, time.Time{})
		if err != nil {
			return fmt.Errorf("read the node list: %w", err)
		}
		m.prevClean.Store(!slices.ContainsFunc(nodes, func(n model.Node) bool { return n.ID == m.nodeID }))
	}
	m.startedAt = m.clock.Now()
	m.heartbeat(ctx)
	if _, err := m.sweep.Recover(ctx, m.nodeID); err != nil {
		m.log.Warn("recover the runs of this node's previous process", "err", err)
	}
	return nil
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
// out of the fair share at once. With local locks a stop that was not
// clean (a slice released without its lazy attempts promoted, a result
// not recorded) leaves the node listed: its next process then fences
// what this one may have started (previousLeftClean).
func (m *membership) leave(clean bool) {
	if m.localLocks && !clean {
		m.log.Warn("stopped with lazy attempts or results not recorded: the next start fences this node's slices")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.store.DeleteNode(ctx, m.nodeID); err != nil {
		m.log.Warn("remove node", "err", err)
	}
}

// standby reports whether the node must hold no slice and sweep nothing:
// its clock is too far off the store's, or it runs lazy claims beside a
// live node that claims with a write. Only the first makes the node unready
// (Engine.Ready): a node that waits for its peers to agree on the claim mode
// serves the API, so that a rolling upgrade goes on.
func (m *membership) standby() bool { return m.skew.Load() != nil || m.modes.Load() != nil }

// previousLeftClean reports, with local locks, whether this node id's
// previous process stopped clean (or there was none): its slices need no
// fence when this process first takes them (scheduler.Config.FreshClean).
func (m *membership) previousLeftClean() bool { return m.localLocks && m.prevClean.Load() }

func (m *membership) claimMode() string {
	if m.lazy {
		return model.ClaimsLazy
	}
	return model.ClaimsEager
}

// checkModes stands a node with lazy claims by while a live peer claims
// with a write (ClaimsEager, or a version that does not tell): a lazy start
// writes nothing a claim with a write would see, and a node that claims
// with a write does not fence the slices it takes over, so the two must
// not share slices (docs/guarantees.md, "Lazy claims"). The node with
// lazy claims steps back, not the other: a rolling upgrade from a version
// without them keeps the old nodes at work until the last one leaves, and
// a cluster of nodes told different modes still fires, on the eager ones.
func (m *membership) checkModes(peers []model.Node) {
	if !m.lazy {
		return
	}
	var eager, older []string
	for _, p := range peers {
		if m.localLocks && (p.StartedAt.Before(m.startedAt) || p.StartedAt.Equal(m.startedAt) && p.ID < m.nodeID) {
			older = append(older, p.ID)
		}
		if p.ClaimMode != model.ClaimsLazy {
			mode := p.ClaimMode
			if mode == "" {
				mode = "an earlier version"
			}
			eager = append(eager, fmt.Sprintf("%s (%s)", p.ID, mode))
		}
	}
	if m.metrics != nil {
		m.metrics.ClaimModesDisagree.Set(float64(len(eager) + len(older)))
	}
	var why string
	switch {
	case len(eager) > 0:
		why = fmt.Sprintf("claim modes disagree: this node runs lazy claims and live nodes claim with a write: %s; "+
			"taking no slices until they leave or run lazy claims (docs/cluster.md, \"Claim modes\")", strings.Join(eager, ", "))
	case len(older) > 0:
		why = fmt.Sprintf("this node's slice locks are its own (no --redis, no --file-locks) and older live nodes share its store: %s; "+
			"two such nodes would start the same runs lazily, so this one takes no slices (docs/cluster.md, \"Claim modes\")", strings.Join(older, ", "))
	default:
		if old := m.modes.Swap(nil); old != nil {
			m.log.Info("every live node runs lazy claims; taking slices again")
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
	n := model.Node{ID: m.nodeID, Addr: m.addr, StartedAt: m.startedAt, SeenAt: now, Slices: m.slices(), ClaimMode: m.claimMode(), Coordination: m.coordination}
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
	nodes, err := m.store.ListNodes(ctx, now.Add(-liveFor*m.interval))
	if err == nil && len(nodes) > 0 {
		m.liveNodes.Store(int64(len(nodes)))
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

// nodes returns the live nodes, this one included, as of the last
// heartbeat (nil before the first).
func (m *membership) nodes() []model.Node {
	if p := m.live.Load(); p != nil {
		return *p
	}
	return nil
}

// liveIDs returns the ids of the live nodes as of the last heartbeat, this
// one always among them; nil before a heartbeat has read the node list (the
// sweeper then frees no placed run).
func (m *membership) liveIDs() []string {
	if m.nodes() == nil {
		return nil
	}
	ids := []string{m.nodeID}
	for _, n := range m.nodes() {
		if n.ID != m.nodeID {
			ids = append(ids, n.ID)
		}
	}
	return ids
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

// needy reports whether one of nodes other than this one, with a heartbeat
// at most two intervals old, held fewer than share slices of minute mn.
func (m *membership) needy(nodes []model.Node, mn int64, share int) bool {
	prefix := fmt.Sprintf("%d:", mn)
	now := m.clock.Now()
	for _, nd := range nodes {
		if nd.ID == m.nodeID || now.Sub(nd.SeenAt) > 2*m.interval {
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
