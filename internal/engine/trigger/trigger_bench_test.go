package trigger

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// benchStore is the part of a store the trigger reads: an empty slice.
type benchStore struct{}

func (benchStore) DueRuns(context.Context, time.Time, time.Time, int, ...int) ([]*model.Run, error) {
	return nil, nil
}

// benchExecutor claims every entry at once from prepared runs and counts
// submissions.
type benchExecutor struct {
	runs  map[string]*model.Run
	timer *model.Timer
	wg    *sync.WaitGroup
}

func (x *benchExecutor) Claim(_ context.Context, entries []index.Entry) ([]store.ClaimedRun, error) {
	out := make([]store.ClaimedRun, len(entries))
	for i, e := range entries {
		out[i] = store.ClaimedRun{Run: x.runs[e.RunID], Timer: x.timer}
	}
	return out, nil
}

func (x *benchExecutor) Submit(store.ClaimedRun)   { x.wg.Done() }
func (x *benchExecutor) GiveBack(store.ClaimedRun) { x.wg.Done() }
func (x *benchExecutor) Saturated() bool           { return false }

// BenchmarkDispatch measures the trigger's dispatch path per run: Notify →
// heap → claim batch (a fake executor with no store) → index remove →
// Submit. The runs are due already, so none waits for its instant; allocs/op
// is per run.
func BenchmarkDispatch(b *testing.B) {
	for _, batch := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchDispatch(b, batch) })
	}
}

func benchDispatch(b *testing.B, batch int) {
	idx := memindex.New(1)
	var wg sync.WaitGroup
	ex := &benchExecutor{runs: make(map[string]*model.Run, b.N), timer: &model.Timer{ID: "t"}, wg: &wg}
	tr := New(Config{Store: benchStore{}, Index: idx, Executor: ex, Poll: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := tr.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tr.Stop(context.Background()) }()

	due := time.Now().Add(-time.Millisecond)
	entries := make([]index.Entry, b.N)
	for i := range entries {
		id := fmt.Sprintf("run-%d", i)
		entries[i] = index.Entry{RunID: id, TimerID: "t", DueAt: due}
		ex.runs[id] = &model.Run{ID: id, TimerID: "t", DueAt: due, ScheduledAt: due}
	}
	s := index.SliceOf("t", due, 1)
	tr.Take(s)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		n := min(batch, b.N-i)
		wg.Add(n)
		tr.Notify(entries[i : i+n])
		wg.Wait()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}
