package executor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// fakeFence is a LazyFence whose answer the test sets: ok, and a deadline
// of the lock's end (by the cluster's clock); fenced, Fenced's answer.
type fakeFence struct {
	mu             sync.Mutex
	ok             bool
	fenced         bool
	deadline       time.Time
	fencedDeadline time.Time
}

func (f *fakeFence) Fenced(string, time.Time) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fencedDeadline, f.fenced
}

// setFenced sets Fenced's answer: fenced, until deadline.
func (f *fakeFence) setFenced(fenced bool, deadline time.Time) {
	f.mu.Lock()
	f.fenced, f.fencedDeadline = fenced, deadline
	f.mu.Unlock()
}

func (f *fakeFence) LazyDeadline(string, time.Time) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deadline, f.ok
}

func (f *fakeFence) set(deadline time.Time, ok bool) {
	f.mu.Lock()
	f.deadline, f.ok = deadline, ok
	f.mu.Unlock()
}

// countingClaims counts the claim writes that reach the store.
type countingClaims struct {
	store.Store
	claims, promotes atomic.Int32
	promoteDown      atomic.Bool
	// afterPeek, when set, is called when PeekRuns has read.
	afterPeek atomic.Pointer[func()]
}

func (s *countingClaims) PeekRuns(ctx context.Context, node string, ids []string, dueBy time.Time) ([]store.ClaimedRun, error) {
	got, err := s.Store.PeekRuns(ctx, node, ids, dueBy)
	if f := s.afterPeek.Load(); f != nil {
		(*f)()
	}
	return got, err
}

func (s *countingClaims) ClaimRuns(ctx context.Context, cs []store.Claim) ([]store.ClaimedRun, error) {
	s.claims.Add(int32(len(cs)))
	return s.Store.ClaimRuns(ctx, cs)
}

func (s *countingClaims) PromoteRuns(ctx context.Context, node string, ls []store.Lease, now, until time.Time) ([]store.Lease, error) {
	if s.promoteDown.Load() {
		return nil, errDown
	}
	s.promotes.Add(int32(len(ls)))
	return s.Store.PromoteRuns(ctx, node, ls, now, until)
}

type lazyEnv struct {
	*leaseEnv
	fence  *fakeFence
	counts *countingClaims
}

// newLazyEnv is newLeaseEnv with lazy claims: the fence lets every run
// start lazily until 1.25 s from now (a lock just extended).
func newLazyEnv(t *testing.T) *lazyEnv {
	f := &fakeFence{}
	var counts *countingClaims
	env := newLeaseEnv(t, func(c *Config) {
		counts = &countingClaims{Store: c.Store}
		c.Store = counts
		c.Lazy = f
	})
	f.set(env.clock.Now().Add(1250*time.Millisecond), true)
	return &lazyEnv{leaseEnv: env, fence: f, counts: counts}
}

// plan inserts a pending run due at at, manual or scheduled.
func (env *lazyEnv) plan(at time.Time, manual bool) *model.Run {
	env.t.Helper()
	r := &model.Run{ID: model.RunID(env.timer.ID, at), TimerID: env.timer.ID, ScheduledAt: at, DueAt: at, Manual: manual}
	if _, err := env.store.InsertRuns(context.Background(), []*model.Run{r}); err != nil {
		env.t.Fatal(err)
	}
	return r
}

func (env *lazyEnv) attempt(cr store.ClaimedRun) *attempt {
	env.exec.mu.Lock()
	defer env.exec.mu.Unlock()
	return env.exec.inflight[leaseOf(cr.Run)]
}

// A run started on a lazy claim writes nothing before its result: the
// store holds it pending at attempt 0 while it runs, and its result is
// recorded onto the pending row with this node and attempt 1.
func TestLazyClaimWritesOnlyTheResult(t *testing.T) {
	env := newLazyEnv(t)
	cr := env.start()
	if a := env.attempt(cr); a == nil || !a.lazy || cr.Run.Attempt != 1 || cr.Run.Node != "n1" {
		t.Fatalf("claimed run = attempt %d node %q, in flight %+v; want a lazy attempt 1 of n1", cr.Run.Attempt, cr.Run.Node, a)
	}
	if r := env.stored(cr.Run.ID); r.Status != model.RunPending || r.Attempt != 0 {
		t.Fatalf("stored run while it runs lazily = %s attempt %d, want pending attempt 0", r.Status, r.Attempt)
	}
	env.run.release <- struct{}{}
	waitFor(t, "the result", func() bool { return env.stored(cr.Run.ID).Status == model.RunSucceeded })
	if r := env.stored(cr.Run.ID); r.Attempt != 1 || r.Node != "n1" {
		t.Errorf("recorded run = attempt %d node %q, want 1, n1", r.Attempt, r.Node)
	}
	if n, p := env.counts.claims.Load(), env.counts.promotes.Load(); n != 0 || p != 0 {
		t.Errorf("claim writes = %d, promotions %d; want none", n, p)
	}
}

// A lazy attempt that runs PromoteAfter gets its claim written with the
// full lease; its result is then recorded as any claimed attempt's.
func TestLazyPromotedAfterPromoteAfter(t *testing.T) {
	env := newLazyEnv(t)
	cr := env.start()
	env.clock.Advance(PromoteAfter)
	env.fence.set(env.clock.Now().Add(1250*time.Millisecond), true)
	env.exec.extend()
	r := env.stored(cr.Run.ID)
	if r.Status != model.RunRunning || r.Attempt != 1 || r.Node != "n1" || r.LeaseUntil == nil ||
		!r.LeaseUntil.Equal(env.clock.Now().Add(testLease)) {
		t.Fatalf("stored run after promotion = %s attempt %d node %q lease %v; want running 1 n1 with the full lease",
			r.Status, r.Attempt, r.Node, r.LeaseUntil)
	}
	if a := env.attempt(cr); a == nil || a.lazy {
		t.Fatalf("attempt after promotion: %+v, want no longer lazy", a)
	}
	// Its lease is extended as any claimed attempt's.
	env.clock.Advance(2 * time.Second)
	env.exec.extend()
	if r := env.stored(cr.Run.ID); r.LeaseUntil == nil || !r.LeaseUntil.Equal(env.clock.Now().Add(testLease)) {
		t.Fatalf("lease 2 s after promotion = %v, want %v (extended)", r.LeaseUntil, env.clock.Now().Add(testLease))
	}
	// From now on its deadline is its lease's: losing the slice stops
	// nothing.
	env.fence.set(time.Time{}, false)
	env.clock.Advance(2 * time.Second)
	env.exec.enforce()
	if st, _ := env.state(cr); st != running {
		t.Fatalf("promoted attempt after its slice was lost: %v, want running", st)
	}
	env.run.release <- struct{}{}
	waitFor(t, "the result", func() bool { return env.stored(cr.Run.ID).Status == model.RunSucceeded })
}

// A lazy attempt whose slice lock is about to end is promoted whatever its
// age. One whose slice is lost (the fence says no) is promoted at once;
// when the promotion fails (the next holder fenced the run) it is stopped,
// and when the promotion does not come in time it is stopped at its
// lock's deadline: its result is never recorded, and the run is left
// pending at the next attempt count (fenced by the node itself in the
// last case, since the action may have had its effect).
func TestLazyLockEnding(t *testing.T) {
	t.Run("promoted", func(t *testing.T) {
		env := newLazyEnv(t)
		// A lock last confirmed a while ago: its deadline is 600 ms away.
		env.fence.set(env.clock.Now().Add(600*time.Millisecond), true)
		cr := env.start()
		env.clock.Advance(PromoteAfter / 2) // the attempt is young
		env.exec.extend()
		if r := env.stored(cr.Run.ID); r.Status != model.RunRunning {
			t.Fatalf("stored run with its lock about to end = %s, want running (promoted)", r.Status)
		}
	})
	stopped := func(t *testing.T, env *lazyEnv, cr store.ClaimedRun, attempt int) {
		t.Helper()
		if err := waitChan(t, env.run.ended, "the action to end"); !errors.Is(err, context.Canceled) {
			t.Fatalf("action ended with %v, want context.Canceled", err)
		}
		waitFor(t, "the attempt to be forgotten", func() bool { _, ok := env.state(cr); return !ok })
		if r := env.stored(cr.Run.ID); r.Status != model.RunPending || r.Attempt != attempt || env.store.finishes.Load() != 0 {
			t.Errorf("run after its slice was lost = %s attempt %d, %d results written; want pending %d, none",
				r.Status, r.Attempt, env.store.finishes.Load(), attempt)
		}
	}
	t.Run("taken over", func(t *testing.T) {
		env := newLazyEnv(t)
		cr := env.start()
		if _, err := env.store.FenceSlice(context.Background(), cr.Run.DueAt, cr.Run.DueAt.Add(time.Second), 1, 0); err != nil {
			t.Fatal(err)
		}
		env.fence.set(time.Time{}, false)
		env.exec.enforce()
		if st, _ := env.state(cr); st != running {
			t.Fatalf("orphaned lazy attempt before the keeper's round: %v, want running", st)
		}
		env.exec.extend() // the promotion fails: the run was fenced
		stopped(t, env, cr, 1)
	})
	t.Run("store down", func(t *testing.T) {
		// The lock holds, but the store takes no promotion: the attempt
		// runs on a claim's lease from its start, no longer.
		env := newLazyEnv(t)
		env.counts.promoteDown.Store(true)
		cr := env.start()
		for range 12 {
			env.clock.Advance(100 * time.Millisecond)
			env.fence.set(env.clock.Now().Add(1250*time.Millisecond), true) // the lock is extended
			env.exec.extend()
			env.exec.enforce()
			if st, _ := env.state(cr); st != running {
				t.Fatalf("lazy attempt stopped %v after its start, within its claim's lease", env.clock.Now().Sub(*cr.Run.StartedAt))
			}
		}
		env.clock.Advance(time.Second)
		env.fence.set(env.clock.Now().Add(1250*time.Millisecond), true)
		env.exec.enforce()
		stopped(t, env, cr, 1)
	})
	t.Run("deadline", func(t *testing.T) {
		env := newLazyEnv(t)
		cr := env.start()
		env.fence.set(time.Time{}, false)
		env.clock.Advance(1250 * time.Millisecond)
		env.exec.enforce()
		stopped(t, env, cr, 1) // fenced by the node itself: the attempt had begun
	})
}

// A lazy attempt whose run was fenced meanwhile (another node took the
// slice over) does not record its result: the run stays pending with the
// fence's attempt count, and its next attempt is attempt 2.
func TestLazyResultAfterFence(t *testing.T) {
	env := newLazyEnv(t)
	cr := env.start()
	if n, err := env.store.FenceSlice(context.Background(), cr.Run.DueAt.Add(-time.Second), cr.Run.DueAt.Add(time.Second), 1, 0); err != nil || n != 1 {
		t.Fatalf("FenceSlice = %d, %v", n, err)
	}
	env.run.release <- struct{}{}
	waitFor(t, "the attempt to be forgotten", func() bool { _, ok := env.state(cr); return !ok })
	if r := env.stored(cr.Run.ID); r.Status != model.RunPending || r.Attempt != 1 {
		t.Errorf("run after a fenced lazy result = %s attempt %d, want pending attempt 1", r.Status, r.Attempt)
	}
}

// Runs the fence does not allow, and runs of timers whose overlap policy
// reads the store, are claimed with a write; a run already in flight here
// lazily (a recheck found it pending again) is not claimed twice.
func TestLazyClaimChoice(t *testing.T) {
	t.Run("fence window", func(t *testing.T) {
		env := newLazyEnv(t)
		env.fence.set(time.Time{}, false)
		env.fence.setFenced(true, env.clock.Now().Add(time.Second))
		cr := env.claim(env.clock.Now())
		if r := env.stored(cr.Run.ID); r.Status != model.RunRunning || env.counts.claims.Load() != 1 {
			t.Errorf("run claimed in the fence window = %s, %d claims; want running, 1", r.Status, env.counts.claims.Load())
		}
	})
	// A run of the fence window due after the lock's confirmed deadline
	// waits for an extension: the next holder of a lock that expired
	// would start it lazily, beside a claim with a write landing late.
	// ClaimBatch gives it back to the trigger; Claim to the index.
	t.Run("fence window, due after the lock's deadline", func(t *testing.T) {
		env := newLazyEnv(t)
		env.fence.set(time.Time{}, false)
		env.fence.setFenced(true, env.clock.Now().Add(-time.Millisecond))
		r := env.plan(env.clock.Now(), false)
		en := index.Entry{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt}
		won, again, err := env.exec.ClaimBatch(context.Background(), []index.Entry{en})
		if err != nil || len(won) != 0 || len(again) != 1 || again[0] != en {
			t.Fatalf("ClaimBatch = %d won, again %v, %v; want it given back", len(won), again, err)
		}
		if n := env.counts.claims.Load(); n != 0 || env.stored(r.ID).Status != model.RunPending {
			t.Fatalf("%d claim writes, stored %s; want none, pending", n, env.stored(r.ID).Status)
		}
		if _, err := env.exec.Claim(context.Background(), []index.Entry{en}); err != nil {
			t.Fatal(err)
		}
		idx := env.exec.cfg.Index
		if got, _, err := idx.Range(context.Background(), index.SliceOf(r.TimerID, r.DueAt, idx.Buckets()), r.DueAt.Add(time.Second)); err != nil || len(got) != 1 {
			t.Fatalf("index after Claim = %v, %v; want the run back in it", got, err)
		}
	})
	t.Run("misplaced, lock confirmed", func(t *testing.T) {
		env := newLazyEnv(t)
		env.timer.Action = model.Action{Type: model.ActionHandler, Handler: &model.HandlerAction{Name: "elsewhere"}}
		if err := env.store.UpdateTimer(context.Background(), env.timer); err != nil {
			t.Fatal(err)
		}
		r := env.plan(env.clock.Now(), false)
		won, err := env.exec.Claim(context.Background(), []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt}})
		if err != nil {
			t.Fatal(err)
		}
		if n := env.counts.claims.Load(); n != 1 || len(won) != 1 || env.stored(r.ID).Status != model.RunRunning {
			t.Errorf("run of another node's handler in a held slice: %d claim writes, %d won, stored %s; want it claimed with a write",
				n, len(won), env.stored(r.ID).Status)
		}
	})
	// Claimed ahead of its instant, a run of another node's handler due
	// after the lock's deadline waits: a claim that lands late would hand
	// it to that node beside the next holder's lazy start.
	t.Run("misplaced, due after the lock's deadline", func(t *testing.T) {
		env := newLazyEnv(t)
		env.timer.Action = model.Action{Type: model.ActionHandler, Handler: &model.HandlerAction{Name: "elsewhere"}}
		if err := env.store.UpdateTimer(context.Background(), env.timer); err != nil {
			t.Fatal(err)
		}
		env.fence.set(env.clock.Now().Add(100*time.Millisecond), true)
		r := env.plan(env.clock.Now().Add(400*time.Millisecond), false)
		won, again, err := env.exec.ClaimBatch(context.Background(), []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt}})
		if err != nil || len(won) != 0 || len(again) != 1 || env.counts.claims.Load() != 0 {
			t.Fatalf("ClaimBatch = %d won, %d again, %d claim writes, %v; want it given back unclaimed", len(won), len(again), env.counts.claims.Load(), err)
		}
	})
	// A node that does not hold a run's slice (it lost the lock and has
	// not dropped the slice yet, or never held it) must not claim it with
	// a write: the slice's owner may be performing it lazily, which the
	// claim would not see, and both would deliver it under one attempt.
	t.Run("slice not held", func(t *testing.T) {
		env := newLazyEnv(t)
		env.fence.set(time.Time{}, false)
		r := env.plan(env.clock.Now(), false)
		won, err := env.exec.Claim(context.Background(), []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt}})
		if err != nil || len(won) != 0 {
			t.Fatalf("claim of a run in a slice not held = %d runs, %v; want none", len(won), err)
		}
		if got := env.stored(r.ID); got.Status != model.RunPending || got.Attempt != 0 || env.counts.claims.Load() != 0 {
			t.Errorf("run in a slice not held: stored %s attempt %d after %d claim writes; want pending 0, none", got.Status, got.Attempt, env.counts.claims.Load())
		}
	})
	t.Run("slice not held, manual run", func(t *testing.T) {
		env := newLazyEnv(t)
		env.fence.set(time.Time{}, false)
		r := env.plan(env.clock.Now(), true)
		won, err := env.exec.Claim(context.Background(), []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt}})
		if err != nil || len(won) != 1 || env.stored(r.ID).Status != model.RunRunning {
			t.Fatalf("claim of a manual run in a slice not held = %d runs, %v; want it claimed with a write", len(won), err)
		}
	})
	t.Run("overlap policy", func(t *testing.T) {
		env := newLazyEnv(t)
		env.timer.Policy.Overlap = model.OverlapSkip
		if err := env.store.UpdateTimer(context.Background(), env.timer); err != nil {
			t.Fatal(err)
		}
		cr := env.claim(env.clock.Now())
		if a := env.attempt(cr); a == nil || a.lazy || env.stored(cr.Run.ID).Status != model.RunRunning {
			t.Errorf("run of an overlap=skip timer: claimed lazily, want a write")
		}
	})
	t.Run("in flight", func(t *testing.T) {
		env := newLazyEnv(t)
		cr := env.claim(env.clock.Now())
		again, err := env.exec.Claim(context.Background(), []index.Entry{{RunID: cr.Run.ID, TimerID: cr.Run.TimerID, DueAt: cr.Run.DueAt}})
		if err != nil || len(again) != 0 {
			t.Errorf("second claim of a run in flight lazily = %d runs, %v; want none", len(again), err)
		}
	})
}

// PromoteLazy (called before a slice lock is released) writes the claims
// of the lazy attempts that started, so that the next holder's fence
// leaves them alone; a lazy claim not yet started is left to its start,
// which the fence then refuses.
func TestPromoteLazyBeforeRelease(t *testing.T) {
	env := newLazyEnv(t)
	cr := env.start()
	later := env.claim(env.clock.Now().Add(300 * time.Millisecond))
	if err := env.exec.PromoteLazy(context.Background(), nil); err != nil {
		t.Fatalf("PromoteLazy = %v, want nil (promoted, no claim in flight)", err)
	}
	if r := env.stored(cr.Run.ID); r.Status != model.RunRunning || r.Attempt != 1 {
		t.Fatalf("started run after PromoteLazy = %s attempt %d, want running 1", r.Status, r.Attempt)
	}
	if r := env.stored(later.Run.ID); r.Status != model.RunPending {
		t.Fatalf("claim not started after PromoteLazy = %s, want pending", r.Status)
	}
	env.fence.set(time.Time{}, false) // the lock is released
	env.clock.Advance(300 * time.Millisecond)
	env.exec.execute(later)
	if _, ok := env.state(later); ok {
		t.Error("lazy claim refused at its start: still in flight")
	}
	if r := env.stored(later.Run.ID); r.Status != model.RunPending || r.Attempt != 0 {
		t.Errorf("lazy claim refused at its start: stored %s attempt %d, want pending 0", r.Status, r.Attempt)
	}
}

// A lazy claim whose read saw a run pending just before this node's
// attempt of it ended and was recorded does not start the run again (a
// recheck, or a store-backed index polled every 200 ms, finds runs
// performed lazily still pending until their results are recorded).
func TestLazyClaimReadRacesResult(t *testing.T) {
	env := newLazyEnv(t)
	cr := env.start()
	peeked, proceed := make(chan struct{}), make(chan struct{})
	hook := func() {
		close(peeked)
		<-proceed
	}
	env.counts.afterPeek.Store(&hook)
	again := make(chan []store.ClaimedRun, 1)
	go func() {
		won, err := env.exec.Claim(context.Background(), []index.Entry{{RunID: cr.Run.ID, TimerID: cr.Run.TimerID, DueAt: cr.Run.DueAt}})
		if err != nil {
			t.Error(err)
		}
		again <- won
	}()
	waitChan(t, peeked, "the second claim's read")
	env.run.release <- struct{}{}
	waitFor(t, "the first attempt recorded and forgotten", func() bool {
		_, inFlight := env.state(cr)
		return !inFlight && env.stored(cr.Run.ID).Status == model.RunSucceeded
	})
	close(proceed)
	if won := waitChan(t, again, "the second claim"); len(won) != 0 {
		t.Errorf("claim whose read raced the first attempt's result won %d runs, want none", len(won))
	}
}

// Which lazy attempts the keeper promotes: running ones that are old or
// whose lock's deadline is near, and any whose slice is gone; not a
// finished one whose result waits while its slice is held (its result's
// fence holds it), nor a claim waiting for a worker.
func TestLazyPromotable(t *testing.T) {
	t.Parallel()
	now := time.Now()
	e := &Executor{}
	for _, tc := range []struct {
		name string
		a    attempt
		want bool
	}{
		{"running, young, lock confirmed", attempt{lazy: true, state: running, since: now, deadline: now.Add(time.Second)}, false},
		{"running past PromoteAfter", attempt{lazy: true, state: running, since: now.Add(-PromoteAfter), deadline: now.Add(time.Second)}, true},
		{"running, deadline near", attempt{lazy: true, state: running, since: now, deadline: now.Add(promoteSoon / 2)}, true},
		{"running, slice gone", attempt{lazy: true, state: running, since: now, deadline: now.Add(time.Second), orphan: true}, true},
		{"finished, deadline near", attempt{lazy: true, state: finished, since: now.Add(-time.Second), deadline: now.Add(promoteSoon / 2)}, false},
		{"finished, slice gone", attempt{lazy: true, state: finished, since: now, deadline: now.Add(time.Second), orphan: true}, true},
		{"claimed, waiting for a worker", attempt{lazy: true, state: claimed, submitted: true, since: now.Add(-time.Second), deadline: now.Add(promoteSoon / 2)}, false},
		{"promoted already", attempt{state: running, since: now.Add(-time.Second), deadline: now}, false},
	} {
		if got := e.promotable(&tc.a, now); got != tc.want {
			t.Errorf("%s: promotable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A claim in flight when PromoteLazy begins makes the release not clean
// (ErrClaiming): a claim with a write decided while the slice was held may
// be written after it is released.
func TestPromoteLazyClaimsInFlight(t *testing.T) {
	env := newLazyEnv(t)
	// A Claim call between its decision and its write, that does not end
	// within ClaimsWait.
	end := env.exec.claims.begin()
	errc := make(chan error, 1)
	idle := env.clock.Waiters()
	go func() { errc <- env.exec.PromoteLazy(context.Background(), nil) }()
	waitFor(t, "PromoteLazy waiting for the claim", func() bool { return env.clock.Waiters() > idle })
	env.clock.Advance(ClaimsWait)
	if err := <-errc; !errors.Is(err, ErrClaiming) {
		t.Fatalf("PromoteLazy with a claim in flight = %v, want ErrClaiming", err)
	}
	// One that ends within it.
	go func() { errc <- env.exec.PromoteLazy(context.Background(), nil) }()
	waitFor(t, "PromoteLazy waiting for the claim", func() bool { return env.clock.Waiters() > idle })
	end()
	if err := <-errc; err != nil {
		t.Fatalf("PromoteLazy with a claim that ended while it waited = %v, want nil", err)
	}
	// None in flight: nothing to wait for.
	if err := env.exec.PromoteLazy(context.Background(), nil); err != nil {
		t.Fatalf("PromoteLazy with no claim in flight = %v, want nil", err)
	}
}
