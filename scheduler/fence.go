package scheduler

// This file: the slice lock as the fence of lazy claims (Config.Fence,
// LazyDeadline; docs/guarantees.md, "Lazy claims").

import (
	"context"
	"fmt"
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
	// (lock.Release.Ended); zero when it was released clean.
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
//
// The deadline is that of LazyDeadline, the lock's confirmed end less
// LazyMargin: a run due after it is not to be claimed with a write yet.
// A node that stalled after its fence, or whose extensions failed, still
// believes it holds the slice; the next holder, taking a lock that
// expired, fences only the runs due until its taking (the lock's end at
// the earliest) and starts the later ones lazily, which a claim with a
// write that lands late would not see.
func (s *Scheduler) Fenced(timerID string, dueAt time.Time) (time.Time, bool) {
	if s.cfg.Fence == nil {
		return time.Time{}, false
	}
	sl := index.SliceOf(timerID, dueAt, s.cfg.Buckets)
	s.mu.Lock()
	f, ok := s.fences[sl]
	_, held := s.held[sl]
	s.mu.Unlock()
	if !ok || !held || dueAt.After(f.until) {
		return time.Time{}, false
	}
	return f.confirmed.Add(f.ttl - LazyMargin), true
}

// pendingFence is a fence this node owes a slice it took: the wait
// before it (until wait) and the runs it covers (due until until).
type pendingFence struct{ wait, until time.Time }

// note is how a pending fence is handed to the slice's next holder with
// its lock (lock.Handover.UnlockNote): "w<unix ms> f<unix ms>". The empty
// note is a clean release: nothing to fence.
func (p pendingFence) note() string {
	return fmt.Sprintf("w%d f%d", p.wait.UnixMilli(), p.until.UnixMilli())
}

// parseNote reads a note of pendingFence.note; ok is false for another.
func parseNote(note string) (p pendingFence, ok bool) {
	var w, f int64
	if _, err := fmt.Sscanf(note, "w%d f%d", &w, &f); err != nil {
		return p, false
	}
	return pendingFence{wait: time.UnixMilli(w), until: time.UnixMilli(f)}, true
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
// What to fence: after a clean release (the empty note), nothing, since
// its holder promoted every lazy attempt it had started and starts no
// more. After a release with a pending fence's note, that fence: the
// holder that owed it started nothing lazily in the slice. A lock that
// cannot have vanished while held (Release.Ended) ended its holder's lazy
// starts before this taking, so the runs due until the taking, at once.
// Otherwise (a Redis lock), the runs due until the previous holder's own
// deadline could end, fenceWindow after the taking, after a wait of one
// lock TTL.
func (s *Scheduler) taken(sl index.Slice, now time.Time, rel lock.Release) bool {
	if s.cfg.Fence == nil {
		return true
	}
	acquired := s.cfg.Clock.Now()
	s.mu.Lock()
	first := s.gen[sl] == 0
	s.mu.Unlock()
	p := pendingFence{wait: acquired.Add(s.cfg.LockTTL), until: acquired.Add(s.fenceWindow())}
	switch {
	case rel.Noted && rel.Note == "":
		p = pendingFence{}
	case rel.Noted:
		if q, ok := parseNote(rel.Note); ok {
			p = q
		}
	case rel.Ended && first && s.cfg.FreshClean != nil && s.cfg.FreshClean():
		p = pendingFence{}
	case rel.Ended:
		p = pendingFence{until: acquired}
	}
	s.mu.Lock()
	s.gen[sl]++
	gen := s.gen[sl]
	if !p.until.After(sl.Start()) {
		s.fences[sl] = fence{until: p.until, confirmed: now, ttl: s.cfg.LockTTL}
		s.mu.Unlock()
		return true
	}
	s.pending[sl] = p
	s.mu.Unlock()
	s.wg.Add(1)
	go s.fenceSlice(sl, gen, p)
	return false
}

// fenceSlice writes the fence p of sl (its gen-th taking), and hands the
// slice to the trigger if this node still holds it from that taking; when
// the fence fails, the lock is released (with p as its note) and the slice
// tried again at a later tick.
//
// It waits until p.wait first: one lock TTL after the taking of a Redis
// lock let go without a note. A lock that expired ended
// its previous holder's lazy starts before anybody could take it; one that
// vanished with a Redis restart did not, but that holder starts nothing
// after its lock's TTL from its last confirmed extension, which Redis
// answered before this taking. Fenced after that, every run the previous
// holder may have started and not recorded carries a higher attempt count
// than it started it with, so that this node's attempts never share a
// number with it, nor overlap it. The slice's runs due meanwhile start
// late by up to that TTL.
func (s *Scheduler) fenceSlice(sl index.Slice, gen uint64, p pendingFence) {
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
	if err := clock.Sleep(ctx, s.cfg.Clock, p.wait.Sub(s.cfg.Clock.Now())); err != nil {
		return
	}
	if !current() {
		return
	}
	fenced := p.until
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
		s.fences[sl] = fence{until: p.until, confirmed: confirmed, ttl: s.cfg.LockTTL}
		delete(s.pending, sl)
	}
	if ok && err != nil {
		delete(s.held, sl)
		delete(s.pending, sl)
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
		if _, err := s.unlock(uctx, sl, p.note(), true); err != nil {
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
// their locks are released. It returns the note to release each slice
// with (unlock): the empty note for a slice this node had fenced when
// every lazy attempt of it that started was promoted (a clean release),
// the fence it still owed a slice taken and not fenced yet; none for the
// others.
func (s *Scheduler) beforeRelease(ctx context.Context, slices ...index.Slice) map[index.Slice]string {
	if s.cfg.Fence == nil || len(slices) == 0 {
		return nil
	}
	in := make(map[index.Slice]bool, len(slices))
	notes := make(map[index.Slice]string, len(slices))
	var fenced []index.Slice
	s.mu.Lock()
	for _, sl := range slices {
		if _, ok := s.fences[sl]; ok {
			fenced = append(fenced, sl)
		} else if p, ok := s.pending[sl]; ok {
			notes[sl] = p.note()
		}
		delete(s.fences, sl)
		delete(s.pending, sl)
		in[sl] = true
	}
	s.mu.Unlock()
	if s.cfg.BeforeRelease != nil {
		err := s.cfg.BeforeRelease(ctx, func(timerID string, dueAt time.Time) bool {
			return in[index.SliceOf(timerID, dueAt, s.cfg.Buckets)]
		})
		if err != nil {
			return notes
		}
	}
	for _, sl := range fenced {
		notes[sl] = ""
	}
	return notes
}

// noteKeep is how many lock TTLs the note of a release is kept for the
// next holder (lock.Handover.UnlockNote); a taking after it fences and
// waits as after an expiry.
const noteKeep = 10

// release releases sl's lock with its note from beforeRelease's notes,
// and records a release that was not clean (ReleasedClean).
func (s *Scheduler) release(ctx context.Context, sl index.Slice, notes map[index.Slice]string) (bool, error) {
	note, noted := notes[sl]
	if s.cfg.Fence != nil && (!noted || note != "") {
		s.mu.Lock()
		s.unclean = true
		s.mu.Unlock()
	}
	return s.unlock(ctx, sl, note, noted)
}

// tryLock takes sl's lock, and, with Fence, tells how it was let go when
// the Locker can (lock.Handover); without Fence nothing reads it.
func (s *Scheduler) tryLock(ctx context.Context, sl index.Slice) (bool, lock.Release, error) {
	if h, ok := s.cfg.Locker.(lock.Handover); ok && s.cfg.Fence != nil {
		return h.TryLockFrom(ctx, LockKey(sl), s.cfg.Token, s.cfg.LockTTL)
	}
	ok, err := s.cfg.Locker.TryLock(ctx, LockKey(sl), s.cfg.Token, s.cfg.LockTTL)
	return ok, lock.Release{}, err
}

// unlock releases sl's lock; with noted and a lock.Handover, it leaves
// note for the next holder (beforeRelease).
func (s *Scheduler) unlock(ctx context.Context, sl index.Slice, note string, noted bool) (bool, error) {
	if h, ok := s.cfg.Locker.(lock.Handover); ok && noted {
		return h.UnlockNote(ctx, LockKey(sl), s.cfg.Token, note, noteKeep*s.cfg.LockTTL)
	}
	return s.cfg.Locker.Unlock(ctx, LockKey(sl), s.cfg.Token)
}
