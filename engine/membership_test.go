package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chimehq/chime/clock"
	"github.com/chimehq/chime/index/memindex"
	"github.com/chimehq/chime/internal/testenv"
	"github.com/chimehq/chime/metrics"
	"github.com/chimehq/chime/store"
	"github.com/chimehq/chime/store/sqlstore"
	"github.com/chimehq/chime/sweeper"
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
