package executor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/startstop/startstoptest"
	"github.com/chimehq/chime/internal/base/testenv"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// faultStore is a real store, as the executor sees it, whose lease
// extensions and result writes can be made to fail, as when the database is
// down or stalled.
type faultStore struct {
	Store
	extendDown atomic.Bool
	// extendCalls counts ExtendLeases calls; past extendUpTo of them (when
	// set), they fail.
	extendCalls, extendUpTo atomic.Int32
	finishDown              atomic.Bool
	// finishHalf makes FinishRuns record the first half of its results
	// and fail on the rest, as a store that commits in parts does.
	finishHalf atomic.Bool
	finishes   atomic.Int32 // FinishRuns calls that reached the store
	// extendRefused counts the ExtendLeases calls extendDown failed.
	extendRefused atomic.Int32
	// extendGate, when set before the executor runs, holds every
	// ExtendLeases call until it is closed; extendHeld counts the calls
	// held.
	extendGate chan struct{}
	extendHeld atomic.Int32
}

var errDown = errors.New("store down (test)")

func (s *faultStore) ExtendLeases(ctx context.Context, node string, ls []store.Lease, until time.Time) ([]store.Lease, error) {
	if s.extendDown.Load() {
		s.extendRefused.Add(1)
		return nil, errDown
	}
	if s.extendGate != nil {
		s.extendHeld.Add(1)
		<-s.extendGate
	}
	if n := s.extendCalls.Add(1); s.extendUpTo.Load() > 0 && n > s.extendUpTo.Load() {
		return nil, errDown
	}
	return s.Store.ExtendLeases(ctx, node, ls, until)
}

func (s *faultStore) FinishRuns(ctx context.Context, rs []model.Result) ([]bool, []*model.Run, error) {
	if s.finishDown.Load() {
		return nil, nil, errDown
	}
	s.finishes.Add(1)
	if s.finishHalf.Load() {
		half := len(rs) / 2
		got, made, err := s.Store.FinishRuns(ctx, rs[:half])
		if err != nil {
			return nil, nil, err
		}
		return append(got, make([]bool, len(rs)-half)...), made, errDown
	}
	return s.Store.FinishRuns(ctx, rs)
}

// blockingRunner runs until its context ends or it is released, and tells
// when it started and how it ended.
type blockingRunner struct {
	started chan struct{}
	release chan struct{}
	ended   chan error // ctx.Err() at the end, nil when released
}

func newBlockingRunner() *blockingRunner {
	return &blockingRunner{started: make(chan struct{}, 4), release: make(chan struct{}), ended: make(chan error, 4)}
}

func (b *blockingRunner) Run(ctx context.Context, _ *model.Run, _ *model.Timer) ([]byte, error) {
	b.started <- struct{}{}
	select {
	case <-ctx.Done():
		b.ended <- ctx.Err()
		return nil, ctx.Err()
	case <-b.release:
		b.ended <- nil
		return []byte("done"), nil
	}
}

type leaseEnv struct {
	t     *testing.T
	clock *clock.Fake
	store *faultStore
	// db is the store under the faults, for the test's own reads and
	// writes.
	db      *sqlstore.Store
	exec    *Executor
	run     *blockingRunner
	timer   *model.Timer
	metrics *metrics.Metrics
}

const testLease = 10 * time.Second

// newLeaseEnv returns an executor on a fresh SQLite store with one timer.
// The recorder runs; the lease keeper does not: tests call enforce and
// extend themselves, at the fake clock's instants.
func newLeaseEnv(t *testing.T, mod ...func(*Config)) *leaseEnv {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Now().Truncate(time.Second))
	fs := &faultStore{Store: st}
	br := newBlockingRunner()
	tm := &model.Timer{ID: "t1", App: "a", Name: "n", Schedule: "@every 1h", Timezone: "UTC", Enabled: true,
		Action: model.Action{Type: "block"}, Timeout: time.Hour, Retry: model.RetryPolicy{MaxAttempts: 1},
		CreatedAt: clk.Now(), UpdatedAt: clk.Now()}
	if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
		t.Fatal(err)
	}
	mt := metrics.New(nil)
	cfg := Config{Store: fs, Index: memindex.New(1), NodeID: "n1", Runners: map[string]action.Runner{"block": br},
		Lease: testLease, Clock: clk, Local: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: mt}
	for _, m := range mod {
		m(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go e.rec.loop()
	t.Cleanup(func() {
		close(br.release)
		e.rec.close(context.Background())
	})
	return &leaseEnv{t: t, clock: clk, store: fs, db: st, exec: e, run: br, timer: tm, metrics: mt}
}

// claim plans a run due now and claims it for the executor.
func (env *leaseEnv) claim(at time.Time) store.ClaimedRun {
	env.t.Helper()
	ctx := context.Background()
	r := &model.Run{ID: model.RunID(env.timer.ID, at), TimerID: env.timer.ID, ScheduledAt: at, DueAt: at}
	if _, err := env.db.InsertRuns(ctx, []*model.Run{r}); err != nil {
		env.t.Fatal(err)
	}
	won, err := env.exec.Claim(ctx, []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: at}})
	if err != nil || len(won) != 1 {
		env.t.Fatalf("claim = %v, %v", won, err)
	}
	return won[0]
}

// start claims a run due now and starts its action.
func (env *leaseEnv) start() store.ClaimedRun {
	env.t.Helper()
	cr := env.claim(env.clock.Now())
	go env.exec.execute(cr)
	waitChan(env.t, env.run.started, "the action to start")
	return cr
}

func (env *leaseEnv) stored(id string) *model.Run {
	env.t.Helper()
	r, err := env.db.GetRun(context.Background(), id)
	if err != nil {
		env.t.Fatal(err)
	}
	return r
}

// waitFor waits for cond with a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, what, func() (bool, string) { return cond(), "not yet" })
}

func waitChan[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func (env *leaseEnv) state(cr store.ClaimedRun) (state, bool) {
	env.exec.mu.Lock()
	defer env.exec.mu.Unlock()
	a := env.exec.inflight[leaseOf(cr.Run)]
	if a == nil {
		return 0, false
	}
	return a.state, true
}

// An action whose lease cannot be extended is cancelled before the lease
// ends, and its result is not recorded: the run stays this attempt's in
// the store until a sweeper takes it over.
func TestLeaseNotConfirmedStopsAction(t *testing.T) {
	env := newLeaseEnv(t)
	cr := env.start()
	env.store.extendDown.Store(true)
	// The action started on the full lease (keeper.start); other nodes
	// wait Grace more; the executor stops the action Margin before that.
	stopAt := env.clock.Now().Add(testLease + env.exec.cfg.Grace - env.exec.cfg.Margin)
	env.clock.Advance(time.Second)
	env.exec.keep.extend() // fails: the store is down
	env.clock.Set(stopAt.Add(-time.Millisecond))
	env.exec.keep.enforce()
	if st, _ := env.state(cr); st != running {
		t.Fatalf("state after failed extensions within the lease = %v, want running", st)
	}
	env.clock.Set(stopAt)
	env.exec.keep.enforce()
	if err := waitChan(t, env.run.ended, "the action to end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("action ended with %v, want context.Canceled", err)
	}
	waitFor(t, "the attempt to be forgotten", func() bool { _, ok := env.state(cr); return !ok })
	if r := env.stored(cr.Run.ID); r.Status != model.RunRunning || r.Attempt != 1 || env.store.finishes.Load() != 0 {
		t.Errorf("run after its lease was lost = %s attempt %d, %d results written; want running attempt 1, none",
			r.Status, r.Attempt, env.store.finishes.Load())
	}
}

// No action starts on a claim's short lease: the lease is extended to the
// full lease first, so that a store stall of the node right after the
// start (shorter than the lease) never lets another node take the run
// over while the action runs. While the store does not confirm it the
// action waits; past the claim's deadline the run is given back, never
// started.
func TestActionStartsOnConfirmedLease(t *testing.T) {
	env := newLeaseEnv(t)
	cr := env.claim(env.clock.Now())
	env.store.extendDown.Store(true)
	done := make(chan struct{})
	go func() {
		env.exec.execute(cr)
		close(done)
	}()
	waitFor(t, "the unconfirmed claim to be given back", func() bool {
		select {
		case <-done:
			return true
		default:
			env.clock.Advance(50 * time.Millisecond)
			return false
		}
	})
	select {
	case <-env.run.started:
		t.Fatal("an action started on an unconfirmed claim")
	default:
	}
	if r := env.stored(cr.Run.ID); r.Status != model.RunPending || r.Attempt != 0 {
		t.Errorf("unconfirmed claim = %s attempt %d, want pending attempt 0 (given back)", r.Status, r.Attempt)
	}

	env.store.extendDown.Store(false)
	cr = env.claim(env.clock.Now())
	if r := env.stored(cr.Run.ID); !r.LeaseUntil.Before(env.clock.Now().Add(testLease / 2)) {
		t.Fatalf("claim's lease until %v, want the short claim lease", r.LeaseUntil)
	}
	go env.exec.execute(cr)
	waitChan(t, env.run.started, "the action to start")
	if r := env.stored(cr.Run.ID); !r.LeaseUntil.Equal(env.clock.Now().Add(testLease)) {
		t.Errorf("lease once the action started = %v, want the full lease %v", r.LeaseUntil, env.clock.Now().Add(testLease))
	}
	env.run.release <- struct{}{}
	waitFor(t, "the result", func() bool { return env.stored(cr.Run.ID).Status == model.RunSucceeded })
}

// TestStartsShareConfirmations: the attempts that ask for their start's
// confirmation while one is in flight share the next ExtendLeases: four
// starts, two calls.
func TestStartsShareConfirmations(t *testing.T) {
	env := newLeaseEnv(t)
	now := env.clock.Now()
	var crs []store.ClaimedRun
	for i := range 4 {
		crs = append(crs, env.claim(now.Add(-time.Duration(i)*time.Millisecond)))
	}
	env.store.extendGate = make(chan struct{})
	go env.exec.execute(crs[0])
	waitFor(t, "the first confirmation in flight", func() bool { return env.store.extendHeld.Load() == 1 })
	for _, cr := range crs[1:] {
		go env.exec.execute(cr)
	}
	waitFor(t, "three starts queued for the next confirmation", func() bool {
		env.exec.mu.Lock()
		defer env.exec.mu.Unlock()
		return env.exec.keep.starts != nil && len(env.exec.keep.starts.leases) == 3
	})
	close(env.store.extendGate)
	for range crs {
		waitChan(t, env.run.started, "the actions to start")
	}
	if n := env.store.extendCalls.Load(); n != 2 {
		t.Errorf("%d ExtendLeases calls for four starts, want 2", n)
	}
	for range crs {
		env.run.release <- struct{}{}
	}
}

// TestStartOutlastsShortOutage: a start's confirmation that the store
// refuses is sent again every Tick; once the store answers, within the
// claim's lease, the action starts.
func TestStartOutlastsShortOutage(t *testing.T) {
	env := newLeaseEnv(t)
	cr := env.claim(env.clock.Now())
	env.store.extendDown.Store(true)
	go env.exec.execute(cr)
	waitFor(t, "two refused confirmations", func() bool {
		if env.store.extendRefused.Load() >= 2 {
			return true
		}
		env.clock.Advance(20 * time.Millisecond)
		return false
	})
	env.store.extendDown.Store(false)
	waitFor(t, "the action to start", func() bool {
		select {
		case <-env.run.started:
			return true
		default:
			env.clock.Advance(20 * time.Millisecond)
			return false
		}
	})
	if r := env.stored(cr.Run.ID); r.Status != model.RunRunning || r.Attempt != 1 {
		t.Errorf("run = %s attempt %d, want running attempt 1", r.Status, r.Attempt)
	}
	env.run.release <- struct{}{}
}

// A running action's lease is extended every Lease/10: a store outage of
// most of the lease stops nothing.
func TestLeaseExtendedWhileRunning(t *testing.T) {
	env := newLeaseEnv(t)
	cr := env.start()
	if r := env.stored(cr.Run.ID); !r.LeaseUntil.Equal(env.clock.Now().Add(testLease)) {
		t.Fatalf("lease at the start = %v, want %v", r.LeaseUntil, env.clock.Now().Add(testLease))
	}
	env.clock.Advance(time.Second + time.Millisecond)
	env.exec.keep.extend()
	if r := env.stored(cr.Run.ID); !r.LeaseUntil.Equal(env.clock.Now().Add(testLease)) {
		t.Fatalf("lease after an extension = %v, want %v", r.LeaseUntil, env.clock.Now().Add(testLease))
	}
	// The store goes down for 8 s of a 10 s lease.
	env.store.extendDown.Store(true)
	for range 80 {
		env.clock.Advance(100 * time.Millisecond)
		env.exec.keep.extend()
		env.exec.keep.enforce()
	}
	if st, _ := env.state(cr); st != running {
		t.Fatalf("state after an 8 s outage = %v, want running", st)
	}
	env.store.extendDown.Store(false)
	env.exec.keep.extend()
	env.clock.Advance(5 * time.Second)
	env.exec.keep.enforce()
	if st, _ := env.state(cr); st != running {
		t.Fatalf("state once the store is back = %v, want running", st)
	}
	env.run.release <- struct{}{}
	waitFor(t, "the result", func() bool { return env.stored(cr.Run.ID).Status == model.RunSucceeded })
}

// A finished attempt's result is kept while the store does not take it,
// its lease extended meanwhile, and recorded once the store is back.
func TestResultKeptUntilRecorded(t *testing.T) {
	env := newLeaseEnv(t)
	cr := env.start()
	env.store.finishDown.Store(true)
	env.run.release <- struct{}{}
	waitFor(t, "the attempt to finish", func() bool { st, _ := env.state(cr); return st == finished })
	waitFor(t, "the result to be kept", func() bool { return env.exec.rec.kept.Load() == 1 })
	// Long past the claim's lease: the waiting result keeps it extended.
	for range 30 {
		env.clock.Advance(100 * time.Millisecond)
		env.exec.keep.extend()
		env.exec.keep.enforce()
	}
	if r := env.stored(cr.Run.ID); r.Status != model.RunRunning || !r.LeaseUntil.After(env.clock.Now()) {
		t.Fatalf("run while its result waits = %s, lease until %v (now %v); want running with a live lease",
			r.Status, r.LeaseUntil, env.clock.Now())
	}
	env.store.finishDown.Store(false)
	waitFor(t, "the result to be recorded", func() bool { return env.stored(cr.Run.ID).Status == model.RunSucceeded })
	if _, ok := env.state(cr); ok {
		t.Error("attempt still in flight after its result was recorded")
	}
}

// The keeper extends many leases in chunks, the most urgent first, and a
// chunk the store answers is confirmed even when a later one fails.
func TestLeasesExtendedInChunks(t *testing.T) {
	env := newLeaseEnv(t)
	ctx := context.Background()
	now := env.clock.Now()
	const n = extendChunk + 100
	var runs []*model.Run
	var entries []index.Entry
	for i := range n {
		at := now.Add(time.Duration(i) * time.Millisecond)
		runs = append(runs, &model.Run{ID: model.RunID(env.timer.ID, at), TimerID: env.timer.ID, ScheduledAt: at, DueAt: at})
		entries = append(entries, index.Entry{RunID: runs[i].ID, TimerID: env.timer.ID, DueAt: at})
	}
	if _, err := env.db.InsertRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	won, err := env.exec.Claim(ctx, entries)
	if err != nil || len(won) != n {
		t.Fatalf("claimed %d of %d: %v", len(won), n, err)
	}
	// Every attempt finished, its result waiting; the last 100 have the
	// latest deadlines.
	env.exec.mu.Lock()
	first := map[store.Lease]time.Time{}
	for i, cr := range won {
		a := env.exec.inflight[leaseOf(cr.Run)]
		a.state, a.since = finished, now
		a.deadline = now.Add(time.Second + time.Duration(i)*time.Microsecond)
		first[leaseOf(cr.Run)] = a.deadline
	}
	env.exec.mu.Unlock()
	env.clock.Advance(PromoteAfter)
	env.store.extendCalls.Store(0)
	env.store.extendUpTo.Store(1)
	env.exec.keep.extend()
	env.exec.mu.Lock()
	defer env.exec.mu.Unlock()
	extended := 0
	for i, cr := range won {
		a := env.exec.inflight[leaseOf(cr.Run)]
		moved := a.deadline.After(first[leaseOf(cr.Run)])
		if moved {
			extended++
		}
		if moved != (i < extendChunk) {
			t.Errorf("attempt %d (deadline rank %d): extended %v, want %v", i, i, moved, i < extendChunk)
		}
	}
	if extended != extendChunk {
		t.Errorf("%d leases confirmed, want the first chunk of %d", extended, extendChunk)
	}
}

// A store that records part of a batch before it fails (store.Store's
// FinishRuns may commit in parts): the recorder counts the results it
// reported recorded and keeps only the others for another try.
func TestResultsRecordedInPart(t *testing.T) {
	env := newLeaseEnv(t)
	now := env.clock.Now()
	var batch []pending
	for i := range 4 {
		cr := env.claim(now.Add(time.Duration(i) * time.Second))
		batch = append(batch, pending{res: model.Result{RunID: cr.Run.ID, Node: "n1", Attempt: cr.Run.Attempt,
			Status: model.RunSucceeded, StartedAt: now, FinishedAt: now}, timer: env.timer})
	}
	env.store.finishHalf.Store(true)
	kept := env.exec.rec.write(batch)
	if len(kept) != 2 || kept[0].res.RunID != batch[2].res.RunID || kept[1].res.RunID != batch[3].res.RunID {
		t.Fatalf("kept %d results after a store that recorded 2 of 4, want the last 2", len(kept))
	}
	env.store.finishHalf.Store(false)
	if kept := env.exec.rec.write(kept); len(kept) != 0 {
		t.Fatalf("kept %d results after the store took them", len(kept))
	}
	for _, p := range batch {
		if r := env.stored(p.res.RunID); r.Status != model.RunSucceeded {
			t.Errorf("run %s = %s, want succeeded", r.ID, r.Status)
		}
	}
}

// When another node takes the run over, the extension says so, the action
// is cancelled, and a later attempt of the same run on this node is not
// disturbed by the old one's end.
func TestTakenOverAttemptIsStoppedAlone(t *testing.T) {
	env := newLeaseEnv(t)
	ctx := context.Background()
	cr := env.start()
	// The sweeper of another node requeues the run (its lease looked
	// expired), and this node claims it again: attempt 2.
	r1 := *cr.Run
	r1.LeaseUntil = nil
	if err := env.store.Requeue(ctx, &r1, env.clock.Now(), env.clock.Now()); err != nil {
		t.Fatal(err)
	}
	won, err := env.exec.Claim(ctx, []index.Entry{{RunID: cr.Run.ID, TimerID: cr.Run.TimerID, DueAt: env.clock.Now()}})
	if err != nil || len(won) != 1 || won[0].Run.Attempt != 2 {
		t.Fatalf("second claim = %v, %v", won, err)
	}
	env.clock.Advance(time.Second + time.Millisecond) // attempt 1's lease needs extending
	env.exec.keep.extend()
	if err := waitChan(t, env.run.ended, "attempt 1 to end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("attempt 1 ended with %v, want context.Canceled", err)
	}
	waitFor(t, "attempt 1 to be forgotten", func() bool { _, ok := env.state(cr); return !ok })
	if st, ok := env.state(won[0]); !ok || st != claimed {
		t.Fatalf("attempt 2 after attempt 1 ended: state %v, present %v; want claimed", st, ok)
	}
	go env.exec.execute(won[0])
	waitChan(t, env.run.started, "attempt 2 to start")
	env.run.release <- struct{}{}
	waitFor(t, "attempt 2's result", func() bool { return env.stored(cr.Run.ID).Status == model.RunSucceeded })
	if r := env.stored(cr.Run.ID); r.Attempt != 2 || r.Node != "n1" {
		t.Errorf("run = attempt %d on %s, want attempt 2 on n1", r.Attempt, r.Node)
	}
}

// A claim whose lease ran out before its action started (the node paused)
// is not started: it is given back, and the next attempt runs it.
func TestStaleClaimNotStarted(t *testing.T) {
	env := newLeaseEnv(t)
	cr := env.claim(env.clock.Now())
	env.clock.Advance(2 * time.Second) // paused past the claim's lease
	env.exec.execute(cr)
	select {
	case <-env.run.started:
		t.Fatal("a stale claim was started")
	default:
	}
	if r := env.stored(cr.Run.ID); r.Status != model.RunPending || r.Attempt != 0 {
		t.Errorf("stale claim = %s attempt %d, want pending attempt 0 (given back)", r.Status, r.Attempt)
	}
}

// Shutdown cancels the actions that outlive its deadline and gives their
// runs back as pending, same id, attempt kept.
func TestShutdownGivesBackRunningRuns(t *testing.T) {
	env := newLeaseEnv(t)
	cr := env.start()
	env.exec.mu.Lock()
	env.exec.closing = true
	env.exec.mu.Unlock()
	if n := env.exec.keep.stopAll("node shutting down", true); n != 1 {
		t.Fatalf("stopAll = %d, want 1", n)
	}
	if err := waitChan(t, env.run.ended, "the action to end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("action ended with %v, want context.Canceled", err)
	}
	waitFor(t, "the run to be given back", func() bool { return env.stored(cr.Run.ID).Status == model.RunPending })
	if r := env.stored(cr.Run.ID); r.Attempt != 1 || r.ID != cr.Run.ID {
		t.Errorf("given back run = %+v, want attempt 1", r)
	}
	if _, err := env.exec.Claim(context.Background(), []index.Entry{{RunID: cr.Run.ID, TimerID: cr.Run.TimerID, DueAt: env.clock.Now()}}); !errors.Is(err, ErrShutdown) {
		t.Errorf("claim while shutting down = %v, want ErrShutdown", err)
	}
}

// TestLifecycle: Start and Stop are safe twice, Stop without Start, and a
// stopped executor does not start again (its pool is released).
func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	newExec := func() *Executor {
		e, err := New(Config{Store: nil, Index: memindex.New(1), NodeID: "n1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := startstoptest.Lifecycle(t, newExec)
	if _, err := e.Claim(ctx, []index.Entry{{RunID: "r", TimerID: "t", DueAt: time.Now()}}); !errors.Is(err, ErrShutdown) {
		t.Errorf("Claim after Stop = %v, want ErrShutdown", err)
	}
}
