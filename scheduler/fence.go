package scheduler

// This file: the slice lock as the fence of lazy claims (Config.Fence,
// LazyDeadline; docs/guarantees.md, "Lazy claims").

import (
	"context"
	"time"

	"github.com/chimehq/chime/clock"
	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/lock"
)

// LazyMargin is how long before its lock's TTL would end, counted from
// when its last extension was sent, a node stops starting the runs of a
// slice lazily: the lock keeper and the executor's checks are late by a
// tick at most, and the nodes' clocks agree to within a few
// milliseconds.
const LazyMargin = 250 * time.Millisecond

// fenceWindow is how long after it took a slice's lock a node claims the
// slice's runs with a write (and fences them first): the previous holder
// may start runs lazily until its own lock would have ended, at most
// LockTTL after this node took it, less LazyMargin.
func (s *Scheduler) fenceWindow() time.Duration { return s.cfg.LockTTL + 2*LazyMargin }

// fence is what LazyDeadline knows of a slice this node holds.
type fence struct {
	// until ends the window after the taking whose runs are claimed with
	// a write (fenced first): the instant the lock was taken (its answer
	// received, by the cluster's clock) plus fenceWindow; the taking
	// itself when the lock cannot have vanished while held
	// (lock.ReleaseEnded); zero when it was released clean.
	until time.Time
	// confirmed is when the last extension that held was sent, for ttl.
	confirmed time.Time
	ttl       time.Duration
}

// LazyDeadline implements executor.LazyFence: a run may start lazily while
// this node holds its slice's lock (held, or acked for the rest of its
// minute and after) and is due after the fence window that followed the
// lock's taking; the deadline is the lock's confirmed end less
// LazyMargin.
func (s *Scheduler) LazyDeadline(timerID string, dueAt time.Time) (time.Time, bool) {
	if s.cfg.Fence == nil {
		return time.Time{}, false
	}
	sl := index.SliceOf(timerID, dueAt, s.cfg.Buckets)
	s.mu.Lock()
	f, ok := s.fences[sl]
	s.mu.Unlock()
	if !ok || !dueAt.After(f.until) {
		return time.Time{}, false
	}
	return f.confirmed.Add(f.ttl - LazyMargin), true
}

// Fenced implements executor.LazyFence: this node holds the slice of the
// run of timerID due at dueAt, fenced since its taking (or taken before
// its minute), and the run is due within the fence window after the
// taking, where the slice's runs are claimed with a write. No node starts
// such a run lazily: a node that held the slice before took it earlier,
// and its own deadline ended before this node's taking.
func (s *Scheduler) Fenced(timerID string, dueAt time.Time) bool {
	if s.cfg.Fence == nil {
		return false
	}
	sl := index.SliceOf(timerID, dueAt, s.cfg.Buckets)
	s.mu.Lock()
	f, ok := s.fences[sl]
	_, held := s.held[sl]
	s.mu.Unlock()
	return ok && held && !dueAt.After(f.until)
}

// taken is called when this node took sl's lock at the tick of now, let
// go by its previous holder as rel. It reports whether the slice may be
// dispatched at once: without Fence, or when the slice needs no fence
// (released clean, or nothing of it is due within the window to fence),
// after recording its fence. Otherwise the fence is written in the
// background (fenceSlice), while the lock is extended as any other, and
// the slice goes to the trigger once it is: a database that answers slowly
// must not hold up the tick that keeps the locks.
//
// The window to fence: after a clean release (lock.ReleaseClean), none,
// since its holder promoted every lazy attempt it had started and starts
// no more. A lock that cannot have vanished while held
// (lock.ReleaseEnded) ended its holder's lazy starts before this taking,
// so only the runs due until the taking. Otherwise (a Redis lock), the
// runs due until the previous holder's own deadline could end, fenceWindow
// after the taking, after a wait of one lock TTL (fenceSlice).
func (s *Scheduler) taken(sl index.Slice, now time.Time, rel lock.Release) bool {
	if s.cfg.Fence == nil {
		return true
	}
	acquired := s.cfg.Clock.Now()
	s.mu.Lock()
	first := s.gen[sl] == 0
	s.mu.Unlock()
	if rel == lock.ReleaseEnded && first && s.cfg.FreshClean != nil && s.cfg.FreshClean() {
		rel = lock.ReleaseClean
	}
	var until time.Time
	switch rel {
	case lock.ReleaseClean:
	case lock.ReleaseEnded:
		until = acquired
	default:
		until = acquired.Add(s.fenceWindow())
	}
	s.mu.Lock()
	s.gen[sl]++
	gen := s.gen[sl]
	if !until.After(sl.Start()) {
		s.fences[sl] = fence{until: until, confirmed: now, ttl: s.cfg.LockTTL}
		s.mu.Unlock()
		return true
	}
	s.mu.Unlock()
	s.wg.Add(1)
	go s.fenceSlice(sl, gen, acquired, until, rel == lock.ReleaseUnknown)
	return false
}

// fenceSlice fences the runs of sl due until until, taken at acquired (its
// gen-th taking), and hands the slice to the trigger if this node still
// holds it from that taking; when the fence fails, the lock is released
// and the slice tried again at a later tick.
//
// With wait, it waits one lock TTL after the taking first. A lock that expired ended
// its previous holder's lazy starts before anybody could take it; one that
// vanished with a Redis restart did not, but that holder starts nothing
// after its lock's TTL from its last confirmed extension, which Redis
// answered before this taking. Fenced after that, every run the previous
// holder may have started and not recorded carries a higher attempt count
// than it started it with, so that this node's attempts never share a
// number with it, nor overlap it. The slice's runs due meanwhile start
// late by up to that TTL.
func (s *Scheduler) fenceSlice(sl index.Slice, gen uint64, acquired, until time.Time, wait bool) {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	current := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, held := s.held[sl]
		return held && s.gen[sl] == gen
	}
	if wait {
		if err := clock.Sleep(ctx, s.cfg.Clock, acquired.Add(s.cfg.LockTTL).Sub(s.cfg.Clock.Now())); err != nil {
			return
		}
	}
	if !current() {
		return
	}
	fenced := until
	if fenced.After(sl.End()) {
		fenced = sl.End()
	}
	fctx, fcancel := context.WithTimeout(ctx, 5*s.cfg.LockTTL)
	defer fcancel()
	err := s.cfg.Fence(fctx, sl, fenced)
	s.mu.Lock()
	confirmed, held := s.held[sl]
	ok := held && s.gen[sl] == gen
	if ok && err == nil {
		s.fences[sl] = fence{until: until, confirmed: confirmed, ttl: s.cfg.LockTTL}
	}
	if ok && err != nil {
		delete(s.held, sl)
		s.retryAt[sl] = s.cfg.Clock.Now().Add(s.cfg.LockTTL / 3)
		s.unclean = true // what the fence was to cover is not fenced
	}
	s.mu.Unlock()
	switch {
	case !ok:
	case err == nil:
		s.cfg.Trigger.Take(sl)
	default:
		s.cfg.Logger.Warn("fence slice: not taking it", "slice", sl.String(), "err", err)
		uctx, ucancel := context.WithTimeout(context.Background(), s.cfg.LockTTL)
		defer ucancel()
		if _, err := s.cfg.Locker.Unlock(uctx, LockKey(sl), s.cfg.Token); err != nil {
			s.cfg.Logger.Warn("release slice", "slice", sl.String(), "err", err)
		}
	}
}

// confirm records the answer to an extension of sl's lock sent at now for
// ttl: held moves the fence's confirmed end; a lock no longer held ends
// the fence at once (another node may hold it). An error changes nothing:
// the fence ends with the lock's last confirmed TTL.
func (s *Scheduler) confirm(sl index.Slice, now time.Time, ttl time.Duration, held bool, err error) {
	if s.cfg.Fence == nil || err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.fences[sl]
	switch {
	case !ok:
	case !held:
		delete(s.fences, sl)
	case now.Add(ttl).After(f.confirmed.Add(f.ttl)):
		f.confirmed, f.ttl = now, ttl
		s.fences[sl] = f
	}
}

// beforeRelease ends the fences of slices and, with BeforeRelease, has the
// executor write the claims of its lazy attempts of their runs, before
// their locks are released. It returns the slices that may be released
// clean (unlock): this node had fenced them, and every lazy attempt of
// theirs that started was promoted.
func (s *Scheduler) beforeRelease(ctx context.Context, slices ...index.Slice) map[index.Slice]bool {
	if s.cfg.Fence == nil || len(slices) == 0 {
		return nil
	}
	in := make(map[index.Slice]bool, len(slices))
	clean := make(map[index.Slice]bool, len(slices))
	s.mu.Lock()
	for _, sl := range slices {
		_, clean[sl] = s.fences[sl]
		delete(s.fences, sl)
		in[sl] = true
	}
	s.mu.Unlock()
	if s.cfg.BeforeRelease != nil {
		err := s.cfg.BeforeRelease(ctx, func(timerID string, dueAt time.Time) bool {
			return in[index.SliceOf(timerID, dueAt, s.cfg.Buckets)]
		})
		if err != nil {
			return nil
		}
	}
	return clean
}

// cleanKeep is how many lock TTLs the mark of a clean release is kept for
// the next holder (lock.Handover.UnlockClean); a taking after it fences
// and waits as after an expiry.
const cleanKeep = 10

// tryLock takes sl's lock, and tells how it was let go when the Locker can
// (lock.Handover).
func (s *Scheduler) tryLock(ctx context.Context, sl index.Slice) (bool, lock.Release, error) {
	if h, ok := s.cfg.Locker.(lock.Handover); ok {
		return h.TryLockFrom(ctx, LockKey(sl), s.cfg.Token, s.cfg.LockTTL)
	}
	ok, err := s.cfg.Locker.TryLock(ctx, LockKey(sl), s.cfg.Token, s.cfg.LockTTL)
	return ok, lock.ReleaseUnknown, err
}

// unlock releases sl's lock; clean, with a lock.Handover, marks the
// release clean for the next holder (beforeRelease).
func (s *Scheduler) unlock(ctx context.Context, sl index.Slice, clean bool) (bool, error) {
	if h, ok := s.cfg.Locker.(lock.Handover); ok && clean {
		return h.UnlockClean(ctx, LockKey(sl), s.cfg.Token, cleanKeep*s.cfg.LockTTL)
	}
	return s.cfg.Locker.Unlock(ctx, LockKey(sl), s.cfg.Token)
}
