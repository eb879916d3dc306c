// Package testsignal lets a test wait until a background part did
// something ("the trigger armed a run", "the sweeper finished a pass")
// instead of sleeping. A part holds a Signal for each such event and calls
// Signal where it happens; in production the Signal is never initialised
// and Signal does nothing. A test calls Init (usually through the part's
// TestSignalsInit) and then Wait.
//
// The idea is riverqueue/river's testsignal package.
package testsignal

import "time"

// TB is the part of testing.TB that signals use. It is an interface of
// its own so that the parts, which hold signals, do not link package
// testing into every binary.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// DefaultTimeout is how long Wait waits before it fails the test.
const DefaultTimeout = 10 * time.Second

// buffer is how many signals may wait unread; past it Signal fails the
// test rather than block the part.
const buffer = 100

// Signal is an event a part reports to tests. Its zero value is ready, and
// does nothing, in production. Init must be called before the part starts:
// Signal and Init are not synchronised with each other.
type Signal[T any] struct {
	ch chan T
	tb TB
}

// Init makes s record its signals for tb. Tests only.
func (s *Signal[T]) Init(tb TB) {
	s.ch = make(chan T, buffer)
	s.tb = tb
}

// Signal reports v to the test, if any; it never blocks.
func (s *Signal[T]) Signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
		s.tb.Errorf("testsignal: %d signals unread; the test does not wait for them", buffer)
	}
}

// Wait returns the next value signalled, failing the test if none comes
// within DefaultTimeout.
func (s *Signal[T]) Wait() T {
	s.mustInit()
	s.tb.Helper()
	t := time.NewTimer(DefaultTimeout)
	defer t.Stop()
	select {
	case v := <-s.ch:
		return v
	case <-t.C:
		s.tb.Fatalf("testsignal: nothing signalled within %s", DefaultTimeout)
	}
	var zero T
	return zero
}

// C returns the channel of the values signalled, to select on.
func (s *Signal[T]) C() <-chan T {
	s.mustInit()
	return s.ch
}

// RequireEmpty fails the test if a value was signalled and not read.
func (s *Signal[T]) RequireEmpty() {
	s.mustInit()
	s.tb.Helper()
	select {
	case v := <-s.ch:
		s.tb.Errorf("testsignal: unexpected signal %v", v)
	default:
	}
}

func (s *Signal[T]) mustInit() {
	if s.ch == nil {
		panic("testsignal: Signal used before Init (outside of a test?)")
	}
}
