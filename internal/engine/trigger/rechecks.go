package trigger

import (
	"context"
	"slices"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
)

// recheckEvery is how often a held slice's pending runs are read from the
// store again, besides the index polls: a safety net for index updates lost
// to races between nodes (a run given back by a stopping node just as
// another node removed its stale entry), which would otherwise wait for the
// sweeper.
const recheckEvery = 5 * time.Second

// rebuild reads all of s's pending runs from the store, puts them back in
// the index and marks the slice known there, for a slice the index lost
// (Redis flushed or restarted) or never had (beyond the in-process index's
// horizon when planned), and queues those a poll would: due before
// readUntil. The rest wait in the index for the polls, as a known slice's
// do: a whole minute queued here held the runs twice, in the index and in
// the heap (at a million timers 27,000 runs a slice, taken a dozen at a
// time when the engine starts).
//
// The slice is read rebuildPart of its minute at a time, each part put in
// the index before the next is read: a read of the whole minute held all
// of its runs as model.Runs at once, and every slice taken at a start is
// rebuilt at once. If the index does not take a part, the slice is not
// marked known (the next poll rebuilds it again) and every run read is
// queued, as before this split.
func (h *holder) rebuild(s index.Slice) {
	repaired := true
	for from := s.Start(); from.Before(s.End()); from = from.Add(rebuildPart) {
		to := from.Add(rebuildPart)
		if to.After(s.End()) {
			to = s.End()
		}
		entries, ok := h.readDue(s, from, to)
		if !ok {
			return // stopping
		}
		if len(entries) > 0 && repaired {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := h.cfg.Index.Add(ctx, entries...); err != nil {
				h.cfg.Logger.Warn("repair slice index", "slice", s.String(), "err", err)
				repaired = false
			}
			cancel()
		}
		if repaired {
			cut := h.readUntil(s, h.cfg.Clock.Now())
			entries = slices.DeleteFunc(entries, func(e index.Entry) bool { return !e.DueAt.Before(cut) })
		}
		h.push(s, entries)
	}
	if repaired {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := h.cfg.Index.MarkKnown(ctx, s); err != nil {
			h.cfg.Logger.Warn("repair slice index", "slice", s.String(), "err", err)
		}
		cancel()
	}
	h.reconciled(s, nil)
}

// rebuildPart is how much of a slice's minute a rebuild reads at once.
const rebuildPart = 10 * time.Second

// recheck reads the pending runs of s due around now, in
// [now-2·recheckEvery, now+ReadAhead+recheckEvery): consecutive rechecks
// overlap, so every run of the slice is read by one while it is due, and a
// recheck costs the runs of seconds, not of the whole minute. Runs inserted
// after their window has passed are overdue, which is the sweeper's part.
func (h *holder) recheck(s index.Slice, now time.Time) {
	from, to := h.recheckWindow(s, now)
	if !from.Before(to) {
		return
	}
	h.reconcileRange(s, from, to)
}

// recheckAll rechecks the slices ss at now, those of one minute with one
// read of the store for all their buckets (DueRuns filters each bucket in
// SQL, so a read per bucket scanned the whole minute's due runs once per
// bucket: with 16 buckets, 16 times). A slice whose shared read failed is
// rechecked on its own, with recheck's retries.
func (h *holder) recheckAll(ss []index.Slice, now time.Time) {
	byMinute := map[int64][]index.Slice{}
	var minutes []int64
	for _, s := range ss {
		if _, ok := byMinute[s.Minute]; !ok {
			minutes = append(minutes, s.Minute)
		}
		byMinute[s.Minute] = append(byMinute[s.Minute], s)
	}
	slices.Sort(minutes)
	buckets := h.cfg.Index.Buckets()
	for _, m := range minutes {
		group := byMinute[m]
		if len(group) == 1 || buckets <= 1 {
			for _, s := range group {
				h.recheck(s, now)
			}
			continue
		}
		// Every slice of a minute has the same window at now.
		from, to := h.recheckWindow(group[0], now)
		if !from.Before(to) {
			continue
		}
		in := make([]int, len(group))
		for i, s := range group {
			in[i] = s.Bucket
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		runs, err := h.cfg.Store.DueRuns(ctx, from, to, buckets, in...)
		cancel()
		if err != nil {
			h.cfg.Logger.Warn("recheck slices", "minute", m, "slices", len(group), "err", err)
			for _, s := range group {
				h.recheck(s, now)
			}
			continue
		}
		per := make(map[int][]index.Entry, len(group))
		for _, r := range runs {
			b := index.BucketOf(r.TimerID, buckets)
			per[b] = append(per[b], index.EntryOf(r))
		}
		for _, s := range group {
			h.reconciled(s, per[s.Bucket])
		}
	}
}

// recheckWindow is the window of s that a recheck at now reads (see
// recheck); it is empty when from is not before to.
func (h *holder) recheckWindow(s index.Slice, now time.Time) (from, to time.Time) {
	from, to = s.Start(), h.readUntil(s, now)
	if f := now.Add(-2 * h.recheckEvery); f.After(from) {
		from = f
	}
	return from, to
}

// readUntil is where a read of s's runs at now may stop: the next recheck,
// recheckEvery later, reads on from there.
func (h *holder) readUntil(s index.Slice, now time.Time) time.Time {
	if e := now.Add(h.cfg.ReadAhead + h.recheckEvery); e.Before(s.End()) {
		return e
	}
	return s.End()
}

// reconcileRange reads s's pending runs due in [from, to) and queues them.
func (h *holder) reconcileRange(s index.Slice, from, to time.Time) {
	if entries, ok := h.readDue(s, from, to); ok {
		h.reconciled(s, entries)
	}
}

// readDue reads s's pending runs due in [from, to) from the store, in due
// order, trying again until it succeeds; false if the trigger stops first.
func (h *holder) readDue(s index.Slice, from, to time.Time) ([]index.Entry, bool) {
	buckets := h.cfg.Index.Buckets()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		runs, err := h.cfg.Store.DueRuns(ctx, from, to, buckets, s.Bucket)
		cancel()
		if err == nil {
			entries := make([]index.Entry, len(runs))
			for i, r := range runs {
				entries[i] = index.EntryOf(r)
			}
			return entries, true
		}
		h.cfg.Logger.Warn("reconcile slice", "slice", s.String(), "attempt", attempt+1, "err", err)
		backoff := h.cfg.Clock.NewTimer(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second))
		select {
		case <-h.stop:
			backoff.Stop()
			return nil, false
		case <-backoff.C():
		}
	}
}

// reconciled marks s ready, queues the entries read for it from the store,
// and signals the read.
func (h *holder) reconciled(s index.Slice, entries []index.Entry) {
	h.mu.Lock()
	if st, ok := h.slices[s]; ok {
		st.ready = true
	}
	h.mu.Unlock()
	h.push(s, entries)
	h.signals.read.Signal(s)
}
