package trigger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/store"
)

// roomExecutor takes no more than room runs at a time and records the
// order of the runs it was asked to claim.
type roomExecutor struct {
	room atomic.Int32
	mu   sync.Mutex
	asks []string
}

func (x *roomExecutor) Claim(_ context.Context, entries []index.Entry) ([]store.ClaimedRun, error) {
	x.mu.Lock()
	for _, e := range entries {
		x.asks = append(x.asks, e.RunID)
	}
	x.mu.Unlock()
	return claimedAll(entries), nil
}
func (x *roomExecutor) Submit(store.ClaimedRun)   {}
func (x *roomExecutor) GiveBack(store.ClaimedRun) {}
func (x *roomExecutor) Saturated() bool           { return x.room.Load() == 0 }
func (x *roomExecutor) Room() int                 { return int(x.room.Load()) }

func (x *roomExecutor) asked() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]string(nil), x.asks...)
}

// TestClaimsByPriorityWhenSaturated: runs that wait for the executor's
// room are claimed by priority, then by instant, no more at a time than
// the room; a timer the trigger does not know queues at the default
// priority, between the two.
func TestClaimsByPriorityWhenSaturated(t *testing.T) {
	t.Parallel()
	ex := &roomExecutor{}
	tr := New(Config{Store: benchStore{}, Index: memindex.New(1), Executor: ex, Poll: time.Hour, Logger: discard})
	tr.SetPriority("hi", 9)
	tr.SetPriority("lo", 0)
	start(t, tr)
	due := time.Now().Add(-time.Minute)
	var entries []index.Entry
	for i := range 3 {
		at := due.Add(time.Duration(i) * time.Millisecond)
		// The low runs are due first, the high ones last.
		entries = append(entries, index.Entry{RunID: fmt.Sprintf("lo-%d", i), TimerID: "lo", DueAt: at},
			index.Entry{RunID: fmt.Sprintf("mid-%d", i), TimerID: "mid", DueAt: at.Add(10 * time.Millisecond)},
			index.Entry{RunID: fmt.Sprintf("hi-%d", i), TimerID: "hi", DueAt: at.Add(20 * time.Millisecond)})
	}
	tr.Take(index.SliceOf("lo", due, 1))
	tr.Notify(entries)
	ex.room.Store(2)
	waitFor(t, "every run claimed", func() bool { return len(ex.asked()) == 9 })
	want := []string{"hi-0", "hi-1", "hi-2", "mid-0", "mid-1", "mid-2", "lo-0", "lo-1", "lo-2"}
	if got := ex.asked(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("claim order %v, want %v", got, want)
	}
}
