package servers

import (
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	t.Parallel()
	n := 0
	ok, last := Poll(10*time.Second, func() (bool, string) { n++; return n == 3, "n" })
	if !ok || n != 3 || last != "n" {
		t.Errorf("Poll = %v, %q after %d checks; want true after 3", ok, last, n)
	}
	start := time.Now()
	ok, last = Poll(30*time.Millisecond, func() (bool, string) { return false, "never" })
	if ok || last != "never" {
		t.Errorf("Poll of a false condition = %v, %q", ok, last)
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > 5*time.Second {
		t.Errorf("Poll gave up after %v, want about 30ms", d)
	}
}

func TestEventually(t *testing.T) {
	t.Parallel()
	done := false
	Eventually(t, 10*time.Second, "the flag", func() (bool, string) {
		ok := done
		done = true
		return ok, "unset"
	})
}
