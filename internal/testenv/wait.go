package testenv

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually checks its condition.
const pollEvery = 5 * time.Millisecond

// Eventually checks cond until it reports true, and fails the test if it
// has not within timeout; desc says what was waited for and the string
// cond returns says what it saw last (both go in the failure). It is the
// one wait-for-a-condition helper of chime's tests: prefer a test signal
// (internal/testsignal) or a fake clock (clock.Fake) where a part can
// report the event itself.
func Eventually(t testing.TB, timeout time.Duration, desc string, cond func() (bool, string)) {
	t.Helper()
	if ok, last := Poll(timeout, cond); !ok {
		t.Fatalf("waited %s for %s; last: %s", timeout, desc, last)
	}
}

// Poll checks cond every few milliseconds until it reports true or timeout
// passes, and returns its last answer: for callers that must not fail the
// test from their goroutine.
func Poll(timeout time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return true, last
		}
		if !time.Now().Before(deadline) {
			return false, last
		}
		<-tick.C
	}
}
