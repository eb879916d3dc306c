// Package locktest is the behaviour suite that every lock.Locker and
// lock.Elector implementation must pass. Leases in the suite are real and
// short (tens to hundreds of milliseconds); expiry is awaited by polling
// with a deadline, not by fixed sleeps, so the suite is slow only when the
// implementation is wrong.
package locktest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/coord/lock"
)

// NewLocker returns a Locker with no locks held, isolated from every other
// Locker the suite creates. It registers its own cleanup with t.
type NewLocker func(t *testing.T) lock.Locker

// NewElectors prepares one election backend for a test (a key prefix, a
// directory) and returns a function that creates candidates on it: each
// call returns an Elector as a separate process would hold it. An
// implementation without per-process state may return the same Elector
// every time.
type NewElectors func(t *testing.T) (candidate func() lock.Elector)

// waitFor is how long the suite waits for a lease to pass.
const waitFor = 5 * time.Second

// RunLocker runs the Locker suite.
func RunLocker(t *testing.T, newLocker NewLocker) {
	t.Run("Protocol", func(t *testing.T) {
		t.Parallel()
		l := newLocker(t)
		const key, ttl = "slice:1:2", time.Minute
		steps := []struct {
			op    string // lock, extend, unlock
			key   string
			token string
			want  bool
		}{
			{"extend", key, "a", false},
			{"unlock", key, "a", false},
			{"lock", key, "a", true},
			{"lock", key, "b", false},
			{"lock", key, "a", true}, // held by a: extends
			{"lock", "slice:1:3", "b", true},
			{"extend", key, "b", false},
			{"extend", key, "a", true},
			{"unlock", key, "b", false},
			{"lock", key, "b", false},
			{"unlock", key, "a", true},
			{"unlock", key, "a", false},
			{"extend", key, "a", false},
			{"lock", key, "b", true},
			{"lock", "slice:1:3", "a", false},
		}
		for i, s := range steps {
			got := do(t, l, s.op, s.key, s.token, ttl)
			if got != s.want {
				t.Fatalf("step %d: %s(%q, %q) = %v, want %v", i, s.op, s.key, s.token, got, s.want)
			}
		}
	})

	t.Run("InvalidTTL", func(t *testing.T) {
		t.Parallel()
		l := newLocker(t)
		ctx := context.Background()
		for _, ttl := range []time.Duration{0, -time.Second} {
			if _, err := l.TryLock(ctx, "k", "a", ttl); err == nil {
				t.Errorf("TryLock with ttl %v: no error", ttl)
			}
		}
	})

	t.Run("Expiry", func(t *testing.T) {
		t.Parallel()
		l := newLocker(t)
		const ttl = 300 * time.Millisecond
		start := time.Now()
		if !do(t, l, "lock", "k", "a", ttl) {
			t.Fatal("TryLock of a free key failed")
		}
		if !do(t, l, "lock", "k2", "a", ttl/3) {
			t.Fatal("TryLock of a free key failed")
		}
		if do(t, l, "lock", "k", "b", ttl) {
			t.Fatal("TryLock of a held key succeeded")
		}
		testenv.Eventually(t, waitFor, "the lock to be free", func() (bool, string) { return do(t, l, "lock", "k", "b", time.Minute), "" })
		if d := time.Since(start); d < ttl-20*time.Millisecond {
			t.Errorf("lock taken over after %v, before its ttl %v", d, ttl)
		}
		if do(t, l, "extend", "k", "a", time.Minute) || do(t, l, "unlock", "k", "a", time.Minute) {
			t.Error("the expired holder could extend or unlock")
		}
		// An expired lock nobody took cannot be extended either: k2's
		// lease is a third of k's, which has passed.
		if do(t, l, "extend", "k2", "a", time.Minute) {
			t.Error("an expired lock was extended")
		}
	})

	t.Run("ExtendOutlivesTTL", func(t *testing.T) {
		t.Parallel()
		l := newLocker(t)
		tests := []struct{ op string }{{"lock"}, {"extend"}}
		for _, tc := range tests {
			key := "k-" + tc.op
			if !do(t, l, "lock", key, "a", 100*time.Millisecond) {
				t.Fatal("TryLock of a free key failed")
			}
			if !do(t, l, tc.op, key, "a", 10*time.Second) {
				t.Fatalf("%s by the holder failed", tc.op)
			}
		}
		deadline := time.Now().Add(300 * time.Millisecond)
		for time.Now().Before(deadline) {
			for _, tc := range tests {
				if do(t, l, "lock", "k-"+tc.op, "b", time.Minute) {
					t.Fatalf("lock renewed by %s was taken before its new ttl", tc.op)
				}
			}
			// Real time passes: the implementation's leases (Redis's, a
			// file's) are real.
			time.Sleep(20 * time.Millisecond) // behaviour under test
		}
	})

	t.Run("OneWinner", func(t *testing.T) {
		t.Parallel()
		l := newLocker(t)
		for round := range 5 {
			key := fmt.Sprintf("contended-%d", round)
			var wins atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := range 16 {
				wg.Go(func() {
					<-start
					ok, err := l.TryLock(context.Background(), key, fmt.Sprintf("node-%d", g), time.Minute)
					if err != nil {
						t.Errorf("TryLock: %v", err)
					}
					if ok {
						wins.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			if n := wins.Load(); n != 1 {
				t.Fatalf("round %d: %d of 16 concurrent TryLock won, want exactly 1", round, n)
			}
		}
	})
}

// RunElector runs the Elector suite.
func RunElector(t *testing.T, newElectors NewElectors) {
	t.Run("LeaderStays", func(t *testing.T) {
		t.Parallel()
		c := newElectors(t)
		a, b := c(), c()
		steps := []struct {
			e       lock.Elector
			service string
			node    string
			want    string
		}{
			{a, "planner", "node-a", "node-a"},
			{b, "planner", "node-b", "node-a"},
			{a, "planner", "node-a", "node-a"},
			{b, "sweeper", "node-b", "node-b"},
			{a, "sweeper", "node-a", "node-b"},
			{b, "planner", "node-b", "node-a"},
		}
		for i, s := range steps {
			if got := selectLeader(t, s.e, s.service, s.node, time.Minute); got != s.want {
				t.Fatalf("step %d: Select(%q, %q) = %q, want %q", i, s.service, s.node, got, s.want)
			}
		}
	})

	t.Run("OneLeader", func(t *testing.T) {
		t.Parallel()
		c := newElectors(t)
		const n = 16
		electors := make([]lock.Elector, n)
		for i := range electors {
			electors[i] = c()
		}
		leaders := make([]string, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, e := range electors {
			wg.Go(func() {
				<-start
				id, err := e.Select(context.Background(), "planner", fmt.Sprintf("node-%d", i), time.Minute)
				if err != nil {
					t.Errorf("Select: %v", err)
				}
				leaders[i] = id
			})
		}
		close(start)
		wg.Wait()
		for _, id := range leaders {
			if id != leaders[0] || id == "" {
				t.Fatalf("candidates saw different leaders: %q", leaders)
			}
		}
		// Everyone agrees afterwards too, and the leader is one of them.
		for i, e := range electors {
			if got := selectLeader(t, e, "planner", fmt.Sprintf("node-%d", i), time.Minute); got != leaders[0] {
				t.Fatalf("node-%d sees %q after the race, want %q", i, got, leaders[0])
			}
		}
	})

	t.Run("Takeover", func(t *testing.T) {
		t.Parallel()
		c := newElectors(t)
		a, b := c(), c()
		const hold = 300 * time.Millisecond
		// While a renews its term, b never takes over.
		deadline := time.Now().Add(3 * hold)
		for time.Now().Before(deadline) {
			if got := selectLeader(t, a, "planner", "node-a", hold); got != "node-a" {
				t.Fatalf("renewing leader sees %q", got)
			}
			if got := selectLeader(t, b, "planner", "node-b", hold); got != "node-a" {
				t.Fatalf("candidate sees %q while the leader renews", got)
			}
			// A leader that renews every tenth of its hold keeps its term.
			time.Sleep(hold / 10) // behaviour under test: the renewal cadence
		}
		// a stops renewing: b takes over once the term passes.
		stopped := time.Now()
		testenv.Eventually(t, waitFor, "node-b to lead", func() (bool, string) {
			got := selectLeader(t, b, "planner", "node-b", time.Minute)
			return got == "node-b", "leader " + got
		})
		if d := time.Since(stopped); d < hold/2 {
			t.Errorf("took over %v after the last renewal, hold is %v", d, hold)
		}
		if got := selectLeader(t, a, "planner", "node-a", time.Minute); got != "node-b" {
			t.Errorf("former leader sees %q, want node-b", got)
		}
	})

	t.Run("InvalidHold", func(t *testing.T) {
		t.Parallel()
		e := newElectors(t)()
		if _, err := e.Select(context.Background(), "planner", "node-a", 0); err == nil {
			t.Error("Select with hold 0: no error")
		}
	})
}

func do(t *testing.T, l lock.Locker, op, key, token string, ttl time.Duration) bool {
	t.Helper()
	ctx := context.Background()
	var ok bool
	var err error
	switch op {
	case "lock":
		ok, err = l.TryLock(ctx, key, token, ttl)
	case "extend":
		ok, err = l.Extend(ctx, key, token, ttl)
	case "unlock":
		ok, err = l.Unlock(ctx, key, token)
	default:
		t.Fatalf("unknown op %q", op)
	}
	if err != nil {
		t.Fatalf("%s(%q, %q): %v", op, key, token, err)
	}
	return ok
}

func selectLeader(t *testing.T, e lock.Elector, service, node string, hold time.Duration) string {
	t.Helper()
	id, err := e.Select(context.Background(), service, node, hold)
	if err != nil {
		t.Fatalf("Select(%q, %q): %v", service, node, err)
	}
	return id
}
