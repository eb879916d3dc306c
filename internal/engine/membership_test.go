package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/engine/sweeper"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// refStore is a store whose clock is set by the test.
type refStore struct {
	store.Store
	mu  sync.Mutex
	now time.Time
}

func (s *refStore) Now(context.Context) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now, nil
}

func (s *refStore) set(t time.Time) {
	s.mu.Lock()
	s.now = t
	s.mu.Unlock()
}

// TestMembershipSkew: the membership measures the node's offset at Start
// and at every heartbeat of its clock, corrects the clock by it, and
// stands the node by while the offset is beyond MaxClockSkew.
func TestMembershipSkew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sq, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	base := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	st := &refStore{Store: sq, now: base.Now().Add(300 * time.Millisecond)}
	corrected := clock.NewCorrected(base)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	mt := metrics.New(reg)
	m := newMembership(&membership{store: st, nodeID: "n1", interval: 2 * time.Second, maxSkew: time.Second,
		clock: corrected, sweep: sweeper.New(sweeper.Config{Store: st, Index: memindex.New(1), Clock: corrected}),
		slices: func() []string { return nil }, log: log, metrics: mt})
	m.loop.Passed.Init(t)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop(ctx) })
	if got := corrected.Offset(); got != 300*time.Millisecond {
		t.Fatalf("offset after Start = %v, want 300ms", got)
	}
	if m.standby() || m.mayClaim() != nil {
		t.Fatal("standing by within the bound")
	}
	if got := gaugeValue(t, reg, "chime_nodes_live"); got != 1 {
		t.Fatalf("chime_nodes_live after Start = %v, want 1", got)
	}
	if got := gaugeValue(t, reg, "chime_clock_skew_seconds"); got != -0.3 {
		t.Fatalf("chime_clock_skew_seconds after Start = %v, want -0.3 (the node is 300ms behind the store)", got)
	}
	testenv.Eventually(t, 10*time.Second, "the heartbeat ticker", func() (bool, string) { return base.Waiters() == 1, "" })

	tests := []struct {
		name    string
		ahead   time.Duration // store's clock minus the node's
		standby bool
	}{
		{"node 5s behind", 5 * time.Second, true},
		{"back within bounds", -200 * time.Millisecond, false},
		{"node 2s ahead", -2 * time.Second, true},
		{"back again", 0, false},
	}
	for _, tt := range tests {
		// The store's clock first, then the heartbeat that measures it.
		st.set(base.Now().Add(2 * time.Second).Add(tt.ahead))
		base.Advance(2 * time.Second)
		m.loop.Passed.Wait()
		if m.standby() != tt.standby {
			t.Fatalf("%s: standby = %v, want %v", tt.name, m.standby(), tt.standby)
		}
		if err := m.mayClaim(); (err != nil) != tt.standby || (err != nil && !errors.Is(err, ErrClockSkew)) {
			t.Fatalf("%s: mayClaim = %v", tt.name, err)
		}
		if got := corrected.Offset(); got != tt.ahead {
			t.Fatalf("%s: offset = %v, want %v", tt.name, got, tt.ahead)
		}
		// The heartbeat tells the others: they place no work on a node
		// that stands by, and free what they had placed on it.
		if ns := m.nodes(); len(ns) != 1 || ns[0].Standby != tt.standby {
			t.Fatalf("%s: listed nodes = %+v, want n1 with standby %v", tt.name, ns, tt.standby)
		}
	}
}

// TestLiveIDsLeaveOutStandby: the live nodes that the sweeper keeps runs
// placed on are those that claim: a peer standing by is not among them.
func TestLiveIDsLeaveOutStandby(t *testing.T) {
	t.Parallel()
	base := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	m := &membership{nodeID: "n1", interval: 2 * time.Second, clock: clock.NewCorrected(base)}
	now := base.Now()
	nodes := []model.Node{{ID: "n1", SeenAt: now}, {ID: "n2", SeenAt: now, Standby: true}, {ID: "n3", SeenAt: now}}
	m.live.Store(&nodes)
	if got, left := m.liveIDs(); !slices.Equal(got, []string{"n1", "n3"}) || !left {
		t.Errorf("liveIDs = %v, %v; want [n1 n3], true", got, left)
	}
}

// TestPlacedRunFreedWhenTargetStops: a run placed on a node (a shard or a
// hand-off) is anybody's again, due now, once the node's last heartbeat is
// quietAfter old (3 s with the 2 s heartbeat), at the next placed-run pass
// (500 ms): within 3.5 s of the node's stop, however old this node's own
// read of the node list. The run placed on a node that goes on
// heartbeating stays placed, though this node's list of the last
// heartbeat makes it look quiet: the list is read again first.
func TestPlacedRunFreedWhenTargetStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, base, member := testMembers(t)
	m := member("n1", nil)
	sw := sweeper.New(sweeper.Config{Store: st, Index: memindex.New(1), Clock: m.clock, LiveNodes: m.liveIDs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t0 := m.clock.Now()
	tm := &model.Timer{ID: "t1", App: "a", Name: "n", Schedule: "@every 1h", Timezone: "UTC", Enabled: true,
		Action: model.Action{Type: model.ActionHTTP}, CreatedAt: t0, UpdatedAt: t0}
	if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
		t.Fatal(err)
	}
	place := func(target string, at time.Time) string {
		r := &model.Run{ID: model.RunID(tm.ID, at), TimerID: tm.ID, ScheduledAt: at, DueAt: at}
		if _, err := st.InsertRuns(ctx, []*model.Run{r}); err != nil {
			t.Fatal(err)
		}
		won, err := st.ClaimRuns(ctx, []store.Claim{{RunID: r.ID, Node: "n1", LeaseUntil: at.Add(time.Second), Now: t0, DueBy: at.Add(time.Millisecond)}})
		if err != nil || len(won) != 1 {
			t.Fatalf("claim = %v, %v", won, err)
		}
		if err := st.Handoff(ctx, won[0].Run, target, at); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	beat := func(id string) {
		if err := st.Heartbeat(ctx, model.Node{ID: id, StartedAt: t0, SeenAt: m.clock.Now(), ClaimMode: model.ClaimsEager}); err != nil {
			t.Fatal(err)
		}
	}
	target := func(id string) (string, time.Time) {
		r, err := st.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r.TargetNode, r.DueAt
	}
	// n2 stops right after its heartbeat at t0; n3 heartbeats every 2 s;
	// this node reads the node list once, at t0.
	beat("n2")
	beat("n3")
	m.heartbeat(ctx)
	onStopped := place("n2", t0.Add(time.Second))
	onLive := place("n3", t0.Add(2*time.Second))
	const pass = 500 * time.Millisecond
	var freedAt time.Duration
	for el := time.Duration(0); el <= 8*time.Second; el += pass {
		if el > 0 {
			base.Advance(pass)
		}
		if el%(2*time.Second) == 0 {
			beat("n3")
		}
		sw.SweepPlaced(ctx)
		if node, due := target(onStopped); freedAt == 0 && node == "" {
			freedAt = el
			if !due.Equal(m.clock.Now()) {
				t.Errorf("freed run due %v, want now (%v)", due, m.clock.Now())
			}
		}
		if node, _ := target(onLive); node != "n3" {
			t.Fatalf("+%v: the run placed on n3, which heartbeats, is placed on %q", el, node)
		}
	}
	if freedAt <= m.quietAfter() || freedAt > m.quietAfter()+pass {
		t.Errorf("the run placed on the stopped node freed at +%v, want within (%v, %v]", freedAt, m.quietAfter(), m.quietAfter()+pass)
	}
}

// gaugeValue returns the value of the unlabelled gauge name in g.
func gaugeValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestMembershipClaimModes: a node publishes "eager" and takes no slice
// (standby, still ready) before it has read the node list, nor while a
// live node of an earlier version that runs lazy claims may start runs
// without a claim write: it holds slices, or its last heartbeat was
// written before it could read this node's. Once every live lazy node is
// found clear, the node takes slices one lock TTL later (at once for a
// lazy process started after this node joined). Eager peers and
// earlier versions that claim with a write ("") never hold it back.
func TestMembershipClaimModes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, base, member := testMembers(t)
	reg := prometheus.NewRegistry()
	m := member("n0", metrics.New(reg))
	if !m.standby() {
		t.Fatal("not standing by before the node list was read")
	}
	if err := m.join(ctx); err != nil {
		t.Fatal(err)
	}
	if m.standby() {
		t.Fatal("standing by alone")
	}
	step := func(d time.Duration) {
		t.Helper()
		base.Advance(d)
		st.set(base.Now())
	}
	peer := func(id, mode string, seen time.Duration, slices ...string) {
		t.Helper()
		n := model.Node{ID: id, StartedAt: m.startedAt.Add(-time.Hour), SeenAt: base.Now().Add(seen), ClaimMode: mode, Slices: slices}
		if err := st.Heartbeat(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, standby bool, lazy float64) {
		t.Helper()
		m.heartbeat(ctx)
		if m.standby() != standby {
			t.Errorf("%s: standby = %v, want %v", what, m.standby(), standby)
		}
		if m.skew.Load() != nil || m.mayClaim() != nil {
			t.Errorf("%s: the peers' claim modes made the node unready or refuse claims: %v", what, m.mayClaim())
		}
		if got := gaugeValue(t, reg, "chime_claim_modes_disagree"); got != lazy {
			t.Errorf("%s: chime_claim_modes_disagree = %v, want %v", what, got, lazy)
		}
	}
	step(time.Second)
	peer("eager", model.ClaimsEager, 0, "1:0")
	peer("earlier", "", 0, "1:1")
	check("beside eager nodes and an earlier version that claims with a write", false, 0)
	peer("lazy", model.ClaimsLazy, 0, "1:2")
	check("beside a lazy node that holds a slice", true, 1)
	peer("lazy", model.ClaimsLazy, -2*time.Second)
	check("beside a lazy node whose heartbeat is older than this node's", true, 1)
	step(time.Second)
	peer("lazy", model.ClaimsLazy, 0)
	check("a lazy node found clear", true, 1)
	step(m.lockTTL / 2)
	peer("lazy", model.ClaimsLazy, 0)
	check("half a lock TTL after", true, 1)
	step(m.lockTTL / 2)
	peer("lazy", model.ClaimsLazy, 0)
	check("a lock TTL after the lazy node was found clear", false, 1)
	peer("lazy", model.ClaimsLazy, 0, "1:3")
	check("the lazy node holds a slice again", true, 1)
	if err := st.DeleteNode(ctx, "lazy"); err != nil {
		t.Fatal(err)
	}
	check("the lazy node left", false, 0)
	// A lazy process started after this node joined read it at its own
	// join, before it could take a slice: no wait once it is found clear.
	fresh := model.Node{ID: "lazy", StartedAt: base.Now(), SeenAt: base.Now(), ClaimMode: model.ClaimsLazy}
	if err := st.Heartbeat(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	check("a lazy process started after this node joined", false, 1)
	fresh.Slices = []string{"1:4"}
	if err := st.Heartbeat(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	check("that process holds a slice", true, 1)
	fresh.Slices = nil
	if err := st.Heartbeat(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	check("that process held a slice: a lock TTL's wait", true, 1)
	step(m.lockTTL)
	if err := st.Heartbeat(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	check("a lock TTL later", false, 1)
	nodes, err := st.ListNodes(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.ID == "n0" && n.ClaimMode != model.ClaimsEager {
			t.Errorf("published claim mode %q, want %q", n.ClaimMode, model.ClaimsEager)
		}
	}
}

// testMembers returns a store on SQLite in memory whose clock is base's,
// and a function that makes memberships on it.
func testMembers(t *testing.T) (*refStore, *clock.Fake, func(nodeID string, mt *metrics.Metrics) *membership) {
	t.Helper()
	sq, err := sqlstore.Open(context.Background(), "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	base := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	st := &refStore{Store: sq, now: base.Now()}
	corrected := clock.NewCorrected(base)
	return st, base, func(nodeID string, mt *metrics.Metrics) *membership {
		return newMembership(&membership{store: st, nodeID: nodeID, interval: 2 * time.Second, maxSkew: time.Second,
			clock: corrected, sweep: sweeper.New(sweeper.Config{Store: st, Index: memindex.New(1), Clock: corrected}),
			slices: func() []string { return nil }, lockTTL: 1500 * time.Millisecond,
			log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: mt})
	}
}

// TestPeerNeedsWorkFreshPeers: a peer under its share needs work only
// while its heartbeats go on and it is listed: one whose last heartbeat is
// more than two intervals old (it died, and is still listed for liveFor
// heartbeats), or that left the list since this node read it (a clean
// stop), takes nothing, so no slice is handed over to it.
func TestPeerNeedsWorkFreshPeers(t *testing.T) {
	t.Parallel()
	const minute = int64(29937254)
	full := []string{fmt.Sprintf("%d:0", minute), fmt.Sprintf("%d:1", minute)}
	tests := []struct {
		name   string
		slices []string      // the peer's slices at its last heartbeat
		age    time.Duration // of that heartbeat when the node reads it
		left   bool          // it left the list after the node read it
		want   bool
	}{
		{"under its share, fresh", nil, 0, false, true},
		{"under its share, one interval old", nil, 2 * time.Second, false, true},
		{"under its share, heartbeats stopped", nil, 4*time.Second + time.Millisecond, false, false},
		{"at its share", full, 0, false, false},
		{"left since this node's heartbeat", nil, 0, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, base, member := testMembers(t)
			m := member("n0", nil)
			peer := model.Node{ID: "peer", StartedAt: base.Now(), SeenAt: base.Now().Add(-tt.age), Slices: tt.slices, ClaimMode: model.ClaimsLazy}
			if err := st.Heartbeat(ctx, peer); err != nil {
				t.Fatal(err)
			}
			m.heartbeat(ctx)
			if tt.left {
				if err := st.DeleteNode(ctx, peer.ID); err != nil { // the peer's clean stop (leave)
					t.Fatal(err)
				}
			}
			if got := m.peerNeedsWork(minute, 2); got != tt.want {
				t.Errorf("peerNeedsWork = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPeerJoining: a peer counts as joining, so that the nodes at their
// share leave it the free slices of the current minute, while it holds no
// slice, started less than joiningFor heartbeat intervals ago, goes on
// heartbeating and does not stand by.
func TestPeerJoining(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		slices  []string
		started time.Duration // before the node reads it
		age     time.Duration // of its last heartbeat then
		standby bool
		want    bool
	}{
		{"started, no slice yet", nil, time.Second, 0, false, true},
		{"holds a slice", []string{"29937254:3"}, time.Second, 0, false, false},
		{"started long ago, no slice", nil, joiningFor * 2 * time.Second, 0, false, false},
		{"heartbeats stopped", nil, 5 * time.Second, 4*time.Second + time.Millisecond, false, false},
		{"standing by", nil, time.Second, 0, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, base, member := testMembers(t)
			m := member("n0", nil)
			if m.peerJoining() {
				t.Fatal("a peer joins before the node list was read")
			}
			peer := model.Node{ID: "peer", StartedAt: base.Now().Add(-tt.started), SeenAt: base.Now().Add(-tt.age),
				Slices: tt.slices, Standby: tt.standby, ClaimMode: model.ClaimsEager}
			if err := st.Heartbeat(ctx, peer); err != nil {
				t.Fatal(err)
			}
			m.heartbeat(ctx)
			if got := m.peerJoining(); got != tt.want {
				t.Errorf("peerJoining = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStandbyPeerNeedsNoWork: a peer standing by takes no slice, so it
// neither asks for slices (peerNeedsWork) nor counts in the fair share.
func TestStandbyPeerNeedsNoWork(t *testing.T) {
	t.Parallel()
	const minute = int64(29937254)
	base := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	m := &membership{nodeID: "n0", interval: 2 * time.Second, clock: clock.NewCorrected(base)}
	peers := []model.Node{{ID: "n1", SeenAt: base.Now(), Standby: true}}
	if m.needy(peers, minute, 2) {
		t.Error("a peer standing by with no slice needs work")
	}
	peers[0].Standby = false
	if !m.needy(peers, minute, 2) {
		t.Error("a claiming peer with no slice needs no work")
	}
	if got := claimingNodes("n0", []model.Node{{ID: "n0"}, {ID: "n1", Standby: true}, {ID: "n2"}}); got != 2 {
		t.Errorf("claimingNodes = %d, want 2", got)
	}
}
