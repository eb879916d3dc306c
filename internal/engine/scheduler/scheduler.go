// Package scheduler spreads the slices over the nodes. Every tick it tries
// the lock of each slice of the previous, the current and (shortly before it
// starts) the next minute; a slice whose lock it wins goes to this node's
// trigger. It extends the locks it holds while their slices are dispatched,
// and when the trigger reports a slice done it extends that lock past the
// slice's minute (the "ack"), so that no node takes the slice again.
//
// Locks spread work; they do not guard against double runs (the store's
// claim does). A node that already holds its fair share of a minute's
// slices (buckets / live nodes) leaves the next minute's slices to the
// others until that minute starts, so that the slices spread over all nodes
// rather than all landing on the fastest one; and while a node that joined
// recently holds no slice yet, it leaves the current minute's free slices
// to the others, so that the joining node gets the slices handed over.
//
// Failover bound: a node that dies holding a slice keeps its lock until
// LockTTL passes; another node, which tries the locks it lost every
// LockTTL/3, takes the slice within LockTTL + LockTTL/3 + Tick (≈ 2.25 s with
// the defaults). A node that stops gracefully releases its locks at once.
// Leaving the free slices to a joining node (Config.PeerJoining) keeps
// that bound while the joining node runs: it tries them as often. A
// joining node that cannot take them (its Redis unreachable, or standing
// by without saying so in its heartbeat) leaves them undispatched until it
// stops counting as joining, five heartbeat intervals (10 s) after its
// start at most.
package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop"
	"github.com/chimehq/chime/internal/base/testsignal"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/lock"
	"github.com/chimehq/chime/internal/metrics"
)

// Trigger is what the scheduler needs of the trigger.
type Trigger interface {
	Take(s index.Slice)
	Drop(s index.Slice)
}

// Config configures a Scheduler.
type Config struct {
	Locker  lock.Locker
	Trigger Trigger
	// Token identifies this node's locks (its node id).
	Token   string
	Buckets int
	// Tick is the interval of lock attempts. Default 250ms.
	Tick time.Duration
	// LockTTL is the lease of a slice lock, extended every LockTTL/3 while
	// held. It bounds failover after a crash. Default DefaultLockTTL.
	LockTTL time.Duration
	// Prefetch is how long before a minute starts its slices are taken.
	// Default 3s.
	Prefetch time.Duration
	// LiveNodes returns how many nodes share the work (for the fair share);
	// nil means 1.
	LiveNodes func() int
	// PeerNeedsWork reports whether another live node holds fewer than
	// share slices of minute m, so that a slice handed over would be taken.
	// Nil means no handover. It may read the store: it is called only when
	// this node holds more than its share and may hand a slice over.
	PeerNeedsWork func(m int64, share int) bool
	// PeerJoining reports whether another live node that joined the
	// cluster recently holds no slice yet, as of the node list last read.
	// It is asked on every tick, so it must not read the store. While it
	// does, a node that holds its share of the current minute leaves that
	// minute's free slices to the others (see tick). Nil means never.
	PeerJoining func() bool
	// Standby, when set and true, makes the scheduler hand over every
	// slice it holds and take none (the node's clock is too far off the
	// store's to judge instants).
	Standby func() bool
	// Clock is the cluster's clock; the tick and handover timers run on
	// it. Default clock.System(0).
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// LockKey is the lock name of slice s.
func LockKey(s index.Slice) string { return fmt.Sprintf("slice:{%d:%d}", s.Minute, s.Bucket) }

// Scheduler takes slice locks and hands the slices to the trigger.
type Scheduler struct {
	cfg Config

	mu      sync.Mutex
	held    map[index.Slice]time.Time // slice -> last extended
	done    map[index.Slice]bool
	retryAt map[index.Slice]time.Time

	life startstop.Base
	stop chan struct{}
	wg   sync.WaitGroup

	// ticked reports to tests that a tick ended (see internal/base/testsignal).
	ticked testsignal.Signal[time.Time]
}

// New returns a Scheduler; call Start.
func New(cfg Config) *Scheduler {
	if cfg.Tick <= 0 {
		cfg.Tick = 250 * time.Millisecond
	}
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = DefaultLockTTL
	}
	if cfg.Prefetch <= 0 {
		cfg.Prefetch = 3 * time.Second
	}
	if cfg.Buckets <= 0 {
		cfg.Buckets = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Clock = clock.Default(cfg.Clock)
	return &Scheduler{cfg: cfg, held: map[index.Slice]time.Time{}, done: map[index.Slice]bool{},
		retryAt: map[index.Slice]time.Time{}, stop: make(chan struct{})}
}

// Start starts the tick loop; its first tick runs at once. It is safe to
// call twice; a stopped scheduler does not start again
// (startstop.ErrStopped).
func (s *Scheduler) Start(ctx context.Context) error {
	return s.life.Start(ctx, "scheduler", func(context.Context) error {
		s.wg.Add(1)
		go s.loop()
		return nil
	})
}

// Stop stops taking slices and releases the locks held (with ctx), so that
// other nodes take them at once. Call it after the trigger stopped
// dispatching. It is safe to call twice, and without Start.
func (s *Scheduler) Stop(ctx context.Context) error {
	return s.life.Stop(ctx, func(ctx context.Context) error {
		close(s.stop)
		s.wg.Wait()
		s.releaseAll(ctx)
		return nil
	})
}

// releaseAll releases every lock held and drops the slices from the
// trigger, so that other nodes take them at once.
func (s *Scheduler) releaseAll(ctx context.Context) {
	s.mu.Lock()
	held := make([]index.Slice, 0, len(s.held))
	for sl := range s.held {
		held = append(held, sl)
	}
	s.held = map[index.Slice]time.Time{}
	s.mu.Unlock()
	for _, sl := range held {
		ok, err := s.cfg.Locker.Unlock(ctx, LockKey(sl), s.cfg.Token)
		if err != nil {
			s.cfg.Logger.Warn("release slice", "slice", sl.String(), "err", err)
		}
		s.cfg.Logger.Debug("slice released", "slice", sl.String(), "held", ok)
		s.cfg.Trigger.Drop(sl)
	}
}

// Held returns the slices this node holds and dispatches.
func (s *Scheduler) Held() []index.Slice {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]index.Slice, 0, len(s.held))
	for sl := range s.held {
		out = append(out, sl)
	}
	return out
}

// Done acks slice sl: the trigger dispatched all of it. The lock is kept
// until well after the minute so that no node takes the slice again.
func (s *Scheduler) Done(sl index.Slice) {
	s.mu.Lock()
	_, ok := s.held[sl]
	delete(s.held, sl)
	s.done[sl] = true
	s.mu.Unlock()
	if !ok {
		return
	}
	now := s.cfg.Clock.Now()
	ttl := sl.End().Add(3 * time.Minute).Sub(now)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.LockTTL)
	defer cancel()
	if _, err := s.cfg.Locker.Extend(ctx, LockKey(sl), s.cfg.Token, ttl); err != nil {
		s.cfg.Logger.Warn("ack slice", "slice", sl.String(), "err", err)
	}
}

func (s *Scheduler) loop() {
	defer s.wg.Done()
	tick := s.cfg.Clock.NewTicker(s.cfg.Tick)
	defer tick.Stop()
	for {
		now := s.cfg.Clock.Now()
		s.tick(now)
		s.ticked.Signal(now)
		select {
		case <-s.stop:
			return
		case <-tick.C():
		}
	}
}

func (s *Scheduler) tick(now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.LockTTL/2)
	defer cancel()
	if s.cfg.Standby != nil && s.cfg.Standby() {
		s.releaseAll(ctx)
		return
	}
	s.extend(ctx, now)

	cur := now.Unix() / 60
	minutes := []int64{cur - 1, cur}
	if next := time.Unix((cur+1)*60, 0); next.Sub(now) <= s.cfg.Prefetch {
		minutes = append(minutes, cur+1)
	}
	share := s.cfg.Buckets
	if s.cfg.LiveNodes != nil {
		if n := s.cfg.LiveNodes(); n > 1 {
			share = (s.cfg.Buckets + n - 1) / n
		}
	}
	s.prune(cur)
	s.rebalance(ctx, now, cur, share)
	joining := s.cfg.PeerJoining != nil && s.cfg.PeerJoining()
	for _, m := range minutes {
		start := time.Unix(m*60, 0)
		heldInMinute := s.countHeld(m)
		for _, b := range rand.Perm(s.cfg.Buckets) {
			sl := index.Slice{Minute: m, Bucket: b}
			if !s.wants(sl, now) {
				continue
			}
			if heldInMinute >= share && start.Sub(now) > lastCall {
				// Leave the next minute to nodes under their share, until
				// its last second: a slice nobody took by then (its node
				// died and is still counted in the share) is taken before
				// its minute, and the rebalance hands it on.
				continue
			}
			if m == cur && heldInMinute >= share && joining {
				// Leave the current minute's free slices (those the
				// rebalance hands over) to the node that joined: the
				// nodes at their share would otherwise pass them between
				// themselves, each taking one and handing one over, and
				// the new node, which tries a slice once per LockTTL/3
				// like they do, could wait many seconds for its first.
				continue
			}
			ok, err := s.cfg.Locker.TryLock(ctx, LockKey(sl), s.cfg.Token, s.cfg.LockTTL)
			if err != nil {
				s.cfg.Logger.Warn("lock slice", "slice", sl.String(), "err", err)
				return
			}
			s.mu.Lock()
			if ok {
				s.cfg.Logger.Debug("slice taken", "slice", sl.String())
				s.held[sl] = now
				heldInMinute++
			} else {
				s.retryAt[sl] = now.Add(s.cfg.LockTTL / 3)
			}
			s.mu.Unlock()
			if ok {
				s.cfg.Trigger.Take(sl)
			}
		}
	}
	if s.cfg.Metrics != nil {
		s.mu.Lock()
		s.cfg.Metrics.SlicesHeld.Set(float64(len(s.held)))
		s.mu.Unlock()
	}
}

func (s *Scheduler) wants(sl index.Slice, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.held[sl]; ok || s.done[sl] {
		return false
	}
	return !now.Before(s.retryAt[sl])
}

func (s *Scheduler) countHeld(m int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for sl := range s.held {
		if sl.Minute == m {
			n++
		}
	}
	return n
}

// rebalance hands one slice of the current minute to the other nodes when
// this node holds more than its share (it started first, or another node
// joined). The handover delays no fire: the lock is released at once, but
// this node goes on dispatching the slice for handoverOverlap, long enough
// for another node to take it; meanwhile both may try to claim the same
// runs, and the store's claim lets one win. If nobody took the slice by
// then, this node takes it back.
func (s *Scheduler) rebalance(ctx context.Context, now time.Time, cur int64, share int) {
	if s.cfg.LiveNodes == nil || s.cfg.LiveNodes() < 2 || s.countHeld(cur) <= share || s.cfg.PeerNeedsWork == nil {
		return
	}
	if !s.cfg.PeerNeedsWork(cur, share) {
		return
	}
	for _, sl := range s.Held() {
		if sl.Minute != cur {
			continue
		}
		s.mu.Lock()
		delete(s.held, sl)
		s.retryAt[sl] = now.Add(handoverOverlap - s.cfg.Tick)
		s.mu.Unlock()
		if _, err := s.cfg.Locker.Unlock(ctx, LockKey(sl), s.cfg.Token); err != nil {
			s.cfg.Logger.Warn("hand over slice", "slice", sl.String(), "err", err)
		}
		s.cfg.Logger.Debug("slice handed over", "slice", sl.String(), "held_in_minute", s.countHeld(cur), "share", share)
		s.cfg.Clock.AfterFunc(handoverOverlap, func() {
			s.mu.Lock()
			_, again := s.held[sl]
			s.mu.Unlock()
			if !again {
				s.cfg.Trigger.Drop(sl)
			}
		})
		return
	}
}

// lastCall is how long before its minute a node takes a free slice of the
// next minute even beyond its fair share.
const lastCall = time.Second

// handoverOverlap is how long a node goes on dispatching a slice it handed
// over.
const handoverOverlap = 3 * time.Second

// prune forgets bookkeeping of minutes no longer considered.
func (s *Scheduler) prune(cur int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sl := range s.done {
		if sl.Minute < cur-2 {
			delete(s.done, sl)
		}
	}
	for sl := range s.retryAt {
		if sl.Minute < cur-2 {
			delete(s.retryAt, sl)
		}
	}
}

// extend renews the locks due for it; a lock that was lost is dropped.
func (s *Scheduler) extend(ctx context.Context, now time.Time) {
	s.mu.Lock()
	var due []index.Slice
	for sl, at := range s.held {
		if now.Sub(at) >= s.cfg.LockTTL/3 {
			due = append(due, sl)
		}
	}
	s.mu.Unlock()
	for _, sl := range due {
		ok, err := s.cfg.Locker.Extend(ctx, LockKey(sl), s.cfg.Token, s.cfg.LockTTL)
		if err != nil {
			s.cfg.Logger.Warn("extend slice lock", "slice", sl.String(), "err", err)
			continue // keep trying until the lock would have expired
		}
		s.mu.Lock()
		if ok {
			s.held[sl] = now
		} else {
			delete(s.held, sl)
		}
		s.mu.Unlock()
		if !ok {
			s.cfg.Logger.Warn("slice lock lost", "slice", sl.String())
			s.cfg.Trigger.Drop(sl)
		}
	}
}
