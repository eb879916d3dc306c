package trigger

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
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
	return claimedAll(entries), nil
}

// claimedAll returns every entry's run as claimed, with a bare timer.
func claimedAll(entries []index.Entry) []store.ClaimedRun {
	out := make([]store.ClaimedRun, len(entries))
	for i, e := range entries {
		out[i] = store.ClaimedRun{Run: &model.Run{ID: e.RunID, TimerID: e.TimerID, DueAt: e.DueAt, ScheduledAt: e.DueAt},
			Timer: &model.Timer{ID: e.TimerID}}
	}
	return out
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

// rangeStore serves DueRuns from a fixed list of pending runs and records
// the ranges read.
type rangeStore struct {
	store.Store
	runs []*model.Run

	mu    sync.Mutex
	reads [][2]time.Time // from, to
	at    []time.Time    // when each read happened
}

func (s *rangeStore) DueRuns(_ context.Context, from, to time.Time, _, _ int) ([]*model.Run, error) {
	s.mu.Lock()
	s.reads = append(s.reads, [2]time.Time{from, to})
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	var out []*model.Run
	for _, r := range s.runs {
		if !r.DueAt.Before(from) && r.DueAt.Before(to) {
			out = append(out, r)
		}
	}
	return out, nil
}

// recordingExecutor claims every entry and records the runs submitted.
type recordingExecutor struct {
	mu        sync.Mutex
	submitted map[string]time.Time
}

func (x *recordingExecutor) Claim(_ context.Context, entries []index.Entry) ([]store.ClaimedRun, error) {
	return claimedAll(entries), nil
}

func (x *recordingExecutor) Submit(cr store.ClaimedRun) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.submitted[cr.Run.ID] = time.Now()
}
func (x *recordingExecutor) GiveBack(store.ClaimedRun) {}
func (x *recordingExecutor) Saturated() bool           { return false }

// TestTakeReadsAheadAndRechecksFindTheRest: taking a slice reads only its
// next seconds from the store; a run due later that the index does not
// have is found by a recheck before its instant and fires at it.
func TestTakeReadsAheadAndRechecksFindTheRest(t *testing.T) {
	t.Parallel()
	now := time.Now()
	near := &model.Run{ID: "near", TimerID: "t", DueAt: now.Add(time.Second)}
	late := &model.Run{ID: "late", TimerID: "t", DueAt: now.Add(recheckEvery + 1500*time.Millisecond)}
	st := &rangeStore{runs: []*model.Run{near, late}}
	idx := memindex.New(1)
	// The index knows the slices but holds only the near run, as if the
	// late run's index add had been lost.
	if err := idx.Add(context.Background(), index.Entry{RunID: near.ID, TimerID: "t", DueAt: near.DueAt}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*model.Run{near, late} {
		if err := idx.MarkKnown(context.Background(), index.SliceOf("t", r.DueAt, 1)); err != nil {
			t.Fatal(err)
		}
	}
	ex := &recordingExecutor{submitted: map[string]time.Time{}}
	const readAhead = 100 * time.Millisecond
	tr := New(Config{Store: st, Index: idx, Executor: ex, ReadAhead: readAhead, Poll: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tr.Start()
	defer tr.Stop()
	tr.Take(index.SliceOf("t", near.DueAt, 1))
	tr.Take(index.SliceOf("t", late.DueAt, 1))

	deadline := time.Now().Add(3 * recheckEvery)
	for time.Now().Before(deadline) {
		ex.mu.Lock()
		n := len(ex.submitted)
		ex.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	for _, r := range []*model.Run{near, late} {
		at, ok := ex.submitted[r.ID]
		if !ok {
			t.Errorf("run %s was not submitted", r.ID)
			continue
		}
		if at.Before(r.DueAt) {
			t.Errorf("run %s submitted %v before its instant", r.ID, r.DueAt.Sub(at))
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, rd := range st.reads {
		if limit := st.at[i].Add(readAhead + recheckEvery); rd[1].After(limit) {
			t.Errorf("read %d: [%v, %v) reaches %v past the read-ahead", i, rd[0], rd[1], rd[1].Sub(limit))
		}
	}
}

// concurrencyStore's DueRuns takes a while and records how many ran at
// once since counting was switched on.
type concurrencyStore struct {
	store.Store
	counting                   atomic.Bool
	calls, running, most, done atomic.Int32
}

func (s *concurrencyStore) DueRuns(context.Context, time.Time, time.Time, int, int) ([]*model.Run, error) {
	s.calls.Add(1)
	if !s.counting.Load() {
		return nil, nil
	}
	n := s.running.Add(1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(10 * time.Millisecond)
	s.running.Add(-1)
	s.done.Add(1)
	return nil, nil
}

// TestRechecksOneAtATime: the rechecks of the slices held, which come due
// at the same poll, read the store one after the other, not all at once.
func TestRechecksOneAtATime(t *testing.T) {
	t.Parallel()
	st := &concurrencyStore{}
	const buckets = 8
	idx := memindex.New(buckets)
	tr := New(Config{Store: st, Index: idx, Executor: &recordingExecutor{submitted: map[string]time.Time{}},
		Poll: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tr.recheckEvery = 100 * time.Millisecond
	// Slices of the current minute, or of the next one when this one ends
	// too soon for the test: a recheck reads from the slice's start.
	at := time.Now().Add(2 * time.Second)
	if at.Truncate(time.Minute) != time.Now().Truncate(time.Minute) {
		at = at.Add(3 * time.Second)
	}
	taken := map[index.Slice]bool{}
	for i := 0; len(taken) < buckets; i++ {
		s := index.SliceOf(fmt.Sprintf("t%d", i), at, buckets)
		if !taken[s] {
			taken[s] = true
			if err := idx.MarkKnown(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		}
	}
	tr.Start()
	defer tr.Stop()
	for s := range taken {
		tr.Take(s)
	}
	// Taking a slice reads it too, each in its own goroutine: count from
	// when those reads are over.
	deadline := time.Now().Add(10 * time.Second)
	for st.calls.Load() < buckets && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	st.counting.Store(true)
	for st.done.Load() < 3*buckets && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := st.done.Load(); got < 3*buckets {
		t.Fatalf("%d rechecks in 10 s, want at least %d", got, 3*buckets)
	}
	if most := st.most.Load(); most != 1 {
		t.Errorf("%d rechecks read the store at once, want 1", most)
	}
}

// TestGivenBackRunQueuedAgain: a run this node claimed and then gave back
// at the same instant (its claim went stale before the action started) is
// queued and claimed again when it comes back, not taken for seen.
func TestGivenBackRunQueuedAgain(t *testing.T) {
	t.Parallel()
	ex := &slowExecutor{}
	tr := New(Config{Store: benchStore{}, Index: memindex.New(1), Executor: ex, Poll: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tr.Start()
	defer tr.Stop()
	due := time.Now().Add(-time.Millisecond)
	entry := index.Entry{RunID: "run-1", TimerID: "t", DueAt: due}
	tr.Take(index.SliceOf("t", due, 1))
	for want := int32(1); want <= 2; want++ {
		tr.Notify([]index.Entry{entry}) // planned, then given back
		deadline := time.Now().Add(10 * time.Second)
		for ex.submitted.Load() < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := ex.submitted.Load(); got != want {
			t.Fatalf("submitted %d times, want %d", got, want)
		}
	}
}
