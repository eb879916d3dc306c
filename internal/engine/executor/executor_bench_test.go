package executor

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
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// benchStore claims and records in memory: what is left is the executor's
// own cost per run.
type benchStore struct {
	Store
	timer    *model.Timer
	runs     map[string]*model.Run
	recorded *sync.WaitGroup
}

func (s *benchStore) ClaimRuns(_ context.Context, claims []store.Claim) ([]store.ClaimedRun, error) {
	out := make([]store.ClaimedRun, len(claims))
	for i, c := range claims {
		out[i] = store.ClaimedRun{Run: s.runs[c.RunID], Timer: s.timer}
	}
	return out, nil
}

func (s *benchStore) FinishRuns(_ context.Context, rs []model.Result) ([]bool, []*model.Run, error) {
	ok := make([]bool, len(rs))
	for i := range ok {
		ok[i] = true
	}
	s.recorded.Add(-len(rs))
	return ok, nil, nil
}

func (s *benchStore) ExtendLeases(context.Context, string, []store.Lease, time.Time) ([]store.Lease, error) {
	return nil, nil
}

func newBenchExecutor(b *testing.B) (*Executor, *benchStore) {
	st := &benchStore{
		timer: &model.Timer{ID: "t", Action: model.Action{Type: "noop"}, Timeout: time.Minute,
			Retry: model.RetryPolicy{MaxAttempts: 1}},
		runs:     map[string]*model.Run{},
		recorded: &sync.WaitGroup{},
	}
	noop := action.RunnerFunc(func(context.Context, *model.Run, *model.Timer) ([]byte, error) { return nil, nil })
	e, err := New(Config{Store: st, Index: memindex.New(1), NodeID: "bench",
		Runners: map[string]action.Runner{"noop": noop}, Lease: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Stop(ctx)
	})
	return e, st
}

// BenchmarkExecuteRecord measures Submit → pool → no-op action → result
// batched to the recorder → FinishRuns (in memory), per run. The runs are
// claimed (in memory) before the timer starts.
func BenchmarkExecuteRecord(b *testing.B) {
	e, st := newBenchExecutor(b)
	now := time.Now()
	var crs []store.ClaimedRun
	for i := 0; i < b.N; i += 500 {
		entries := make([]index.Entry, 0, 500)
		for j := i; j < min(i+500, b.N); j++ {
			id := fmt.Sprintf("r%d", j)
			st.runs[id] = &model.Run{ID: id, TimerID: "t", Attempt: 1, ScheduledAt: now, DueAt: now}
			entries = append(entries, index.Entry{RunID: id, TimerID: "t", DueAt: now})
		}
		won, err := e.Claim(context.Background(), entries)
		if err != nil {
			b.Fatal(err)
		}
		crs = append(crs, won...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	st.recorded.Add(b.N)
	for _, cr := range crs {
		e.Submit(cr)
	}
	st.recorded.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}

// BenchmarkClaimExecuteRecord adds the executor's Claim (in-memory store)
// in batches of 500, as the trigger calls it.
func BenchmarkClaimExecuteRecord(b *testing.B) {
	e, st := newBenchExecutor(b)
	now := time.Now()
	entries := make([]index.Entry, b.N)
	for i := range entries {
		id := fmt.Sprintf("r%d", i)
		st.runs[id] = &model.Run{ID: id, TimerID: "t", Attempt: 1, ScheduledAt: now, DueAt: now}
		entries[i] = index.Entry{RunID: id, TimerID: "t", DueAt: now}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	st.recorded.Add(b.N)
	for i := 0; i < b.N; i += 500 {
		won, err := e.Claim(ctx, entries[i:min(i+500, b.N)])
		if err != nil {
			b.Fatal(err)
		}
		for _, cr := range won {
			e.Submit(cr)
		}
	}
	st.recorded.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}
