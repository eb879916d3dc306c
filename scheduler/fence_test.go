package scheduler

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/lock"
	"github.com/chimehq/chime/lock/memlock"
)

// fenceLog records the Fence calls.
type fenceLog struct {
	mu    sync.Mutex
	calls map[index.Slice]time.Time // slice -> until
	fail  bool
}

func (f *fenceLog) fence(_ context.Context, s index.Slice, until time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("store down (test)")
	}
	f.calls[s] = until
	return nil
}

// settle ticks e's scheduler every 500 ms for one lock TTL (1.5 s), the
// wait before a slice taken during its minute is fenced, and waits for
// the fences written in the background. It first waits (by the real
// clock) until each slice waiting for its fence has armed its wait on the
// fake clock: a wait armed after an Advance counts its TTL from the
// advanced time and would outlast the last Advance (the test then hung).
func settle(e *env) {
	armed(e)
	for range 3 {
		e.clk.Advance(500 * time.Millisecond)
		e.sched.tick(e.clk.Now())
	}
	e.sched.wg.Wait()
}

// armed waits (by the real clock) until each slice of e waiting for its
// fence has armed its wait on the fake clock.
func armed(e *env) {
	e.sched.mu.Lock()
	waiting := 0
	for sl := range e.sched.held {
		if _, fenced := e.sched.fences[sl]; !fenced {
			waiting++
		}
	}
	e.sched.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); e.clk.Waiters() < waiting && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

func (f *fenceLog) get(s index.Slice) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.calls[s]
	return u, ok
}

// timerIn returns a timer id whose runs fall in bucket b.
func timerIn(t *testing.T, b int) string {
	t.Helper()
	for i := range 1000 {
		id := "timer-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if index.BucketOf(id, buckets) == b {
			return id
		}
	}
	t.Fatal("no timer id in bucket")
	return ""
}

// With Fence set, a slice taken during its minute is fenced for the runs
// its previous holder may have started (due before the window after the
// taking), which LazyDeadline leaves to claims with a write; later runs
// may start lazily until the lock's confirmed end less LazyMargin, which
// each extension moves. The fence is written one lock TTL after the
// taking, and the slice dispatched then. A slice taken before its minute
// (prefetch) needs no fence. A lost lock ends the fence at once.
func TestLazyDeadline(t *testing.T) {
	t.Parallel()
	fl := &fenceLog{calls: map[index.Slice]time.Time{}}
	e := newEnv(t, at(20), func(c *Config) {
		c.Fence = fl.fence
		c.LockTTL = 1500 * time.Millisecond
		c.Locker = redisLike{c.Locker}
	})
	cur := minuteOf(minuteAt)
	tm := timerIn(t, 1)
	sl := index.Slice{Minute: cur, Bucket: 1}
	if _, ok := e.sched.LazyDeadline(tm, at(30)); ok {
		t.Fatal("LazyDeadline before the slice is taken: ok")
	}
	if _, ok := e.sched.Fenced(tm, at(20.5)); ok {
		t.Fatal("Fenced before the slice is taken")
	}
	e.sched.tick(e.clk.Now())
	if _, fenced := fl.get(sl); fenced || e.trig.held()[cur] != 0 {
		t.Fatal("a slice taken during its minute was fenced or dispatched at once")
	}
	if _, ok := e.sched.Fenced(tm, at(20.5)); ok {
		t.Fatal("Fenced before the fence is written")
	}
	settle(e) // one lock TTL, then the fences
	if got := e.trig.held()[cur]; got != buckets {
		t.Fatalf("slices of the current minute dispatched once fenced: %d, want %d", got, buckets)
	}
	window := e.sched.fenceWindow()
	until, fenced := fl.get(sl)
	if !fenced || !until.Equal(at(20).Add(window)) {
		t.Fatalf("fence of the current minute's slice = %v, %v; want until %v", until, fenced, at(20).Add(window))
	}
	if _, ok := e.sched.LazyDeadline(tm, at(20).Add(window)); ok {
		t.Error("LazyDeadline of a run due at the window's end: ok, want a claim with a write")
	}
	if _, ok := e.sched.Fenced(tm, at(20).Add(window)); !ok {
		t.Error("Fenced for a run due at the window's end: false")
	}
	if _, ok := e.sched.Fenced(tm, at(30)); ok {
		t.Error("Fenced for a run due after the window: true")
	}
	// Fenced's deadline is LazyDeadline's: a run of the window due after
	// it waits for the next extension.
	if d, _ := e.sched.Fenced(tm, at(20.5)); !d.Equal(at(21.5).Add(1500*time.Millisecond - LazyMargin)) {
		t.Errorf("Fenced deadline = %v, want the extension at 21.5 s + TTL - LazyMargin", d)
	}
	d, ok := e.sched.LazyDeadline(tm, at(30))
	if want := at(21.5).Add(1500*time.Millisecond - LazyMargin); !ok || !d.Equal(want) {
		t.Fatalf("LazyDeadline after the window = %v, %v; want %v (the extension at 21.5 s)", d, ok, want)
	}
	// An extension moves the deadline.
	e.clk.Set(at(22))
	e.sched.tick(e.clk.Now())
	if d, ok := e.sched.LazyDeadline(tm, at(30)); !ok || !d.Equal(at(22).Add(1500*time.Millisecond-LazyMargin)) {
		t.Fatalf("LazyDeadline after an extension = %v, %v", d, ok)
	}
	// The next minute's slices, taken within Prefetch, need no fence.
	e.clk.Set(at(58))
	e.sched.tick(e.clk.Now())
	next := index.Slice{Minute: cur + 1, Bucket: 1}
	if _, fenced := fl.get(next); fenced {
		t.Error("a slice taken before its minute was fenced")
	}
	if _, ok := e.sched.LazyDeadline(tm, at(60.5)); !ok {
		t.Error("LazyDeadline of a run of a slice taken before its minute: not ok")
	}
	// Another node takes the lock (this one's expired): the fence ends at
	// the next extension.
	e.clk.Advance(2 * time.Second)
	if ok, err := e.locker.TryLock(context.Background(), LockKey(next), "other", time.Minute); err != nil || !ok {
		t.Fatalf("other node's TryLock = %v, %v", ok, err)
	}
	e.sched.tick(e.clk.Now())
	if _, ok := e.sched.LazyDeadline(tm, at(60.5)); ok {
		t.Error("LazyDeadline after the lock was lost: ok")
	}
	_, ok1 := e.sched.Fenced(tm, at(60.5))
	_, ok2 := e.sched.Fenced(tm, at(60))
	if ok1 || ok2 {
		t.Error("Fenced after the lock was lost")
	}
}

// A slice whose fence fails is not taken (its lock is given back), and is
// taken at a later tick once the fence succeeds.
func TestFenceFailsSliceNotTaken(t *testing.T) {
	t.Parallel()
	fl := &fenceLog{calls: map[index.Slice]time.Time{}, fail: true}
	e := newEnv(t, at(20), func(c *Config) { c.Fence = fl.fence; c.Locker = redisLike{c.Locker} })
	cur := minuteOf(minuteAt)
	e.sched.tick(e.clk.Now())
	settle(e)
	if got := e.trig.held()[cur]; got != 0 {
		t.Fatalf("slices of the current minute taken with the fence failing: %d", got)
	}
	if ok, err := e.locker.TryLock(context.Background(), LockKey(index.Slice{Minute: cur, Bucket: 0}), "other", time.Second); err != nil || !ok {
		t.Fatalf("lock of an unfenced slice still held: TryLock by another node = %v, %v", ok, err)
	}
	e.locker.Unlock(context.Background(), LockKey(index.Slice{Minute: cur, Bucket: 0}), "other")
	fl.mu.Lock()
	fl.fail = false
	fl.mu.Unlock()
	e.clk.Advance(time.Second)
	e.sched.tick(e.clk.Now())
	settle(e)
	if got := e.trig.held()[cur]; got != buckets {
		t.Fatalf("slices of the current minute taken once the fence works: %d, want %d", got, buckets)
	}
}

// Before its locks are released (Stop, standby), the scheduler ends their fences
// and calls BeforeRelease with a test for their runs.
func TestBeforeRelease(t *testing.T) {
	t.Parallel()
	fl := &fenceLog{calls: map[index.Slice]time.Time{}}
	var in func(string, time.Time) bool
	var deadlineOK bool
	var sched *Scheduler
	tm := timerIn(t, 2)
	e := newEnv(t, at(20), func(c *Config) {
		c.Fence = fl.fence
		c.Locker = redisLike{c.Locker}
		c.BeforeRelease = func(_ context.Context, f func(string, time.Time) bool) error {
			in = f
			_, deadlineOK = sched.LazyDeadline(tm, at(40))
			return nil
		}
	})
	sched = e.sched
	e.sched.tick(e.clk.Now())
	settle(e)
	if _, ok := e.sched.LazyDeadline(tm, at(40)); !ok {
		t.Fatal("LazyDeadline of a held slice: not ok")
	}
	e.sched.releaseAll(context.Background()) // what Stop and a standby do
	if in == nil {
		t.Fatal("BeforeRelease not called")
	}
	if deadlineOK {
		t.Error("LazyDeadline during BeforeRelease: ok, want the fence ended first")
	}
	if !in(tm, at(40)) || in(tm, at(40).Add(time.Hour)) {
		t.Error("BeforeRelease's test: wrong slices")
	}
}

// With lazy claims a handover has no overlap: the node that hands a slice
// over promotes the lazy attempts of its runs (BeforeRelease), then
// releases its lock and stops dispatching it at once, since its next
// holder starts runs of it without a claim write once its fence window
// ends.
func TestRebalanceWithFenceDropsAtOnce(t *testing.T) {
	t.Parallel()
	fl := &fenceLog{calls: map[index.Slice]time.Time{}}
	var released []index.Slice
	var peerNeeds atomic.Bool
	e := newEnv(t, at(10), func(c *Config) {
		c.LiveNodes = func() int { return 2 }
		c.PeerNeedsWork = func(int64, int) bool { return peerNeeds.Load() }
		c.Fence = fl.fence
		c.Locker = redisLike{c.Locker}
		c.BeforeRelease = func(_ context.Context, in func(string, time.Time) bool) error {
			for b := range buckets {
				if in(timerIn(t, b), at(20)) {
					released = append(released, index.Slice{Minute: minuteOf(minuteAt), Bucket: b})
				}
			}
			return nil
		}
	})
	e.sched.tick(at(10))
	settle(e)
	peerNeeds.Store(true)
	e.clk.Set(at(11.8))
	e.sched.tick(at(11.8))
	cur := minuteOf(minuteAt)
	if len(released) != 1 {
		t.Fatalf("BeforeRelease covered %v, want the one slice handed over", released)
	}
	if got := e.trig.held()[cur]; got != buckets-1 || !e.trig.wasDropped(released[0]) {
		t.Fatalf("the trigger dispatches %d slices after the handover (dropped: %v), want %d, the slice handed over dropped",
			got, e.trig.wasDropped(released[0]), buckets-1)
	}
	if _, ok := e.sched.LazyDeadline(timerIn(t, released[0].Bucket), at(20)); ok {
		t.Error("LazyDeadline of the slice handed over: ok")
	}
	// Nobody took it: this node takes it back after every peer's next
	// lock attempt (LockTTL/3 and two ticks), not after the overlap.
	peerNeeds.Store(false)
	back := at(11.8).Add(e.sched.cfg.LockTTL/3 + 2*e.sched.cfg.Tick)
	e.clk.Set(back.Add(-time.Millisecond))
	e.sched.tick(e.clk.Now())
	holds := func() bool {
		e.sched.mu.Lock()
		defer e.sched.mu.Unlock()
		_, ok := e.sched.held[released[0]]
		return ok
	}
	if holds() {
		t.Fatal("the slice handed over was taken back before the peers' next attempt")
	}
	e.clk.Set(back)
	e.sched.tick(e.clk.Now())
	if !holds() {
		t.Errorf("the slice handed over was not taken back at %v (peers' next attempt passed)", back)
	}
}

// A fence that the database is slow to write does not hold up the tick:
// the slice's lock is held and extended meanwhile, and the slice goes to
// the trigger once its fence is written.
func TestSlowFenceDoesNotBlockTick(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	e := newEnv(t, at(20), func(c *Config) {
		c.Fence = func(context.Context, index.Slice, time.Time) error { <-release; return nil }
		c.Locker = redisLike{c.Locker}
	})
	cur := minuteOf(minuteAt)
	e.sched.tick(e.clk.Now()) // returns with the fences in flight
	if got := e.trig.held()[cur]; got != 0 {
		t.Fatalf("slices dispatched before their fences were written: %d", got)
	}
	armed(e)
	for range 4 {
		e.clk.Advance(500 * time.Millisecond)
		e.sched.tick(e.clk.Now()) // extends the locks of the slices being fenced
	}
	if ok, err := e.locker.TryLock(context.Background(), LockKey(index.Slice{Minute: cur, Bucket: 0}), "other", time.Second); err != nil || ok {
		t.Fatalf("another node took a slice being fenced: %v, %v", ok, err)
	}
	close(release)
	e.sched.wg.Wait()
	if got := e.trig.held()[cur]; got != buckets {
		t.Fatalf("slices dispatched once fenced: %d, want %d", got, buckets)
	}
}

// How a slice's lock was let go sets what its taking during its minute
// fences: after a clean release nothing (the slice is dispatched at once,
// every run lazily); after a lock that cannot have vanished while held
// (memlock, flocklock) the runs due until the taking, without a wait;
// otherwise (a Redis lock) the runs due until the window's end, after one
// lock TTL.
func TestFenceByRelease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		plain     bool // the Locker hides lock.Handover
		clean     bool // the previous holder released clean
		fenced    bool // a fence is written
		until     time.Duration
		dispatchd bool // dispatched at the tick, before any wait
	}{
		{"unknown", true, false, true, 0, false},
		{"ended", false, false, true, 0, false},
		{"clean", false, true, false, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fl := &fenceLog{calls: map[index.Slice]time.Time{}}
			e := newEnv(t, at(20), func(c *Config) {
				c.Fence = fl.fence
				if tt.plain {
					c.Locker = redisLike{c.Locker}
				}
			})
			cur := minuteOf(minuteAt)
			sl := index.Slice{Minute: cur, Bucket: 1}
			tm := timerIn(t, 1)
			if tt.clean {
				ctx := context.Background()
				for b := range buckets {
					key := LockKey(index.Slice{Minute: cur, Bucket: b})
					if ok, err := e.locker.TryLock(ctx, key, "other", time.Minute); !ok || err != nil {
						t.Fatalf("other's TryLock = %v, %v", ok, err)
					}
					if ok, err := e.locker.UnlockNote(ctx, key, "other", "", time.Minute); !ok || err != nil {
						t.Fatalf("other's UnlockNote = %v, %v", ok, err)
					}
				}
			}
			e.sched.tick(e.clk.Now())
			if got := e.trig.held()[cur] == buckets; got != tt.dispatchd {
				t.Fatalf("dispatched at the tick: %v, want %v", got, tt.dispatchd)
			}
			if tt.plain {
				settle(e)
			} else {
				e.sched.wg.Wait() // no wait on the clock: the fences are written at once
			}
			if got := e.trig.held()[cur]; got != buckets {
				t.Fatalf("slices dispatched: %d, want %d", got, buckets)
			}
			until, fenced := fl.get(sl)
			want := at(20)
			if tt.plain {
				want = at(20).Add(e.sched.fenceWindow())
			}
			if fenced != tt.fenced || fenced && !until.Equal(want) {
				t.Fatalf("fence = %v until %v, want %v until %v", fenced, until, tt.fenced, want)
			}
			// Runs due after the fenced window start lazily; those within
			// it are claimed with a write.
			if _, ok := e.sched.LazyDeadline(tm, want.Add(time.Millisecond)); !ok {
				t.Errorf("LazyDeadline of a run due just after the window: not ok")
			}
			if _, ok := e.sched.Fenced(tm, want); tt.fenced && !ok {
				t.Errorf("Fenced of a run due at the window's end: false")
			}
			if _, ok := e.sched.Fenced(tm, at(20)); !tt.fenced && ok {
				t.Errorf("Fenced after a clean release: true")
			}
		})
	}
}

// A slice is released clean (lock.Handover.UnlockNote with the empty note) only when this
// node had fenced it and BeforeRelease promoted its lazy attempts.
func TestReleaseClean(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		promote error // BeforeRelease's answer
		clean   bool
	}{
		{"promoted", nil, true},
		{"promotion failed", errors.New("store down (test)"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fl := &fenceLog{calls: map[index.Slice]time.Time{}}
			e := newEnv(t, at(20), func(c *Config) {
				c.Fence = fl.fence
				c.BeforeRelease = func(context.Context, func(string, time.Time) bool) error { return tt.promote }
			})
			e.sched.tick(e.clk.Now())
			e.sched.wg.Wait()
			e.sched.releaseAll(context.Background())
			for b := range buckets {
				sl := index.Slice{Minute: minuteOf(minuteAt), Bucket: b}
				ok, rel, err := e.locker.TryLockFrom(context.Background(), LockKey(sl), "next", time.Minute)
				if err != nil || !ok {
					t.Fatalf("next holder's TryLockFrom(%v) = %v, %v", sl, ok, err)
				}
				if got := rel.Noted && rel.Note == ""; got != tt.clean {
					t.Errorf("slice %v released %v, want clean %v", sl, rel, tt.clean)
				}
			}
		})
	}

	// A slice whose fence was not written yet is not released clean: its
	// previous holder's lazy starts are not fenced.
	release := make(chan struct{})
	e := newEnv(t, at(20), func(c *Config) {
		c.Fence = func(context.Context, index.Slice, time.Time) error { <-release; return nil }
		c.BeforeRelease = func(context.Context, func(string, time.Time) bool) error { return nil }
	})
	e.sched.tick(e.clk.Now())
	e.sched.releaseAll(context.Background())
	close(release)
	e.sched.wg.Wait()
	sl := index.Slice{Minute: minuteOf(minuteAt), Bucket: 0}
	ok, rel, err := e.locker.TryLockFrom(context.Background(), LockKey(sl), "next", time.Minute)
	if p, parsed := parseNote(rel.Note); err != nil || !ok || !rel.Noted || !parsed || !p.until.Equal(at(20)) {
		t.Errorf("a slice released before its fence was written: TryLockFrom = %v, %v, %v; want taken, with the fence owed (until %v) as its note", ok, rel, err, at(20))
	}
}

// With FreshClean (local locks, the previous process stopped clean), a
// slice this process never took before is taken as released clean: no
// fence. Once taken and released without a mark, it is fenced again.
func TestFreshClean(t *testing.T) {
	t.Parallel()
	fl := &fenceLog{calls: map[index.Slice]time.Time{}}
	e := newEnv(t, at(20), func(c *Config) {
		c.Fence = fl.fence
		c.FreshClean = func() bool { return true }
	})
	cur := minuteOf(minuteAt)
	e.sched.tick(e.clk.Now())
	if got := e.trig.held()[cur]; got != buckets {
		t.Fatalf("slices dispatched at the first tick: %d, want %d", got, buckets)
	}
	e.sched.wg.Wait()
	sl := index.Slice{Minute: cur, Bucket: 1}
	if _, fenced := fl.get(sl); fenced {
		t.Fatal("a slice first taken after a clean stop was fenced")
	}
	if _, ok := e.sched.LazyDeadline(timerIn(t, 1), at(20)); !ok {
		t.Fatal("LazyDeadline of a run due at the taking: not ok")
	}
	// The lock expires unseen (a stalled tick), another token takes and
	// drops it: this process's next taking fences.
	e.clk.Advance(time.Minute / 4)
	if ok, err := e.locker.TryLock(context.Background(), LockKey(sl), "other", time.Second); !ok || err != nil {
		t.Fatalf("other's TryLock = %v, %v", ok, err)
	}
	e.locker.Unlock(context.Background(), LockKey(sl), "other")
	e.sched.tick(e.clk.Now()) // finds its lock lost
	e.clk.Advance(time.Second)
	e.sched.tick(e.clk.Now()) // takes it again
	e.sched.wg.Wait()
	if _, fenced := fl.get(sl); !fenced {
		t.Error("a slice taken again after its lock was lost was not fenced")
	}
	if e.sched.ReleasedClean() {
		t.Error("ReleasedClean after a lock was lost: true")
	}
}

// noteless hides that memlock's locks cannot vanish (every taking without
// a note is the zero lock.Release, as a Redis lock's), and keeps its notes.
type noteless struct{ *memlock.Locker }

func (n noteless) TryLockFrom(ctx context.Context, key, token string, ttl time.Duration) (bool, lock.Release, error) {
	ok, rel, err := n.Locker.TryLockFrom(ctx, key, token, ttl)
	rel.Ended = false
	return ok, rel, err
}

// A node that releases a slice it took but has not fenced yet hands the
// fence it owed to the next holder, which waits no longer than it would
// have and fences the same runs.
func TestPendingFenceHandedOn(t *testing.T) {
	t.Parallel()
	fl := &fenceLog{calls: map[index.Slice]time.Time{}}
	a := newEnv(t, at(20), func(c *Config) { c.Fence = fl.fence; c.Locker = noteless{c.Locker.(*memlock.Locker)} })
	a.sched.tick(a.clk.Now()) // takes the slices; their fences wait until 21.5
	armed(a)
	a.clk.Set(at(20.5))
	a.sched.releaseAll(context.Background()) // a SIGTERM before the fences
	cur := minuteOf(minuteAt)
	sl := index.Slice{Minute: cur, Bucket: 1}
	if _, fenced := fl.get(sl); fenced {
		t.Fatal("a fence was written by the node that released the slice")
	}

	b := &env{clk: a.clk, locker: a.locker, trig: newFakeTrigger()}
	b.sched = New(Config{Locker: noteless{a.locker}, Trigger: b.trig, Token: "b", Buckets: buckets, Clock: a.clk,
		Fence: fl.fence, Logger: a.sched.cfg.Logger})
	b.sched.tick(a.clk.Now())
	armed(b)
	a.clk.Set(at(21.5)) // A's wait ends, not B's own (22.0)
	b.sched.wg.Wait()
	a.sched.wg.Wait() // A's fences woke to find their slices gone
	until, fenced := fl.get(sl)
	if want := at(20).Add(b.sched.fenceWindow()); !fenced || !until.Equal(want) {
		t.Fatalf("B's fence = %v until %v, want until %v (A's)", fenced, until, want)
	}
	if got := b.trig.held()[cur]; got != buckets {
		t.Fatalf("B dispatches %d slices once the fences owed are written, want %d", got, buckets)
	}
}
