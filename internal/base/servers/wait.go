package servers

import (
	"time"
)

// TB is what the server starters and Eventually need of a test:
// testing.TB has it, and so has a harness outside a test (the chaos
// tool's, which starts the same deployments for its failover faults).
// The package does not import testing, so that the chime binary, which
// holds the chaos tool, does not link it.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Cleanup(func())
	TempDir() string
}

// Eventually and Poll check their condition at once, then after 5ms, and
// then twice as long after every check, up to every 50ms: quick for the
// conditions that hold soon, light on the servers for those that take
// seconds (a check may be an API request).
const (
	pollFirst = 5 * time.Millisecond
	pollMax   = 50 * time.Millisecond
)

// Eventually checks cond until it reports true, and fails the test if it
// has not within timeout; desc says what was waited for and the string
// cond returns says what it saw last (both go in the failure). It is the
// one wait-for-a-condition helper of chime's tests: prefer a test signal
// (internal/base/testsignal) or a fake clock (clock.Fake) where a part can
// report the event itself.
func Eventually(t TB, timeout time.Duration, desc string, cond func() (bool, string)) {
	t.Helper()
	if ok, last := Poll(timeout, cond); !ok {
		t.Fatalf("waited %s for %s; last: %s", timeout, desc, last)
	}
}

// Poll checks cond until it reports true or timeout passes, and returns
// its last answer: for a condition whose failure the test reports with
// t.Errorf and goes on, or a caller that must not fail the test from its
// goroutine.
func Poll(timeout time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(timeout)
	wait := pollFirst
	for {
		ok, last := cond()
		if ok {
			return true, last
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, last
		}
		t := time.NewTimer(min(wait, left))
		<-t.C
		wait = min(2*wait, pollMax)
	}
}

// EnvRequire, set to 1, makes a starter whose server binary is missing
// fail the test instead of skipping it (scripts/test.sh sets it in CI).
const EnvRequire = "CHIME_TEST_REQUIRE_SERVERS"
