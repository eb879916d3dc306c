package model

import (
	"fmt"
	"testing"
	"time"
)

func TestJitterOffset(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	const window = 30 * time.Second
	// Deterministic, whatever the zone the instant is read in, and in
	// [0, window) in whole milliseconds.
	a := JitterOffset("01TIMER", at, window)
	if b := JitterOffset("01TIMER", at.In(time.FixedZone("x", 3600)), window); a != b {
		t.Fatalf("JitterOffset differs for the same instant: %s, %s", a, b)
	}
	for _, j := range []time.Duration{0, -time.Second, time.Microsecond} {
		if o := JitterOffset("01TIMER", at, j); o != 0 {
			t.Errorf("JitterOffset(jitter %s) = %s, want 0", j, o)
		}
	}
	if o := JitterOffset("01TIMER", at, time.Millisecond); o != 0 {
		t.Errorf("JitterOffset(jitter 1ms) = %s, want 0", o)
	}
	// A herd of 1,000 timers at one instant spreads over the window: no
	// one-second bucket empty, none with more than twice its share.
	var buckets [30]int
	for i := range 1000 {
		o := JitterOffset(fmt.Sprintf("01HERD%04d", i), at, window)
		if o < 0 || o >= window || o%time.Millisecond != 0 {
			t.Fatalf("offset %s outside [0, %s) or not whole milliseconds", o, window)
		}
		buckets[o/time.Second]++
	}
	for i, n := range buckets {
		if n == 0 || n > 2*1000/len(buckets) {
			t.Errorf("bucket %ds holds %d of 1000 offsets: %v", i, n, buckets)
		}
	}
	// One timer's successive fires move by different amounts.
	seen := map[time.Duration]bool{}
	for i := range 20 {
		seen[JitterOffset("01TIMER", at.Add(time.Duration(i)*time.Hour), window)] = true
	}
	if len(seen) < 15 {
		t.Errorf("20 fires of one timer got only %d distinct offsets", len(seen))
	}
	// Policy.DueAt adds the offset.
	p := Policy{Jitter: window}
	if got := p.DueAt("01TIMER", at); !got.Equal(at.Add(a)) {
		t.Errorf("DueAt = %s, want %s", got, at.Add(a))
	}
	if got := (Policy{}).DueAt("01TIMER", at); !got.Equal(at) {
		t.Errorf("DueAt without jitter = %s, want %s", got, at)
	}
}

func TestPolicyEqualDST(t *testing.T) {
	t.Parallel()
	if !(Policy{}).Equal(Policy{DST: DSTDefault}) {
		t.Error(`dst "" and "default" differ`)
	}
	if (Policy{}).Equal(Policy{DST: "both"}) || (Policy{}).Equal(Policy{Jitter: time.Second}) {
		t.Error("a dst or jitter change compares equal")
	}
}
