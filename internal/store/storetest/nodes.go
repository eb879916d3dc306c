package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// nodeTests are the tests of cluster membership: heartbeats, the node
// list, and the store's clock that nodes compare theirs with.
var nodeTests = []test{
	{"Heartbeat", testNodes},
	{"Now", testNow},
	{"Standby", testNodeStandby},
}

// testNodes: a heartbeat inserts or replaces its node; ListNodes returns
// the nodes seen since an instant, with what they published (a claim mode
// not told reads ""); DeleteNode is idempotent.
func testNodes(t *testing.T, s store.Store) {
	must(t, s.Heartbeat(ctx(t), model.Node{ID: "n1", Addr: "10.0.0.1:8080", StartedAt: base, SeenAt: base, Slices: []string{"0-1", "0-2"}}))
	must(t, s.Heartbeat(ctx(t), model.Node{ID: "n2", Addr: "10.0.0.2:8080", StartedAt: base, SeenAt: base}))
	must(t, s.Heartbeat(ctx(t), model.Node{ID: "n1", Addr: "10.0.0.1:8081", StartedAt: base, SeenAt: base.Add(10 * time.Second), Slices: []string{"0-3"},
		PoolInUse: 7, PoolCapacity: 10000, ClaimMode: model.ClaimsLazy, Coordination: model.CoordinationDB}))
	ns, err := s.ListNodes(ctx(t), base)
	must(t, err)
	if len(ns) != 2 || ns[0].ID != "n1" || ns[0].Addr != "10.0.0.1:8081" || !slices.Equal(ns[0].Slices, []string{"0-3"}) ||
		!ns[0].SeenAt.Equal(base.Add(10*time.Second)) || !ns[0].StartedAt.Equal(base) || len(ns[1].Slices) != 0 ||
		ns[0].PoolInUse != 7 || ns[0].PoolCapacity != 10000 || ns[1].PoolCapacity != 0 ||
		ns[0].ClaimMode != model.ClaimsLazy || ns[1].ClaimMode != "" ||
		ns[0].Coordination != model.CoordinationDB || ns[1].Coordination != "" {
		t.Errorf("ListNodes = %+v", ns)
	}
	ns, err = s.ListNodes(ctx(t), base.Add(time.Second))
	must(t, err)
	if len(ns) != 1 || ns[0].ID != "n1" {
		t.Errorf("ListNodes(recent) = %+v", ns)
	}
	must(t, s.DeleteNode(ctx(t), "n1"))
	must(t, s.DeleteNode(ctx(t), "n1"))
	ns, err = s.ListNodes(ctx(t), time.Time{})
	must(t, err)
	if len(ns) != 1 || ns[0].ID != "n2" {
		t.Errorf("ListNodes after delete = %+v", ns)
	}
}

// testNow: the store's clock agrees with this host's (the test servers run
// on it).
func testNow(t *testing.T, s store.Store) {
	for range 3 {
		before := time.Now()
		got, err := s.Now(ctx(t))
		after := time.Now()
		must(t, err)
		if got.Before(before.Add(-time.Second)) || got.After(after.Add(time.Second)) {
			t.Errorf("Now = %v, want within 1s of [%v, %v]", got, before, after)
		}
	}
}

// testNodeStandby: a node's heartbeat tells whether it stands by, and the
// next one that it no longer does.
func testNodeStandby(t *testing.T, s store.Store) {
	standby := func() bool {
		t.Helper()
		ns, err := s.ListNodes(ctx(t), base)
		must(t, err)
		if len(ns) != 1 {
			t.Fatalf("ListNodes = %d nodes, want 1", len(ns))
		}
		return ns[0].Standby
	}
	must(t, s.Heartbeat(ctx(t), model.Node{ID: "sb", StartedAt: base, SeenAt: base, Standby: true}))
	if !standby() {
		t.Error("a node that stands by reads back as claiming")
	}
	must(t, s.Heartbeat(ctx(t), model.Node{ID: "sb", StartedAt: base, SeenAt: base.Add(time.Second)}))
	if standby() {
		t.Error("a node back from standing by reads back as standing by")
	}
}
