package trigger

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/index/memindex"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// slowExecutor's claims take a while, and it records how many ran at once.
type slowExecutor struct {
	claiming, most atomic.Int32
	submitted      atomic.Int32
}

func (x *slowExecutor) Claim(_ context.Context, entries []index.Entry) ([]store.ClaimedRun, error) {
	n := x.claiming.Add(1)
	defer x.claiming.Add(-1)
	for {
		m := x.most.Load()
		if n <= m || x.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(5 * time.Millisecond)
	out := make([]store.ClaimedRun, len(entries))
	for i, e := range entries {
		out[i] = store.ClaimedRun{Run: &model.Run{ID: e.RunID, TimerID: e.TimerID, DueAt: e.DueAt, ScheduledAt: e.DueAt},
			Timer: &model.Timer{ID: e.TimerID}}
	}
	return out, nil
}

func (x *slowExecutor) Submit(store.ClaimedRun)   { x.submitted.Add(1) }
func (x *slowExecutor) GiveBack(store.ClaimedRun) {}
func (x *slowExecutor) Saturated() bool           { return false }

// TestClaimsInProgressBounded: a burst of runs due at once is claimed by at
// most maxClaiming claims at a time, and every run is submitted.
func TestClaimsInProgressBounded(t *testing.T) {
	t.Parallel()
	ex := &slowExecutor{}
	tr := New(Config{Store: benchStore{}, Index: memindex.New(1), Executor: ex, Poll: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tr.Start()
	defer tr.Stop()
	due := time.Now().Add(-time.Millisecond)
	const runs = 20 * maxClaimBatch
	entries := make([]index.Entry, runs)
	for i := range entries {
		entries[i] = index.Entry{RunID: fmt.Sprintf("run-%05d", i), TimerID: "t", DueAt: due}
	}
	tr.Take(index.SliceOf("t", due, 1))
	tr.Notify(entries)
	deadline := time.Now().Add(10 * time.Second)
	for ex.submitted.Load() < runs && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := ex.submitted.Load(); got != runs {
		t.Fatalf("submitted %d runs, want %d", got, runs)
	}
	if most := ex.most.Load(); most > maxClaiming || most < 2 {
		t.Errorf("at most %d claims at once, want between 2 and %d", most, maxClaiming)
	}
}
