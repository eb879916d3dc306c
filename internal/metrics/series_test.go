package metrics

import (
	"fmt"
	"testing"
	"time"
)

func TestSeries(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	s := NewSeries()
	// Minute 0: 100 delays of 10 ms and one of 2 s; 3 successes, a failure.
	for range 100 {
		s.Delay(base.Add(time.Second), "t1", 10*time.Millisecond)
	}
	s.Delay(base.Add(2*time.Second), "late", 2*time.Second)
	for range 3 {
		s.Fire(base.Add(3*time.Second), "t1", "succeeded")
	}
	s.Fire(base.Add(59*time.Second), "bad", "failed")
	// Minute 5: one retry.
	s.Fire(base.Add(5*time.Minute), "bad", "retried")

	now := base.Add(10*time.Minute + 30*time.Second)
	pts := s.Points(now)
	if len(pts) != SeriesMinutes {
		t.Fatalf("%d points, want %d", len(pts), SeriesMinutes)
	}
	if last := pts[len(pts)-1].Start; !last.Equal(base.Add(10 * time.Minute)) {
		t.Errorf("last point starts %v, want the minute of now", last)
	}
	p0 := pts[len(pts)-11]
	if !p0.Start.Equal(base) || p0.Fires["succeeded"] != 3 || p0.Fires["failed"] != 1 || p0.Delays != 101 {
		t.Errorf("minute 0: %+v", p0)
	}
	// Upper bounds within one bucket (25%).
	if p0.DelayP50 < 10*time.Millisecond || p0.DelayP50 > 12500*time.Microsecond {
		t.Errorf("p50 %v, want 10 ms to 12.5 ms", p0.DelayP50)
	}
	if p0.DelayP99 < 10*time.Millisecond || p0.DelayP99 > 12500*time.Microsecond {
		t.Errorf("p99 of 101 with one outlier: %v, want the 10 ms bucket", p0.DelayP99)
	}
	if p5 := pts[len(pts)-6]; p5.Fires["retried"] != 1 || p5.Delays != 0 || p5.DelayP50 != 0 {
		t.Errorf("minute 5: %+v", p5)
	}

	// The failing timer first, then the late one; t1 is neither.
	notes := s.Timers(now, 10)
	if len(notes) != 2 || notes[0].TimerID != "bad" || notes[0].Failures != 2 || !notes[0].LastFailure.Equal(base.Add(5*time.Minute)) ||
		notes[1].TimerID != "late" || notes[1].Late != 1 || notes[1].MaxDelay != 2*time.Second {
		t.Errorf("timers: %+v", notes)
	}
	if n := s.Timers(now, 1); len(n) != 1 {
		t.Errorf("limit 1: %d notes", len(n))
	}

	// An hour later the old minutes are gone, also when their slots are
	// reused.
	later := base.Add(SeriesMinutes*time.Minute + 5*time.Second)
	s.Fire(later, "t1", "succeeded")
	for _, p := range s.Points(later) {
		n := p.Fires["succeeded"] + p.Fires["failed"] + p.Fires["retried"]
		switch {
		case p.Start.Equal(base.Add(SeriesMinutes * time.Minute)):
			if n != 1 || p.Fires["succeeded"] != 1 || p.Delays != 0 {
				t.Errorf("the new minute (minute 0's slot): %+v", p)
			}
		case p.Start.Equal(base.Add(5 * time.Minute)):
			if n != 1 {
				t.Errorf("minute 5: %+v", p)
			}
		case n != 0 || p.Delays != 0:
			t.Errorf("minute %v counted: %+v", p.Start, p)
		}
	}
	// "late" was last noted more than an hour before later; "bad" not.
	if notes := s.Timers(later, 10); len(notes) != 1 || notes[0].TimerID != "bad" {
		t.Errorf("timers an hour later: %+v", notes)
	}
	if got := s.Points(later)[0].Start; !got.Equal(base.Add(time.Minute)) {
		t.Errorf("first point of the hour before %v: %v", later, got)
	}

	// A nil Series records nothing and reads as zeros.
	var none *Series
	none.Fire(now, "x", "failed")
	none.Delay(now, "x", time.Second)
	if none.Timers(now, 10) != nil {
		t.Error("nil series has timers")
	}
	if pts := none.Points(now); len(pts) != SeriesMinutes || pts[0].Delays != 0 {
		t.Errorf("nil series: %d points", len(pts))
	}
}

// TestSeriesManyLateTimers: with more late timers than it notes, a Series
// keeps at most maxTimerNotes, the most recent among them, and a new note
// does not cost a scan of every note (BenchmarkSeriesLate).
func TestSeriesManyLateTimers(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	s := NewSeries()
	const n = 5 * maxTimerNotes
	for i := range n {
		s.Delay(base.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("t%05d", i), 2*time.Second)
	}
	notes := s.Timers(base.Add(time.Minute), 2*n)
	if len(notes) == 0 || len(notes) > maxTimerNotes {
		t.Fatalf("%d notes, want 1 to %d", len(notes), maxTimerNotes)
	}
	found := false
	for _, note := range notes {
		if note.TimerID == fmt.Sprintf("t%05d", n-1) {
			found = true
		}
	}
	if !found {
		t.Error("the latest late timer is not noted")
	}
}

func BenchmarkSeriesLate(b *testing.B) {
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	s := NewSeries()
	ids := make([]string, 12500)
	for i := range ids {
		ids[i] = fmt.Sprintf("t%05d", i)
	}
	for i := 0; b.Loop(); i++ {
		s.Delay(base.Add(time.Duration(i)*time.Microsecond), ids[i%len(ids)], 2*time.Second)
	}
}
