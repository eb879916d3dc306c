package metrics

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// SeriesMinutes is how many minutes a Series keeps: the last hour.
const SeriesMinutes = 60

// Delay buckets of a Series: bucket 0 holds delays up to delayBase, bucket
// i up to delayBase·delayGrowth^i, the last one everything longer.
const (
	delayBase    = time.Millisecond
	delayGrowth  = 1.25
	delayBuckets = 64 // up to about 1.6 h
)

// Series keeps per-minute counts of this node's finished attempts by
// status and a histogram of its fire delays, for the last SeriesMinutes
// minutes, in memory: what the web UI's dashboard charts (GET
// /api/v1/stats/series). It is this node's view; the engine writes its
// minutes to the store about once a minute (Minutes), and the API adds the
// other nodes' to it (MergePoints, MergeTimers). A restart starts it
// empty. Percentiles are read from exponential
// buckets 25% wide, so they are upper bounds within 25% of the true
// value. A nil *Series records nothing. It is safe for concurrent use.
type Series struct {
	mu      sync.Mutex
	minutes [SeriesMinutes]seriesMinute
	timers  map[string]*TimerNote // failing or late timers of the last hour
}

// LateDelay is the fire delay above which a Series notes a timer as late.
const LateDelay = time.Second

// maxTimerNotes bounds the timers a Series notes; when it is reached, the
// older half of the notes goes (see note).
const maxTimerNotes = 1000

// TimerNote is what a Series noted of one timer in the last hour: its
// failed attempts (retried or not) and its fires later than LateDelay.
type TimerNote struct {
	TimerID     string
	Failures    int64
	LastFailure time.Time
	Late        int64
	MaxDelay    time.Duration
	LastLate    time.Time
}

func (n *TimerNote) last() time.Time {
	if n.LastLate.After(n.LastFailure) {
		return n.LastLate
	}
	return n.LastFailure
}

// note returns the note of timer id, making room for it. s.mu is held.
func (s *Series) note(now time.Time, id string) *TimerNote {
	if s.timers == nil {
		s.timers = map[string]*TimerNote{}
	}
	if n := s.timers[id]; n != nil {
		return n
	}
	if len(s.timers) >= maxTimerNotes {
		// Full: drop the notes older than the hour and, if that is not
		// enough, the older half by their last event. Dropping half at
		// once keeps the cost per new note constant on average: a node
		// that falls behind notes every one of its timers late, and a scan
		// of every note for each new one (the oldest alone dropped) took a
		// seventh of such a node's CPU under this lock.
		notes := make([]*TimerNote, 0, len(s.timers))
		for k, n := range s.timers {
			if n.last().Before(now.Add(-SeriesMinutes * time.Minute)) {
				delete(s.timers, k)
			} else {
				notes = append(notes, n)
			}
		}
		if len(s.timers) >= maxTimerNotes {
			slices.SortFunc(notes, func(a, b *TimerNote) int { return a.last().Compare(b.last()) })
			for _, n := range notes[:len(notes)/2] {
				delete(s.timers, n.TimerID)
			}
		}
	}
	n := &TimerNote{TimerID: id}
	s.timers[id] = n
	return n
}

type seriesMinute struct {
	start  int64 // Unix minute this slot holds; slots of other minutes are stale
	fires  map[string]int64
	delays [delayBuckets]int64
	count  int64 // of delays
}

// NewSeries returns an empty Series.
func NewSeries() *Series { return &Series{} }

// slot returns the slot of the minute of now, cleared if it held an
// older minute. s.mu is held.
func (s *Series) slot(now time.Time) *seriesMinute {
	m := now.Unix() / 60
	sl := &s.minutes[m%SeriesMinutes]
	if sl.start != m {
		*sl = seriesMinute{start: m, fires: map[string]int64{}}
	}
	return sl
}

// Fire counts a finished attempt of timer with status (succeeded, failed,
// retried, skipped, cancelled: the statuses of chime_fires_total) at now;
// a failed or retried one notes the timer as failing.
func (s *Series) Fire(now time.Time, timer, status string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.slot(now).fires[status]++
	if status == "failed" || status == "retried" {
		n := s.note(now, timer)
		n.Failures++
		n.LastFailure = now
	}
	s.mu.Unlock()
}

// Delay records the delay of an action of timer that started at now; a
// delay over LateDelay notes the timer as late.
func (s *Series) Delay(now time.Time, timer string, d time.Duration) {
	if s == nil {
		return
	}
	i := 0
	if d > delayBase {
		i = int(math.Ceil(math.Log(float64(d)/float64(delayBase)) / math.Log(delayGrowth)))
		i = min(i, delayBuckets-1)
	}
	s.mu.Lock()
	sl := s.slot(now)
	sl.delays[i]++
	sl.count++
	if d > LateDelay {
		n := s.note(now, timer)
		n.Late++
		n.MaxDelay = max(n.MaxDelay, d)
		n.LastLate = now
	}
	s.mu.Unlock()
}

// Timers returns the notes of the timers that failed or were late in the
// hour before now, those with the most failures first, then the latest;
// at most limit. A note counts from when it was made and is dropped an
// hour after its timer's last failure or late fire, so a timer that keeps
// failing keeps counting past the hour.
func (s *Series) Timers(now time.Time, limit int) []TimerNote {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	var out []TimerNote
	for k, n := range s.timers {
		if n.last().Before(now.Add(-SeriesMinutes * time.Minute)) {
			delete(s.timers, k)
			continue
		}
		out = append(out, *n)
	}
	s.mu.Unlock()
	return worstFirst(out, limit)
}

// worstFirst sorts notes most failures first, then longest delay, then by
// timer id, and keeps the first limit.
func worstFirst(out []TimerNote, limit int) []TimerNote {
	slices.SortFunc(out, func(a, b TimerNote) int {
		if c := cmp.Compare(b.Failures, a.Failures); c != 0 {
			return c
		}
		if c := cmp.Compare(b.MaxDelay, a.MaxDelay); c != 0 {
			return c
		}
		return strings.Compare(a.TimerID, b.TimerID)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// SeriesPoint is one minute of a Series.
type SeriesPoint struct {
	// Start is the minute's first instant.
	Start time.Time
	// Fires counts the attempts that finished in the minute, by status.
	Fires map[string]int64
	// Delays is how many actions started in the minute; DelayP50 and
	// DelayP99 their median and 99th percentile delays (upper bounds, see
	// Series), zero when Delays is.
	Delays             int64
	DelayP50, DelayP99 time.Duration
}

// Points returns the last SeriesMinutes minutes up to the one of now,
// oldest first; minutes with nothing recorded have zero counts.
func (s *Series) Points(now time.Time) []SeriesPoint {
	last := now.Unix() / 60
	out := make([]SeriesPoint, 0, SeriesMinutes)
	if s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	for m := last - SeriesMinutes + 1; m <= last; m++ {
		p := SeriesPoint{Start: time.Unix(m*60, 0).UTC(), Fires: map[string]int64{}}
		if s != nil {
			if sl := &s.minutes[m%SeriesMinutes]; sl.start == m {
				for k, v := range sl.fires {
					p.Fires[k] = v
				}
				p.Delays = sl.count
				p.DelayP50 = percentile(&sl.delays, sl.count, 0.50)
				p.DelayP99 = percentile(&sl.delays, sl.count, 0.99)
			}
		}
		out = append(out, p)
	}
	return out
}

// percentile returns the upper bound of the bucket that holds the q-th
// quantile of n delays.
func percentile(b *[delayBuckets]int64, n int64, q float64) time.Duration {
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i, c := range b {
		if seen += c; seen >= rank {
			return time.Duration(float64(delayBase) * math.Pow(delayGrowth, float64(i)))
		}
	}
	return time.Duration(float64(delayBase) * math.Pow(delayGrowth, delayBuckets-1))
}
