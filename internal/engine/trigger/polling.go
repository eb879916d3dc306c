package trigger

import (
	"context"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
)

// pollLoop polls the index every Poll until stop is closed.
func (h *holder) pollLoop() {
	tick := h.cfg.Clock.NewTicker(h.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C():
		}
		h.pollOnce()
		h.signals.polled.Signal(h.cfg.Clock.Now())
	}
}

func (h *holder) pollOnce() {
	now := h.cfg.Clock.Now()
	until := now.Add(h.cfg.ReadAhead)
	// One train of rechecks at a time: on a slow machine a train can
	// outlast recheckEvery, and the next one waits for it.
	rechecking := h.rechecking.Load()
	h.mu.Lock()
	var held, done, recheck []index.Slice
	var states []*sliceState // of held
	due := false             // a held slice's recheck is due
	for s, st := range h.slices {
		switch {
		case st.dropped || !st.ready:
		case st.queued == 0 && now.After(s.End().Add(h.cfg.DoneGrace)):
			done = append(done, s)
		default:
			held = append(held, s)
			states = append(states, st)
			if now.Sub(st.checked) >= h.recheckEvery {
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
			if st := h.slices[s]; now.Sub(st.checked) >= h.recheckEvery/2 {
				st.checked = now
				recheck = append(recheck, s)
			}
		}
	}
	h.mu.Unlock()
	if len(recheck) > 0 {
		// One slice after the other, in one goroutine: the rechecks of
		// every held slice come due at the same poll, and run at once
		// they kept both cores of a small machine busy for 15–25 ms,
		// long enough to delay the timers of the fires due then.
		h.rechecking.Store(true)
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer h.rechecking.Store(false)
			h.recheckAll(recheck, now)
		}()
	}
	since, _ := h.cfg.Index.(index.SinceRanger)
	for i, s := range held {
		ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Poll*5)
		var (
			entries []index.Entry
			mark    index.Mark
			known   bool
			err     error
		)
		if since != nil {
			h.mu.Lock()
			from := states[i].mark
			h.mu.Unlock()
			entries, mark, known, err = since.RangeSince(ctx, s, until, from)
		} else {
			entries, known, err = h.cfg.Index.Range(ctx, s, until)
		}
		cancel()
		if err != nil {
			h.cfg.Logger.Warn("poll slice", "slice", s.String(), "err", err)
			continue
		}
		if !known {
			// The index lost the slice (Redis flushed or restarted):
			// rebuild it from the store.
			h.mu.Lock()
			if st, ok := h.slices[s]; ok {
				st.ready, st.mark = false, index.Mark{}
			}
			h.mu.Unlock()
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				h.rebuild(s)
			}()
			continue
		}
		if since != nil {
			h.pushPolled(s, states[i], entries, mark)
		} else {
			h.push(s, entries)
		}
	}
	for _, s := range done {
		// One last look at the index: a run may have been added late.
		ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Poll*5)
		entries, known, err := h.cfg.Index.Range(ctx, s, s.End().Add(time.Minute))
		cancel()
		if err != nil {
			continue
		}
		if known && len(entries) > 0 {
			h.push(s, entries)
			if h.queued(s) > 0 {
				continue
			}
		}
		h.mu.Lock()
		delete(h.slices, s)
		h.mu.Unlock()
		if h.cfg.OnDone != nil {
			h.cfg.OnDone(s)
		}
	}
}
