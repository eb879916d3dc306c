package trigger

import (
	"context"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
)

func (t *Trigger) pollLoop() {
	defer t.wg.Done()
	tick := t.cfg.Clock.NewTicker(t.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C():
		}
		t.pollOnce()
		t.signals.polled.Signal(t.cfg.Clock.Now())
	}
}

func (t *Trigger) pollOnce() {
	now := t.cfg.Clock.Now()
	until := now.Add(t.cfg.ReadAhead)
	// One train of rechecks at a time: on a slow machine a train can
	// outlast recheckEvery, and the next one waits for it.
	rechecking := t.rechecking.Load()
	t.mu.Lock()
	var held, done, recheck []index.Slice
	var states []*sliceState // of held
	due := false             // a held slice's recheck is due
	for s, st := range t.slices {
		switch {
		case st.dropped || !st.ready:
		case st.queued == 0 && now.After(s.End().Add(t.cfg.DoneGrace)):
			done = append(done, s)
		default:
			held = append(held, s)
			states = append(states, st)
			if now.Sub(st.checked) >= t.recheckEvery {
				due = true
			}
		}
	}
	if due && !rechecking {
		// The train takes every held slice last checked at least half a
		// period ago, not only those due: the slices of a minute, taken
		// at different polls, fall into one train from the second
		// recheck on, and recheckAll reads each minute's slices with one
		// query instead of one per slice.
		for _, s := range held {
			if st := t.slices[s]; now.Sub(st.checked) >= t.recheckEvery/2 {
				st.checked = now
				recheck = append(recheck, s)
			}
		}
	}
	t.mu.Unlock()
	if len(recheck) > 0 {
		// One slice after the other, in one goroutine: the rechecks of
		// every held slice come due at the same poll, and run at once
		// they kept both cores of a small machine busy for 15–25 ms,
		// long enough to delay the timers of the fires due then.
		t.rechecking.Store(true)
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer t.rechecking.Store(false)
			t.recheckAll(recheck, now)
		}()
	}
	since, _ := t.cfg.Index.(index.SinceRanger)
	for i, s := range held {
		ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Poll*5)
		var (
			entries []index.Entry
			mark    index.Mark
			known   bool
			err     error
		)
		if since != nil {
			t.mu.Lock()
			from := states[i].mark
			t.mu.Unlock()
			entries, mark, known, err = since.RangeSince(ctx, s, until, from)
		} else {
			entries, known, err = t.cfg.Index.Range(ctx, s, until)
		}
		cancel()
		if err != nil {
			t.cfg.Logger.Warn("poll slice", "slice", s.String(), "err", err)
			continue
		}
		if !known {
			// The index lost the slice (Redis flushed or restarted):
			// rebuild it from the store.
			t.mu.Lock()
			if st, ok := t.slices[s]; ok {
				st.ready, st.mark = false, index.Mark{}
			}
			t.mu.Unlock()
			t.wg.Add(1)
			go func() {
				defer t.wg.Done()
				t.rebuild(s)
			}()
			continue
		}
		if since != nil {
			t.pushPolled(s, states[i], entries, mark)
		} else {
			t.push(s, entries)
		}
	}
	for _, s := range done {
		// One last look at the index: a run may have been added late.
		ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Poll*5)
		entries, known, err := t.cfg.Index.Range(ctx, s, s.End().Add(time.Minute))
		cancel()
		if err != nil {
			continue
		}
		if known && len(entries) > 0 {
			t.push(s, entries)
			if t.queued(s) > 0 {
				continue
			}
		}
		t.mu.Lock()
		delete(t.slices, s)
		t.mu.Unlock()
		if t.cfg.OnDone != nil {
			t.cfg.OnDone(s)
		}
	}
}
