package trigger

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop/startstoptest"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// start starts tr and stops it when the test ends.
func start(t *testing.T, tr *Trigger) {
	t.Helper()
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
}

// waitFor waits for cond, reporting got.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, what, func() (bool, string) { return cond(), "not yet" })
}

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
	// The claim's slowness is the behaviour under test: claims must last
	// long enough to overlap for the bound on claims in progress to show.
	time.Sleep(5 * time.Millisecond) // behaviour under test (see above)
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
	tr := New(Config{Store: benchStore{}, Index: memindex.New(1), Executor: ex, Poll: time.Hour, Logger: discard})
	start(t, tr)
	due := time.Now().Add(-time.Millisecond)
	const runs = 20 * maxClaimBatch
	entries := make([]index.Entry, runs)
	for i := range entries {
		entries[i] = index.Entry{RunID: fmt.Sprintf("run-%05d", i), TimerID: "t", DueAt: due}
	}
	tr.Take(index.SliceOf("t", due, 1))
	tr.Notify(entries)
	waitFor(t, "every run submitted", func() bool { return ex.submitted.Load() >= runs })
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
	runs  []*model.Run
	clock clock.Clock

	mu    sync.Mutex
	reads [][2]time.Time // from, to
	at    []time.Time    // when each read happened
	in    [][]int        // the buckets each read asked for
}

func (s *rangeStore) DueRuns(_ context.Context, from, to time.Time, buckets int, in ...int) ([]*model.Run, error) {
	s.mu.Lock()
	s.reads = append(s.reads, [2]time.Time{from, to})
	s.at = append(s.at, s.clock.Now())
	s.in = append(s.in, slices.Clone(in))
	s.mu.Unlock()
	var out []*model.Run
	for _, r := range s.runs {
		if buckets > 1 && len(in) > 0 && !slices.Contains(in, index.BucketOf(r.TimerID, buckets)) {
			continue
		}
		if !r.DueAt.Before(from) && r.DueAt.Before(to) {
			out = append(out, r)
		}
	}
	return out, nil
}

// recordingExecutor claims every entry and records the runs submitted.
type recordingExecutor struct {
	clock     clock.Clock // nil: the machine's
	mu        sync.Mutex
	submitted map[string]time.Time
	givenBack []string
}

func (x *recordingExecutor) Claim(_ context.Context, entries []index.Entry) ([]store.ClaimedRun, error) {
	return claimedAll(entries), nil
}

func (x *recordingExecutor) Submit(cr store.ClaimedRun) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.submitted[cr.Run.ID] = clock.Default(x.clock).Now()
}

func (x *recordingExecutor) GiveBack(cr store.ClaimedRun) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.givenBack = append(x.givenBack, cr.Run.ID)
}

func (x *recordingExecutor) count() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.submitted)
}
func (x *recordingExecutor) Saturated() bool { return false }

// TestTakeReadsAheadAndRechecksFindTheRest: taking a slice reads only its
// next seconds from the store; a run due later that the index does not
// have is found by a recheck before its instant and fires at it.
func TestTakeReadsAheadAndRechecksFindTheRest(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC))
	now := clk.Now()
	near := &model.Run{ID: "near", TimerID: "t", DueAt: now.Add(time.Second)}
	late := &model.Run{ID: "late", TimerID: "t", DueAt: now.Add(recheckEvery + 1500*time.Millisecond)}
	st := &rangeStore{runs: []*model.Run{near, late}, clock: clk}
	idx := memindex.NewWithOptions(memindex.Options{Buckets: 1, Clock: clk})
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
	ex := &recordingExecutor{clock: clk, submitted: map[string]time.Time{}}
	const readAhead = 100 * time.Millisecond
	const poll = 50 * time.Millisecond
	tr := New(Config{Store: st, Index: idx, Executor: ex, ReadAhead: readAhead, Poll: poll, Clock: clk, Logger: discard})
	tr.signals.Init(t)
	start(t, tr)
	// The dispatch timer and the poll ticker.
	waitFor(t, "the trigger's timers armed", func() bool { return clk.Waiters() >= 2 })
	tr.Take(index.SliceOf("t", near.DueAt, 1))
	tr.signals.read.Wait()

	// Step through three rechecks, one poll at a time.
	for i := 0; i < int(3*recheckEvery/poll) && ex.count() < 2; i++ {
		clk.Advance(poll)
		tr.signals.polled.Wait()
	}
	waitFor(t, "both runs submitted", func() bool { return ex.count() == 2 })
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

// TestRecheckOneReadPerMinute: the rechecks of the slices of one minute
// that a trigger holds are one read of the store for all their buckets,
// and each slice queues its own runs from it.
func TestRecheckOneReadPerMinute(t *testing.T) {
	t.Parallel()
	const buckets = 4
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC))
	now := clk.Now()
	// A timer in each bucket, each with a run the index lost, due after
	// the first recheck.
	timers := map[int]string{}
	for i := 0; len(timers) < buckets; i++ {
		id := fmt.Sprintf("t%d", i)
		if _, ok := timers[index.BucketOf(id, buckets)]; !ok {
			timers[index.BucketOf(id, buckets)] = id
		}
	}
	idx := memindex.NewWithOptions(memindex.Options{Buckets: buckets, Clock: clk})
	var runs []*model.Run
	for b, id := range timers {
		runs = append(runs, &model.Run{ID: "late-" + id, TimerID: id, DueAt: now.Add(recheckEvery + 1500*time.Millisecond)})
		if err := idx.MarkKnown(context.Background(), index.Slice{Minute: now.Unix() / 60, Bucket: b}); err != nil {
			t.Fatal(err)
		}
	}
	st := &rangeStore{runs: runs, clock: clk}
	ex := &recordingExecutor{clock: clk, submitted: map[string]time.Time{}}
	const poll = 50 * time.Millisecond
	tr := New(Config{Store: st, Index: idx, Executor: ex, ReadAhead: 100 * time.Millisecond, Poll: poll, Clock: clk, Logger: discard})
	tr.signals.Init(t)
	start(t, tr)
	waitFor(t, "the trigger's timers armed", func() bool { return clk.Waiters() >= 2 })
	// Hold three of the four slices: the fourth's run is not ours.
	for b := range 3 {
		tr.Take(index.Slice{Minute: now.Unix() / 60, Bucket: b})
		tr.signals.read.Wait()
	}
	for i := 0; i < int(3*recheckEvery/poll) && ex.count() < 3; i++ {
		clk.Advance(poll)
		tr.signals.polled.Wait()
	}
	waitFor(t, "the runs of the held slices submitted", func() bool { return ex.count() == 3 })
	ex.mu.Lock()
	if _, ok := ex.submitted["late-"+timers[3]]; ok {
		t.Error("the run of the slice not held was submitted")
	}
	ex.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	// Takes and rebuilds read a slice from its start; rechecks read the
	// seconds around now.
	rechecks := 0
	for i, rd := range st.reads {
		if rd[0].Equal(now.Truncate(time.Minute)) {
			continue
		}
		rechecks++
		if got := slices.Sorted(slices.Values(st.in[i])); !slices.Equal(got, []int{0, 1, 2}) {
			t.Errorf("recheck read [%v, %v) asked for buckets %v, want [0 1 2] in one read", rd[0], rd[1], got)
		}
	}
	if rechecks == 0 {
		t.Error("no recheck read")
	}
}

// concurrencyStore's DueRuns takes a while and records how many ran at
// once since counting was switched on.
type concurrencyStore struct {
	counting                   atomic.Bool
	calls, running, most, done atomic.Int32
}

func (s *concurrencyStore) DueRuns(context.Context, time.Time, time.Time, int, ...int) ([]*model.Run, error) {
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
	// The read's slowness is the behaviour under test: reads must last
	// long enough to overlap if the rechecks ran at once.
	time.Sleep(10 * time.Millisecond) // behaviour under test (see above)
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
		Poll: 20 * time.Millisecond, Logger: discard})
	tr.held.recheckEvery = 100 * time.Millisecond
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
	start(t, tr)
	for s := range taken {
		tr.Take(s)
	}
	// Taking a slice reads it too, each in its own goroutine: count from
	// when those reads are over.
	waitFor(t, "the reads of Take", func() bool { return st.calls.Load() >= buckets })
	st.counting.Store(true)
	testenv.Poll(10*time.Second, func() (bool, string) { return st.done.Load() >= 3*buckets, "" })
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
	tr := New(Config{Store: benchStore{}, Index: memindex.New(1), Executor: ex, Poll: time.Hour, Logger: discard})
	start(t, tr)
	due := time.Now().Add(-time.Millisecond)
	entry := index.Entry{RunID: "run-1", TimerID: "t", DueAt: due}
	tr.Take(index.SliceOf("t", due, 1))
	for want := int32(1); want <= 2; want++ {
		tr.Notify([]index.Entry{entry}) // planned, then given back
		waitFor(t, fmt.Sprintf("submission %d", want), func() bool { return ex.submitted.Load() >= want })
		if got := ex.submitted.Load(); got != want {
			t.Fatalf("submitted %d times, want %d", got, want)
		}
	}
}

// TestArmedRunStartsAtItsInstant: a run claimed ahead of its instant is
// submitted when the clock reaches the instant, not before; one whose
// instant has not come when the trigger stops is given back.
func TestArmedRunStartsAtItsInstant(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC))
	ex := &recordingExecutor{clock: clk, submitted: map[string]time.Time{}}
	tr := New(Config{Store: benchStore{}, Index: memindex.NewWithOptions(memindex.Options{Buckets: 1, Clock: clk}), Executor: ex, Poll: time.Hour, Clock: clk, Logger: discard})
	tr.signals.Init(t)
	start(t, tr)
	soon := index.Entry{RunID: "soon", TimerID: "t", DueAt: clk.Now().Add(300 * time.Millisecond)}
	later := index.Entry{RunID: "later", TimerID: "t", DueAt: clk.Now().Add(400 * time.Millisecond)}
	tr.Take(index.SliceOf("t", soon.DueAt, 1))
	tr.signals.read.Wait()
	tr.Notify([]index.Entry{soon, later}) // within ClaimAhead: claimed at once
	tr.signals.armed.Wait()
	tr.signals.armed.Wait()
	if n := ex.count(); n != 0 {
		t.Fatalf("%d runs submitted before their instant", n)
	}
	clk.Advance(300 * time.Millisecond)
	waitFor(t, "the first run submitted at its instant", func() bool { return ex.count() == 1 })
	if err := tr.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if at := ex.submitted["soon"]; !at.Equal(soon.DueAt) {
		t.Errorf("soon submitted at %v, want its instant %v", at, soon.DueAt)
	}
	if len(ex.givenBack) != 1 || ex.givenBack[0] != "later" {
		t.Errorf("given back at Stop: %v, want [later]", ex.givenBack)
	}
}

// TestLifecycle: Start and Stop are safe twice, Stop without Start, and a
// stopped trigger does not start again.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	startstoptest.Lifecycle(t, func() *Trigger {
		return New(Config{Store: benchStore{}, Index: memindex.New(1), Executor: &recordingExecutor{}, Logger: discard})
	})
}

// TestHerdSharesOneTimer: runs claimed for the same instant wait behind one
// timer, in the order claimed, and are all submitted at the instant; runs
// of another instant have a timer of their own; runs of an instant that has
// not come when the trigger stops are all given back.
func TestHerdSharesOneTimer(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC))
	ex := &recordingExecutor{clock: clk, submitted: map[string]time.Time{}}
	tr := New(Config{Store: benchStore{}, Index: memindex.NewWithOptions(memindex.Options{Buckets: 1, Clock: clk}), Executor: ex, Poll: time.Hour, Clock: clk, Logger: discard})
	tr.signals.Init(t)
	start(t, tr)
	waitFor(t, "the dispatch timer and the poll ticker", func() bool { return clk.Waiters() >= 2 })
	herdAt, laterAt := clk.Now().Add(300*time.Millisecond), clk.Now().Add(400*time.Millisecond)
	var herd []index.Entry
	for i := range 5 {
		herd = append(herd, index.Entry{RunID: fmt.Sprintf("herd-%d", i), TimerID: "t", DueAt: herdAt})
	}
	later := []index.Entry{{RunID: "later-0", TimerID: "t", DueAt: laterAt}, {RunID: "later-1", TimerID: "t", DueAt: laterAt}}
	tr.Take(index.SliceOf("t", herdAt, 1))
	tr.signals.read.Wait()
	tr.Notify(append(append([]index.Entry(nil), herd...), later...)) // within ClaimAhead: claimed at once
	for range len(herd) + len(later) {
		tr.signals.armed.Wait()
	}
	// One armed group, with its one timer, per instant (the signal comes
	// after the group is in the map). The clock's count of timers would
	// include the dispatcher's own, which it stops and resets.
	tr.disp.armedMu.Lock()
	groups := len(tr.disp.armed)
	tr.disp.armedMu.Unlock()
	if groups != 2 {
		t.Errorf("%d timers armed for 7 runs at 2 instants, want 2", groups)
	}
	clk.Advance(300 * time.Millisecond)
	waitFor(t, "the herd submitted at its instant", func() bool { return ex.count() == len(herd) })
	if err := tr.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	for _, e := range herd {
		if at, ok := ex.submitted[e.RunID]; !ok || !at.Equal(herdAt) {
			t.Errorf("%s submitted at %v (%v), want its instant %v", e.RunID, at, ok, herdAt)
		}
	}
	slices.Sort(ex.givenBack)
	if !slices.Equal(ex.givenBack, []string{"later-0", "later-1"}) {
		t.Errorf("given back %v, want the two later runs", ex.givenBack)
	}
}

// TestRebuildQueuesWhatIsDueSoon: a slice the index does not know is
// rebuilt from the store in parts of its minute, every run put back in the
// index and the slice marked known; only the runs due within the read-ahead
// are queued at once, and a run due later is queued by the polls of the
// index and fires at its instant.
func TestRebuildQueuesWhatIsDueSoon(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC))
	now := clk.Now()
	near := &model.Run{ID: "near", TimerID: "t", DueAt: now.Add(time.Second)}
	later := &model.Run{ID: "later", TimerID: "t", DueAt: now.Add(30 * time.Second)}
	st := &rangeStore{runs: []*model.Run{near, later}, clock: clk}
	idx := memindex.NewWithOptions(memindex.Options{Buckets: 1, Clock: clk}) // the slice unknown
	ex := &recordingExecutor{clock: clk, submitted: map[string]time.Time{}}
	const poll = 250 * time.Millisecond
	tr := New(Config{Store: st, Index: idx, Executor: ex, ReadAhead: 100 * time.Millisecond, Poll: poll, Clock: clk, Logger: discard})
	tr.signals.Init(t)
	start(t, tr)
	waitFor(t, "the trigger's timers armed", func() bool { return clk.Waiters() >= 2 })
	s := index.SliceOf("t", near.DueAt, 1)
	tr.Take(s)
	tr.signals.read.Wait() // Take's read of the next seconds
	clk.Advance(poll)
	tr.signals.polled.Wait() // finds the slice unknown: rebuilds it
	tr.signals.read.Wait()

	entries, known, err := idx.Range(context.Background(), s, s.End())
	if err != nil || !known || len(entries) != 2 {
		t.Fatalf("index after the rebuild: %d entries, known %v, err %v; want both runs, known", len(entries), known, err)
	}
	if q := tr.held.queued(s); q != 1 {
		t.Errorf("%d runs queued after the rebuild, want 1 (the run due within the read-ahead)", q)
	}
	st.mu.Lock()
	var parts int
	for _, rd := range st.reads[1:] { // after Take's
		if rd[1].Sub(rd[0]) > rebuildPart {
			t.Errorf("rebuild read [%v, %v): more than %v", rd[0], rd[1], rebuildPart)
		}
		parts++
	}
	if want := int(time.Minute / rebuildPart); parts != want {
		t.Errorf("rebuild read the slice in %d parts, want %d", parts, want)
	}
	st.mu.Unlock()

	pollUntilSubmitted(t, clk, tr, ex, poll, map[string]time.Time{near.ID: near.DueAt, later.ID: later.DueAt})
}

// pollUntilSubmitted advances clk a poll at a time, for at most a minute,
// until ex has the runs of due (run id → due time) submitted, and checks
// that none was submitted before its instant.
func pollUntilSubmitted(t *testing.T, clk *clock.Fake, tr *Trigger, ex *recordingExecutor, poll time.Duration, due map[string]time.Time) {
	t.Helper()
	for i := 0; i < int(time.Minute/poll) && ex.count() < len(due); i++ {
		clk.Advance(poll)
		tr.signals.polled.Wait()
	}
	waitFor(t, "every run submitted", func() bool { return ex.count() == len(due) })
	ex.mu.Lock()
	defer ex.mu.Unlock()
	for id, at := range due {
		if got := ex.submitted[id]; got.Before(at) {
			t.Errorf("run %s submitted %v before its instant", id, at.Sub(got))
		}
	}
}

// TestPolledRunGivenBackQueuedAgain: a run the polls found in the index,
// claimed, then put back in the index at the same instant (given back) is
// found by the next polls and claimed again: the polls read only what the
// index holds beyond their mark (index.SinceRanger), and the run put back
// is beyond it.
func TestPolledRunGivenBackQueuedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex := &slowExecutor{}
	idx := memindex.New(1)
	tr := New(Config{Store: benchStore{}, Index: idx, Executor: ex, Poll: 5 * time.Millisecond, Logger: discard})
	tr.signals.read.Init(t) // the polls' signals are not read
	start(t, tr)
	due := time.Now().Add(-time.Millisecond)
	s := index.SliceOf("t", due, 1)
	if err := idx.MarkKnown(ctx, s); err != nil {
		t.Fatal(err)
	}
	tr.Take(s)
	if got := tr.signals.read.Wait(); got != s {
		t.Fatalf("read slice %v, want %v", got, s)
	}
	entry := index.Entry{RunID: "run-1", TimerID: "t", DueAt: due}
	for want := int32(1); want <= 3; want++ {
		if err := idx.Add(ctx, entry); err != nil { // planned, then given back
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("submission %d", want), func() bool { return ex.submitted.Load() >= want })
		if got := ex.submitted.Load(); got != want {
			t.Fatalf("submitted %d times, want %d", got, want)
		}
	}
}

// TestNotifyQueuesOnlyTheNextSeconds: runs offered by Notify in a held
// slice are queued at once only when due within the read-ahead; a run
// planned further ahead stays in the index until the polls reach it, and
// still fires at its instant.
func TestNotifyQueuesOnlyTheNextSeconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC))
	now := clk.Now()
	near := index.Entry{RunID: "near", TimerID: "t", DueAt: now.Add(time.Second)}
	later := index.Entry{RunID: "later", TimerID: "t", DueAt: now.Add(30 * time.Second)}
	st := &rangeStore{clock: clk} // the store's reads find nothing
	idx := memindex.NewWithOptions(memindex.Options{Buckets: 1, Clock: clk})
	s := index.SliceOf("t", near.DueAt, 1)
	if err := idx.MarkKnown(ctx, s); err != nil {
		t.Fatal(err)
	}
	ex := &recordingExecutor{clock: clk, submitted: map[string]time.Time{}}
	const poll = 250 * time.Millisecond
	tr := New(Config{Store: st, Index: idx, Executor: ex, ReadAhead: 3 * time.Second, Poll: poll, Clock: clk, Logger: discard})
	tr.signals.Init(t)
	start(t, tr)
	waitFor(t, "the trigger's timers armed", func() bool { return clk.Waiters() >= 2 })
	tr.Take(s)
	tr.signals.read.Wait() // Take's read of the next seconds

	// As the planner does: the runs go to the index, then to Notify.
	if err := idx.Add(ctx, near, later); err != nil {
		t.Fatal(err)
	}
	tr.Notify([]index.Entry{near, later})
	if q := tr.held.queued(s); q != 1 {
		t.Fatalf("%d runs queued after Notify, want 1 (the run due within the read-ahead)", q)
	}

	pollUntilSubmitted(t, clk, tr, ex, poll, map[string]time.Time{near.RunID: near.DueAt, later.RunID: later.DueAt})
}
