package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop/startstoptest"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/lock/memlock"
)

// fakeTrigger records the slices taken and dropped.
type fakeTrigger struct {
	mu      sync.Mutex
	taken   map[index.Slice]bool
	dropped map[index.Slice]bool
}

func newFakeTrigger() *fakeTrigger {
	return &fakeTrigger{taken: map[index.Slice]bool{}, dropped: map[index.Slice]bool{}}
}

func (f *fakeTrigger) Take(s index.Slice) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.taken[s] = true
	delete(f.dropped, s)
}

func (f *fakeTrigger) Drop(s index.Slice) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropped[s] = true
	delete(f.taken, s)
}

// held returns the slices taken and not dropped, by minute.
func (f *fakeTrigger) held() map[int64]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int64]int{}
	for s := range f.taken {
		out[s.Minute]++
	}
	return out
}

func (f *fakeTrigger) wasDropped(s index.Slice) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped[s]
}

const buckets = 4

type env struct {
	clk    *clock.Fake
	locker *memlock.Locker
	trig   *fakeTrigger
	sched  *Scheduler
}

// minuteAt is 09:00 of a fixed day; at(s) is s seconds into it.
var minuteAt = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return minuteAt.Add(time.Duration(sec * float64(time.Second))) }

func newEnv(t *testing.T, now time.Time, mod func(*Config)) *env {
	t.Helper()
	clk := clock.NewFake(now)
	e := &env{clk: clk, locker: memlock.NewLocker(clk), trig: newFakeTrigger()}
	cfg := Config{Locker: e.locker, Trigger: e.trig, Token: "me", Buckets: buckets, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&cfg)
	}
	e.sched = New(cfg)
	return e
}

func minuteOf(t time.Time) int64 { return t.Unix() / 60 }

// TestTickTakesSlices: a tick takes every slice of the previous and the
// current minute, and of the next one only within Prefetch of it; a node
// over its fair share leaves the next minute's slices to the others until
// the minute's last second.
func TestTickTakesSlices(t *testing.T) {
	t.Parallel()
	cur := minuteOf(minuteAt)
	tests := []struct {
		name  string
		now   time.Time
		nodes int
		want  map[int64]int
	}{
		{"early in the minute", at(10), 1, map[int64]int{cur - 1: buckets, cur: buckets}},
		{"within prefetch", at(58), 1, map[int64]int{cur - 1: buckets, cur: buckets, cur + 1: buckets}},
		{"fair share of the next minute", at(58), 2, map[int64]int{cur - 1: buckets, cur: buckets, cur + 1: buckets / 2}},
		// The other node's share is still free in the last second: its node
		// may have died (lastCall).
		{"last call for the next minute", at(59.5), 2, map[int64]int{cur - 1: buckets, cur: buckets, cur + 1: buckets}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tt.now, func(c *Config) { c.LiveNodes = func() int { return tt.nodes } })
			e.sched.tick(tt.now)
			got := e.trig.held()
			for m, n := range tt.want {
				if got[m] != n {
					t.Errorf("minute %+d: %d slices taken, want %d (all: %v)", m-cur, got[m], n, got)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("minutes taken %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLockedSliceLeftAlone: a slice another node holds is not taken, and
// is tried again LockTTL/3 later.
func TestLockedSliceLeftAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, at(10), nil)
	sl := index.Slice{Minute: minuteOf(minuteAt), Bucket: 0}
	if ok, _ := e.locker.TryLock(context.Background(), LockKey(sl), "other", 1500*time.Millisecond); !ok {
		t.Fatal("setup: lock not taken")
	}
	e.sched.tick(at(10))
	if e.trig.taken[sl] {
		t.Fatal("took a slice another node holds")
	}
	// The other node's lock expires; the retry comes LockTTL/3 later.
	e.clk.Set(at(12))
	e.sched.tick(at(12))
	if !e.trig.taken[sl] {
		t.Fatal("did not take the slice after the other node's lock expired")
	}
}

// TestLostLockDropped: a lock that cannot be extended (another node took
// it) drops its slice from the trigger.
func TestLostLockDropped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, at(10), nil)
	e.sched.tick(at(10))
	sl := index.Slice{Minute: minuteOf(minuteAt), Bucket: 1}
	if _, err := e.locker.Unlock(context.Background(), LockKey(sl), "me"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := e.locker.TryLock(context.Background(), LockKey(sl), "other", time.Minute); !ok {
		t.Fatal("setup: lock not stolen")
	}
	e.clk.Set(at(11)) // past LockTTL/3: due for extension
	e.sched.tick(at(11))
	if !e.trig.wasDropped(sl) {
		t.Error("slice whose lock was lost was not dropped")
	}
	for _, h := range e.sched.Held() {
		if h == sl {
			t.Error("slice whose lock was lost still held")
		}
	}
}

// TestDoneKeepsLock: a slice acked done keeps its lock past its minute, so
// no node takes it again, and this node does not take it again either.
func TestDoneKeepsLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, at(10), nil)
	e.sched.tick(at(10))
	sl := index.Slice{Minute: minuteOf(minuteAt) - 1, Bucket: 2}
	e.sched.Done(sl)
	e.clk.Set(at(60 + 30))
	if ok, _ := e.locker.TryLock(context.Background(), LockKey(sl), "other", time.Second); ok {
		t.Error("another node took a slice acked done")
	}
	e.trig.Drop(sl)
	e.sched.tick(at(60 + 30))
	if e.trig.taken[sl] {
		t.Error("a slice acked done was taken again")
	}
}

// TestStandbyReleasesAll: a node on standby (its clock too far off) hands
// every slice over and takes none.
func TestStandbyReleasesAll(t *testing.T) {
	t.Parallel()
	var standby bool
	var mu sync.Mutex
	e := newEnv(t, at(10), func(c *Config) {
		c.Standby = func() bool { mu.Lock(); defer mu.Unlock(); return standby }
	})
	e.sched.tick(at(10))
	if len(e.sched.Held()) == 0 {
		t.Fatal("setup: nothing taken")
	}
	mu.Lock()
	standby = true
	mu.Unlock()
	e.sched.tick(at(10.3))
	if n := len(e.sched.Held()); n != 0 {
		t.Fatalf("%d slices held on standby", n)
	}
	sl := index.Slice{Minute: minuteOf(minuteAt), Bucket: 0}
	if ok, _ := e.locker.TryLock(context.Background(), LockKey(sl), "other", time.Second); !ok {
		t.Error("a slice released on standby could not be taken by another node")
	}
}

// TestRebalanceHandsOver: a node over its share, with a peer under it,
// releases one slice of the current minute and drops it from its trigger
// handoverOverlap later unless it took it back.
func TestRebalanceHandsOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t, at(10), func(c *Config) {
		c.LiveNodes = func() int { return 2 }
		c.PeerNeedsWork = func(int64, int) bool { return true }
	})
	e.sched.tick(at(10)) // takes every slice of the current minute (it starts first)
	e.clk.Set(at(10.3))
	e.sched.tick(at(10.3))
	cur := minuteOf(minuteAt)
	held := 0
	for _, s := range e.sched.Held() {
		if s.Minute == cur {
			held++
		}
	}
	if held != buckets-1 {
		t.Fatalf("%d slices of the current minute held after a handover, want %d", held, buckets-1)
	}
	if got := e.trig.held()[cur]; got != buckets {
		t.Fatalf("the trigger dispatches %d slices during the overlap, want %d", got, buckets)
	}
	// Another node takes the slice handed over; after the overlap it leaves
	// this node's trigger.
	var handed index.Slice
	for b := range buckets {
		s := index.Slice{Minute: cur, Bucket: b}
		if ok, _ := e.locker.TryLock(context.Background(), LockKey(s), "other", time.Minute); ok {
			handed = s
		}
	}
	e.clk.Advance(handoverOverlap)
	testenv.Eventually(t, 10*time.Second, "the slice handed over dropped", func() (bool, string) {
		return e.trig.wasDropped(handed), "still dispatched"
	})
}

// TestFreeSliceLeftToJoiningPeer: while a peer that joined holds no slice
// yet, a node at its share of the current minute leaves a free slice of it
// (one the rebalance of another node handed over) to the others, so that
// the joining node gets it; a node under its share, or one with no peer
// joining, takes it as before, and so does a node at its share once the
// peer holds a slice. The previous minute's free slices are taken as
// before.
func TestFreeSliceLeftToJoiningPeer(t *testing.T) {
	t.Parallel()
	cur := minuteOf(minuteAt)
	tests := []struct {
		name    string
		held    int  // slices of the current minute this node holds
		joining bool // a peer that joined holds no slice
		want    bool // the free slice is taken
	}{
		{"at its share, a peer joining", 2, true, false},
		{"at its share, no peer joining", 2, false, true},
		{"under its share, a peer joining", 1, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			joining := tt.joining
			e := newEnv(t, at(10), func(c *Config) {
				c.LiveNodes = func() int { return 3 } // share: 2 of 4 buckets
				c.PeerJoining = func() bool { mu.Lock(); defer mu.Unlock(); return joining }
			})
			ctx := context.Background()
			// The other slices of both minutes are another node's; this
			// node took tt.held of the current minute before.
			for b := range buckets {
				for _, m := range []int64{cur - 1, cur} {
					sl := index.Slice{Minute: m, Bucket: b}
					if m == cur && b < tt.held {
						continue
					}
					if ok, _ := e.locker.TryLock(ctx, LockKey(sl), "other", time.Minute); !ok {
						t.Fatalf("setup: %s not locked", sl)
					}
				}
			}
			e.sched.tick(at(10))
			if got := e.trig.held()[cur]; got != tt.held {
				t.Fatalf("setup: %d slices of the current minute taken, want %d", got, tt.held)
			}
			// The other node hands one slice of each minute over.
			free := index.Slice{Minute: cur, Bucket: buckets - 1}
			prev := index.Slice{Minute: cur - 1, Bucket: buckets - 1}
			for _, sl := range []index.Slice{free, prev} {
				if _, err := e.locker.Unlock(ctx, LockKey(sl), "other"); err != nil {
					t.Fatal(err)
				}
			}
			e.clk.Set(at(10.5)) // the retry of the failed attempts, LockTTL/3 later
			e.sched.tick(at(10.5))
			if got := e.trig.taken[free]; got != tt.want {
				t.Errorf("free slice of the current minute taken: %v, want %v", got, tt.want)
			}
			if !e.trig.taken[prev] {
				t.Error("free slice of the previous minute not taken")
			}
			if tt.want {
				return
			}
			// The joining node takes its first slice elsewhere (its
			// heartbeat lists it): the free slice is this node's again.
			mu.Lock()
			joining = false
			mu.Unlock()
			e.clk.Set(at(10.75))
			e.sched.tick(at(10.75))
			if !e.trig.taken[free] {
				t.Error("free slice not taken once no peer is joining")
			}
		})
	}
}

// TestJoiningNodeGetsSlices runs three schedulers on one locker, started
// 87 and 178 ms apart (as three nodes of an e2e cluster start), with the
// node list each reads at its heartbeat every 2 s: the first takes every
// slice, learns of the others at its second heartbeat and hands slices
// over one a tick. With their ticks in this phase, the second node wins
// every slice the first hands over; once both hold their share, the slices
// handed over must go to the third node, which holds none: a node at its
// share takes none of them. (Without PeerJoining they passed the slices
// between them, each taking one and handing one over, and the third node
// held nothing for seconds.)
func TestJoiningNodeGetsSlices(t *testing.T) {
	t.Parallel()
	const (
		nodes     = 3
		nBuckets  = 16
		heartbeat = 2 * time.Second
		tick      = 250 * time.Millisecond
	)
	start := minuteAt.Add(18*time.Second + 988*time.Millisecond)
	clk := clock.NewFake(start)
	locker := memlock.NewLocker(clk)
	type hb struct {
		seen    bool
		slices  int // of the current minute
		started time.Time
	}
	var (
		views  [nodes][nodes]hb // views[i][j]: node j as node i read it at its last heartbeat
		scheds [nodes]*Scheduler
		starts = [nodes]time.Time{start, start.Add(87 * time.Millisecond), start.Add(178 * time.Millisecond)}
	)
	share := (nBuckets + nodes - 1) / nodes
	held := func(i int) int {
		n := 0
		for _, sl := range scheds[i].Held() {
			if sl.Minute == minuteOf(clk.Now()) {
				n++
			}
		}
		return n
	}
	for i := range nodes {
		scheds[i] = New(Config{Locker: locker, Trigger: newFakeTrigger(), Token: fmt.Sprintf("n%d", i+1), Buckets: nBuckets,
			Tick: tick, LockTTL: 3 * time.Second, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			LiveNodes: func() int {
				n := 0
				for _, v := range views[i] {
					if v.seen {
						n++
					}
				}
				return n
			},
			PeerNeedsWork: func(_ int64, share int) bool {
				for j, v := range views[i] {
					if j != i && v.seen && v.slices < share {
						return true
					}
				}
				return false
			},
			PeerJoining: func() bool {
				for j, v := range views[i] {
					if j != i && v.seen && v.slices == 0 && clk.Now().Sub(v.started) < 10*time.Second {
						return true
					}
				}
				return false
			}})
	}
	published := [nodes]hb{}
	for step := time.Duration(0); step < 8*time.Second; step += time.Millisecond {
		now := start.Add(step)
		clk.Set(now)
		for i := range nodes {
			since := now.Sub(starts[i])
			if since < 0 {
				continue
			}
			if since%heartbeat == 0 { // write this node's record, read the list
				published[i] = hb{seen: true, slices: held(i), started: starts[i]}
				views[i] = published
			}
			if since%tick == 0 {
				before := held(i)
				scheds[i].tick(now)
				if third := held(nodes - 1); i != nodes-1 && third == 0 && before >= share && held(i) > before {
					t.Fatalf("at +%v n%d, holding its share (%d), took a slice while n%d holds none: n1 %d, n2 %d",
						step, i+1, before, nodes, held(0), held(1))
				}
			}
		}
		if held(nodes-1) > 0 {
			t.Logf("n%d took its first slice at +%v: n1 %d, n2 %d", nodes, step, held(0), held(1))
			return
		}
	}
	t.Fatalf("n%d took no slice in 8 s: n1 %d, n2 %d", nodes, held(0), held(1))
}

// TestStartTicksAndStopReleases: Start ticks at once and every Tick of the
// clock; Stop releases every lock, so that other nodes take the slices at
// once.
func TestStartTicksAndStopReleases(t *testing.T) {
	t.Parallel()
	e := newEnv(t, at(10), nil)
	e.sched.ticked.Init(t)
	ctx := context.Background()
	if err := e.sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.sched.ticked.Wait(); !got.Equal(at(10)) {
		t.Errorf("first tick at %v, want %v", got, at(10))
	}
	testenv.Eventually(t, 10*time.Second, "the tick loop's ticker", func() (bool, string) {
		return e.clk.Waiters() > 0, "no ticker"
	})
	e.clk.Advance(250 * time.Millisecond)
	if got := e.sched.ticked.Wait(); !got.Equal(at(10.25)) {
		t.Errorf("second tick at %v, want %v", got, at(10.25))
	}
	held := e.sched.Held()
	sort.Slice(held, func(i, j int) bool { return held[i].String() < held[j].String() })
	if len(held) != 2*buckets {
		t.Fatalf("held %d slices, want %d", len(held), 2*buckets)
	}
	if err := e.sched.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range held {
		if ok, _ := e.locker.TryLock(ctx, LockKey(s), "other", time.Second); !ok {
			t.Errorf("slice %s still locked after Stop", s)
		}
		if !e.trig.wasDropped(s) {
			t.Errorf("slice %s not dropped at Stop", s)
		}
	}
}

// TestLifecycle: Start and Stop are safe twice, Stop without Start, and a
// stopped scheduler does not start again.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	startstoptest.Lifecycle(t, func() *Scheduler { return newEnv(t, at(10), nil).sched })
}
