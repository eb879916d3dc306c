// Package lock defines the two coordination primitives chime needs between
// nodes: leased locks on slices, and leader election for singleton duties.
// lock/memlock implements them in process, lock/flocklock with file locks
// for processes sharing one host, and lock/redislock in Redis.
//
// A lock is a hint that spreads work, never the only guard against a double
// run: a node that paused past its lease may still believe it holds a lock.
// The store's claim is the guard.
package lock

import (
	"context"
	"fmt"
	"time"
)

// Locker hands out leased locks. A lock is held by a token (random, chosen
// by the caller, one per node) until its TTL passes or it is released.
// A TTL that is not positive is an error. Once a lock's TTL has passed it
// is free: Extend and Unlock by its former holder report false, even if no
// one else took it.
type Locker interface {
	// TryLock takes key for token for ttl if it is free (or already held by
	// token, which then extends it). It reports whether token holds it now.
	TryLock(ctx context.Context, key, token string, ttl time.Duration) (bool, error)
	// Extend sets a new ttl on key if token holds it.
	Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error)
	// Unlock releases key if token holds it.
	Unlock(ctx context.Context, key, token string) (bool, error)
}

// Handover is implemented by Lockers that tell the next holder of a lock
// how its previous holder let it go. Lazy claims need it
// (docs/guarantees.md, "Lazy claims"): a slice released clean needs no
// fence, and one that cannot have vanished while its holder lived needs no
// wait before the fence.
type Handover interface {
	// TryLockFrom is TryLock that also reports how the lock was let go
	// before this taking (the zero Release when token held it already).
	TryLockFrom(ctx context.Context, key, token string, ttl time.Duration) (bool, Release, error)
	// UnlockNote is Unlock that leaves note, kept for keep, for the next
	// TryLockFrom of key that takes it (Release.Noted), which removes it.
	// Any other taking removes it too.
	UnlockNote(ctx context.Context, key, token, note string, keep time.Duration) (bool, error)
}

// Release is how a lock was let go before a TryLockFrom took it. The zero
// Release says nothing: the lock may have vanished while its holder lived
// and went on believing it held it (Redis restarted, or failed over to a
// replica that had not seen the lock).
type Release struct {
	// Noted: its last holder released it with UnlockNote, and nobody took
	// it since; Note is what it left.
	Noted bool
	Note  string
	// Ended (when not Noted): the lock expired, was released, or was never
	// held, in a Locker where a lock never vanishes while it is held (in
	// memory, in files): whoever held it stopped holding it before this
	// taking.
	Ended bool
}

func (r Release) String() string {
	switch {
	case r.Noted:
		return fmt.Sprintf("noted %q", r.Note)
	case r.Ended:
		return "ended"
	}
	return "unknown"
}

// Elector elects one leader per service. Select is called periodically by
// every candidate: the first caller when no leader holds the service becomes
// leader for hold; the leader's own calls extend its term; every caller
// learns the current leader's id. A hold that is not positive, or an empty
// nodeID, is an error. How precisely a term ends after hold depends on the
// implementation (lock/flocklock documents its caveats).
type Elector interface {
	Select(ctx context.Context, service, nodeID string, hold time.Duration) (leaderID string, err error)
}
