package clock

import (
	"errors"
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	now := base
	fake := Func(func() time.Time { return now })
	tests := []struct {
		name       string
		ref        time.Duration // reference ahead of base at the read
		rtt        time.Duration
		wantOffset time.Duration
	}{
		{"in step", 0, 2 * time.Millisecond, 0},
		{"node behind", 5 * time.Second, 4 * time.Millisecond, 5 * time.Second},
		{"node ahead", -5 * time.Second, 0, -5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now = base
			off, rtt, err := measure(fake, func() (time.Time, error) {
				ref := now.Add(tt.rtt / 2).Add(tt.ref)
				now = now.Add(tt.rtt)
				return ref, nil
			})
			if err != nil || off != tt.wantOffset || rtt != tt.rtt {
				t.Errorf("Measure = %v, %v, %v; want %v, %v", off, rtt, err, tt.wantOffset, tt.rtt)
			}
		})
	}
	if _, _, err := measure(fake, func() (time.Time, error) { return time.Time{}, errors.New("down") }); err == nil {
		t.Error("Measure with a failing read: no error")
	}
}

func TestCorrected(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	c := NewCorrected(Func(func() time.Time { return at }))
	c.SetOffset(-5 * time.Second)
	if got := c.Now(); !got.Equal(at.Add(-5 * time.Second)) {
		t.Errorf("Now = %v, want %v", got, at.Add(-5*time.Second))
	}
	if c.Offset() != -5*time.Second || !c.Base().Now().Equal(at) {
		t.Errorf("Offset = %v, Base = %v", c.Offset(), c.Base().Now())
	}
}

func TestEstimatePicksTheShortestRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	fake := Func(func() time.Time { return now })
	// The reference is 3 s ahead. The first read waits 40 ms for a
	// connection before the server reads its clock (a skewed sample); the
	// second is quick.
	waits := []struct{ before, after time.Duration }{{40 * time.Millisecond, time.Millisecond}, {time.Millisecond, time.Millisecond}}
	i := 0
	off, rtt, err := Estimate(fake, 2, func() (time.Time, error) {
		w := waits[i]
		i++
		now = now.Add(w.before)
		ref := now.Add(3 * time.Second)
		now = now.Add(w.after)
		return ref, nil
	})
	if err != nil || off != 3*time.Second || rtt != 2*time.Millisecond {
		t.Errorf("Estimate = %v, %v, %v; want 3s, 2ms", off, rtt, err)
	}
	// An offset within half the round trip is no offset.
	off, _, _ = Estimate(fake, 1, func() (time.Time, error) {
		ref := now.Add(2 * time.Millisecond)
		now = now.Add(10 * time.Millisecond)
		return ref, nil
	})
	if off != 0 {
		t.Errorf("Estimate within its error bound = %v, want 0", off)
	}
}
