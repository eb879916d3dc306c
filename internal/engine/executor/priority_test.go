package executor

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// orderRunner records the order in which runs start; the first blocks
// until release is closed.
type orderRunner struct {
	mu      sync.Mutex
	order   []string
	started chan struct{}
	release chan struct{}
}

func (o *orderRunner) Run(ctx context.Context, r *model.Run, t *model.Timer) ([]byte, error) {
	o.mu.Lock()
	first := len(o.order) == 0
	o.order = append(o.order, r.ID)
	o.mu.Unlock()
	if first {
		close(o.started)
		<-o.release
	}
	return nil, nil
}

// TestSubmitQueuesByPriority: with the pool full, the runs submitted wait
// for a worker in priority order, then by due instant, whatever order they
// were submitted in.
func TestSubmitQueuesByPriority(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().Truncate(time.Second)
	clk := clock.NewFake(now)
	timer := func(id string, p int) *model.Timer {
		tm := &model.Timer{ID: id, App: "a", Name: id, Schedule: "@every 1h", Timezone: "UTC", Enabled: true,
			Action: model.Action{Type: "order"}, Timeout: time.Hour, Retry: model.RetryPolicy{MaxAttempts: 1},
			Priority: &p, CreatedAt: now, UpdatedAt: now}
		if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
			t.Fatal(err)
		}
		return tm
	}
	low, high := timer("low", 0), timer("high", 9)
	or := &orderRunner{started: make(chan struct{}), release: make(chan struct{})}
	e, err := New(Config{Store: st, Index: memindex.New(1), NodeID: "n1", PoolSize: 1, Runners: map[string]action.Runner{"order": or},
		Clock: clk, Local: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	claim := func(tm *model.Timer, at time.Time) store.ClaimedRun {
		t.Helper()
		r := &model.Run{ID: model.RunID(tm.ID, at), TimerID: tm.ID, ScheduledAt: at, DueAt: at}
		if _, err := st.InsertRuns(ctx, []*model.Run{r}); err != nil {
			t.Fatal(err)
		}
		won, err := e.Claim(ctx, []index.Entry{{RunID: r.ID, TimerID: tm.ID, DueAt: at}})
		if err != nil || len(won) != 1 {
			t.Fatalf("claim = %v, %v", won, err)
		}
		return won[0]
	}
	blocker := claim(low, now.Add(-time.Minute))
	e.Submit(blocker)
	<-or.started
	// The pool is full: these queue. The low ones first, due earliest
	// last, then the high one.
	var queued []store.ClaimedRun
	for i := 3; i >= 1; i-- {
		queued = append(queued, claim(low, now.Add(-time.Duration(i)*time.Second)))
	}
	hi := claim(high, now)
	e.SubmitAll(append(slices.Clone(queued), hi))
	close(or.release)
	waitFor(t, "every run to start", func() bool {
		or.mu.Lock()
		defer or.mu.Unlock()
		return len(or.order) == 5
	})
	want := []string{blocker.Run.ID, hi.Run.ID, queued[0].Run.ID, queued[1].Run.ID, queued[2].Run.ID}
	or.mu.Lock()
	defer or.mu.Unlock()
	if !slices.Equal(or.order, want) {
		t.Errorf("start order %v, want %v (blocker, high, then the low ones by due)", or.order, want)
	}
}
