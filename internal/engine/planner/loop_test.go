package planner

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop/startstoptest"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/coord/lock/memlock"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// TestLoopPlansOnTheLeaderOnly: the leader plans at Start and at every
// interval of the clock; another node's loop plans nothing.
func TestLoopPlansOnTheLeaderOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	now := clk.Now()
	tm := &model.Timer{ID: "t1", App: "a", Name: "n", Schedule: "0 * * * * *", Timezone: "UTC", Enabled: true,
		Action: model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: "http://x"}},
		Retry:  model.RetryPolicy{MaxAttempts: 1}, CreatedAt: now, UpdatedAt: now}
	if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
		t.Fatal(err)
	}
	elector := memlock.NewElector(clk)
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := New(Config{Store: st, Index: memindex.New(1), Lookahead: 2 * time.Minute, Clock: clk, Logger: discard})
	runs := func() int {
		rs, err := st.PendingRuns(ctx, time.Unix(0, 0), now.Add(time.Hour), 1000)
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	// Another node leads.
	if _, err := elector.Select(ctx, LeaderService, "other", time.Minute); err != nil {
		t.Fatal(err)
	}
	follower := NewLoop(p, LoopConfig{Elector: elector, NodeID: "me", Interval: 15 * time.Second, Clock: clk, Logger: discard})
	if err := follower.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := runs(); n != 0 {
		t.Fatalf("a follower planned %d runs", n)
	}
	if err := follower.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	clk.Advance(time.Minute) // the other node's leadership lapses
	now = clk.Now()
	leader := NewLoop(p, LoopConfig{Elector: elector, NodeID: "me", Interval: 15 * time.Second, Clock: clk, Logger: discard})
	leader.loop.Passed.Init(t)
	if err := leader.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leader.Stop(ctx) })
	first := runs()
	if first == 0 {
		t.Fatal("the leader planned nothing at Start")
	}
	testenv.Eventually(t, 10*time.Second, "the loop's ticker", func() (bool, string) { return clk.Waiters() == 1, "" })
	clk.Advance(time.Minute) // past the planned horizon's urgent window
	leader.loop.Passed.Wait()
	if n := runs(); n <= first {
		t.Errorf("runs after a periodic pass = %d, want more than %d", n, first)
	}
}

// TestLoopLifecycle: Start and Stop are safe twice, Stop without Start, and
// a stopped loop does not start again.
func TestLoopLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var st Store // never reached: this node does not lead
	p := New(Config{Store: st, Index: memindex.New(1)})
	elector := memlock.NewElector(nil)
	if _, err := elector.Select(ctx, LeaderService, "other", time.Hour); err != nil {
		t.Fatal(err)
	}
	startstoptest.Lifecycle(t, func() *Loop { return NewLoop(p, LoopConfig{Elector: elector, NodeID: "me"}) })
}
