package trigger

import (
	"context"
	"time"

	"github.com/chimehq/chime/index"
)

// recheckEvery is how often a held slice's pending runs are read from the
// store again, besides the index polls: a safety net for index updates lost
// to races between nodes (a run given back by a stopping node just as
// another node removed its stale entry), which would otherwise wait for the
// sweeper.
const recheckEvery = 5 * time.Second

// rebuild reads all of s's pending runs from the store, puts them back in
// the index, marks the slice known there, and queues them: for a slice the
// index lost (Redis flushed or restarted) or never had.
func (t *Trigger) rebuild(s index.Slice) {
	t.reconcileRange(s, true, s.Start(), s.End())
}

// recheck reads the pending runs of s due around now, in
// [now-2·recheckEvery, now+ReadAhead+recheckEvery): consecutive rechecks
// overlap, so every run of the slice is read by one while it is due, and a
// recheck costs the runs of seconds, not of the whole minute. Runs inserted
// after their window has passed are overdue, which is the sweeper's part.
func (t *Trigger) recheck(s index.Slice, now time.Time) {
	from, to := s.Start(), t.readUntil(s, now)
	if f := now.Add(-2 * t.recheckEvery); f.After(from) {
		from = f
	}
	if !from.Before(to) {
		return
	}
	t.reconcileRange(s, false, from, to)
}

// readUntil is where a read of s's runs at now may stop: the next recheck,
// recheckEvery later, reads on from there.
func (t *Trigger) readUntil(s index.Slice, now time.Time) time.Time {
	if e := now.Add(t.cfg.ReadAhead + t.recheckEvery); e.Before(s.End()) {
		return e
	}
	return s.End()
}

// reconcileRange reads s's pending runs due in [from, to), puts them back in
// the index and marks s known there when repair is set, and queues them.
func (t *Trigger) reconcileRange(s index.Slice, repair bool, from, to time.Time) {
	buckets := t.cfg.Index.Buckets()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		runs, err := t.cfg.Store.DueRuns(ctx, from, to, buckets, s.Bucket)
		if err == nil {
			entries := make([]index.Entry, len(runs))
			for i, r := range runs {
				entries[i] = index.Entry{RunID: r.ID, TimerID: r.TimerID, DueAt: r.DueAt}
			}
			if repair && len(entries) > 0 {
				err = t.cfg.Index.Add(ctx, entries...)
			}
			if repair && err == nil {
				err = t.cfg.Index.MarkKnown(ctx, s)
			}
			if err != nil {
				t.cfg.Logger.Warn("repair slice index", "slice", s.String(), "err", err)
			}
			cancel()
			t.mu.Lock()
			if st, ok := t.slices[s]; ok {
				st.ready = true
			}
			t.mu.Unlock()
			t.push(s, entries)
			t.signals.read.Signal(s)
			return
		}
		cancel()
		t.cfg.Logger.Warn("reconcile slice", "slice", s.String(), "attempt", attempt+1, "err", err)
		backoff := t.cfg.Clock.NewTimer(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second))
		select {
		case <-t.stop:
			backoff.Stop()
			return
		case <-backoff.C():
		}
	}
}
