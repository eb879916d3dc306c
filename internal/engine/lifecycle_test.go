package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/coord/lock/memlock"
	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// downStore's clock does not answer while down is set.
type downStore struct {
	store.Store
	down atomic.Bool
}

var errDown = errors.New("store down")

func (s *downStore) Now(ctx context.Context) (time.Time, error) {
	if s.down.Load() {
		return time.Time{}, errDown
	}
	return s.Store.Now(ctx)
}

func newEngine(t *testing.T, st store.Store) *engine.Engine {
	t.Helper()
	eng, err := engine.New(engine.Config{
		Store: st, Index: memindex.New(4), Locker: memlock.NewLocker(nil), Elector: memlock.NewElector(nil),
		NodeID: "node-a", Runners: map[string]action.Runner{"test": &recorder{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// TestStartErrorReturned: a store that does not answer fails Start with
// its error, starts nothing, and the engine starts once it answers.
func TestStartErrorReturned(t *testing.T) {
	t.Parallel()
	st := &downStore{Store: openStore(t)}
	st.down.Store(true)
	eng := newEngine(t, st)
	ctx := context.Background()
	if err := eng.Start(ctx); !errors.Is(err, errDown) {
		t.Fatalf("Start with the store down = %v, want %v", err, errDown)
	}
	if err := eng.Ready(ctx); err == nil {
		t.Fatal("Ready after a failed start")
	}
	nodes, err := st.ListNodes(ctx, time.Time{})
	if err != nil || len(nodes) != 0 {
		t.Fatalf("nodes after a failed start = %v, %v; want none", nodes, err)
	}
	st.down.Store(false)
	if err := eng.Start(ctx); err != nil {
		t.Fatalf("Start once the store answers = %v", err)
	}
	t.Cleanup(func() { _ = eng.Stop(context.Background()) })
	if err := eng.Ready(ctx); err != nil {
		t.Fatalf("Ready = %v", err)
	}
}

// TestLifecycle: Start and Stop are safe twice; Stop without Start does
// nothing; a stopped engine does not start again; Stop removes the node
// from the node list.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	eng := newEngine(t, st)
	for i := range 2 {
		if err := eng.Start(ctx); err != nil {
			t.Fatalf("Start %d: %v", i, err)
		}
	}
	nodes, err := eng.Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].ID != "node-a" {
		t.Fatalf("nodes after Start = %+v, %v", nodes, err)
	}
	for i := range 2 {
		if err := eng.Stop(ctx); err != nil {
			t.Fatalf("Stop %d: %v", i, err)
		}
	}
	if nodes, _ := st.ListNodes(ctx, time.Time{}); len(nodes) != 0 {
		t.Errorf("nodes after Stop = %+v, want none", nodes)
	}
	if err := eng.Start(ctx); !errors.Is(err, engine.ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
	if err := eng.Ready(ctx); err == nil {
		t.Error("Ready after Stop")
	}
	if err := newEngine(t, openStore(t)).Stop(ctx); err != nil {
		t.Errorf("Stop without Start = %v", err)
	}
	// Claims are refused once stopped.
	if _, err := eng.Trigger(ctx, &model.Timer{ID: "t"}); err == nil {
		t.Error("Trigger after Stop succeeded")
	}
}

// TestStopAfterFailedStart: Stop after a Start that failed releases what
// New made (the executor's pool and its goroutines), as Stop without Start
// does: the bubble ends with no goroutine left.
func TestStopAfterFailedStart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{Store: openStore(t)}
		st.down.Store(true)
		eng := newEngine(t, st)
		ctx := context.Background()
		if err := eng.Start(ctx); !errors.Is(err, errDown) {
			t.Fatalf("Start with the store down = %v, want %v", err, errDown)
		}
		if err := eng.Stop(ctx); err != nil {
			t.Fatalf("Stop after a failed start = %v", err)
		}
	})
}
