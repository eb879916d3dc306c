package metrics

import (
	"slices"
	"time"

	"github.com/chimehq/chime/internal/store"
)

// A cluster's dashboard: each node writes its Series' minutes to the
// store (store.Dashboard, about once a minute: see package engine), and
// the answering node merges every node's rows with its own Series, which is
// fresher (MergePoints, MergeTimers).

// DelayBuckets is the number of delay buckets of a Series, the length of
// store.StatsMinute.Delays.
const DelayBuckets = delayBuckets

// MaxStoredNotes bounds the timer notes a node writes with a minute.
const MaxStoredNotes = 50

// Minutes returns the minutes of s from the one of from to the one of now
// that hold counts, and always the one of now, as rows of node: the
// minutes that changed since a write at from. The row of now carries the
// node's noted timers (at most MaxStoredNotes).
func (s *Series) Minutes(node string, from, now time.Time) []store.StatsMinute {
	last := now.Unix() / 60
	first := max(from.Unix()/60, last-SeriesMinutes+1)
	var out []store.StatsMinute
	if s == nil {
		return nil
	}
	notes := s.Timers(now, MaxStoredNotes)
	s.mu.Lock()
	defer s.mu.Unlock()
	for m := first; m <= last; m++ {
		sl := &s.minutes[m%SeriesMinutes]
		has := sl.start == m
		if !has && m != last {
			continue
		}
		row := store.StatsMinute{Minute: time.Unix(m*60, 0).UTC(), Node: node, Fires: map[string]int64{}}
		if has {
			for k, v := range sl.fires {
				row.Fires[k] = v
			}
			if sl.count > 0 {
				row.Delays = slices.Clone(sl.delays[:])
			}
		}
		out = append(out, row)
	}
	if len(out) > 0 {
		for _, n := range notes {
			out[len(out)-1].Timers = append(out[len(out)-1].Timers, store.StatsTimer{TimerID: n.TimerID,
				Failures: n.Failures, LastFailure: n.LastFailure, Late: n.Late, MaxDelay: n.MaxDelay, LastLate: n.LastLate})
		}
	}
	return out
}

// MergePoints returns the last SeriesMinutes minutes up to the one of
// now, oldest first, each the sum of own's minute (the answering node's
// Series; nil: none) and of rows (the other nodes' minutes, from the
// store: a row of own's node must be left out by the caller). Delay
// percentiles are those of the summed histograms.
func MergePoints(now time.Time, own *Series, rows []store.StatsMinute) []SeriesPoint {
	pts := own.Points(now) // zeros when own is nil
	type acc struct {
		delays [delayBuckets]int64
		count  int64
	}
	accs := make([]acc, len(pts))
	first := pts[0].Start.Unix() / 60
	if own != nil {
		own.mu.Lock()
		for i := range pts {
			m := first + int64(i)
			if sl := &own.minutes[m%SeriesMinutes]; sl.start == m {
				accs[i].delays, accs[i].count = sl.delays, sl.count
			}
		}
		own.mu.Unlock()
	}
	for _, r := range rows {
		i := r.Minute.Unix()/60 - first
		if i < 0 || i >= int64(len(pts)) {
			continue
		}
		for k, v := range r.Fires {
			pts[i].Fires[k] += v
		}
		for b, c := range r.Delays {
			if b < delayBuckets && c > 0 {
				accs[i].delays[b] += c
				accs[i].count += c
			}
		}
	}
	for i := range pts {
		a := &accs[i]
		pts[i].Delays = a.count
		pts[i].DelayP50 = percentile(&a.delays, a.count, 0.50)
		pts[i].DelayP99 = percentile(&a.delays, a.count, 0.99)
	}
	return pts
}

// MergeTimers returns the failing or late timers of the hour before now,
// as Series.Timers does, noted by own (nil: none) or by any node of rows
// (each node's latest row's notes; a row of own's node must be left out
// by the caller): per timer, the failures and late fires of every node
// added up, the largest delay and the latest times. At most limit.
func MergeTimers(now time.Time, own *Series, rows []store.StatsMinute, limit int) []TimerNote {
	latest := map[string]store.StatsMinute{}
	for _, r := range rows {
		if l, ok := latest[r.Node]; !ok || r.Minute.After(l.Minute) {
			latest[r.Node] = r
		}
	}
	merged := map[string]*TimerNote{}
	add := func(n TimerNote) {
		if n.last().Before(now.Add(-SeriesMinutes * time.Minute)) {
			return
		}
		m := merged[n.TimerID]
		if m == nil {
			m = &TimerNote{TimerID: n.TimerID}
			merged[n.TimerID] = m
		}
		m.Failures += n.Failures
		m.Late += n.Late
		m.MaxDelay = max(m.MaxDelay, n.MaxDelay)
		if n.LastFailure.After(m.LastFailure) {
			m.LastFailure = n.LastFailure
		}
		if n.LastLate.After(m.LastLate) {
			m.LastLate = n.LastLate
		}
	}
	for _, n := range own.Timers(now, maxTimerNotes) {
		add(n)
	}
	for _, r := range latest {
		for _, t := range r.Timers {
			add(TimerNote{TimerID: t.TimerID, Failures: t.Failures, LastFailure: t.LastFailure,
				Late: t.Late, MaxDelay: t.MaxDelay, LastLate: t.LastLate})
		}
	}
	out := make([]TimerNote, 0, len(merged))
	for _, n := range merged {
		out = append(out, *n)
	}
	return worstFirst(out, limit)
}
