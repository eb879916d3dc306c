// Package lock defines the two coordination primitives chime needs between
// nodes: leased locks on slices, and leader election for singleton duties.
// internal/coord/lock/memlock implements them in process, internal/coord/lock/flocklock with file locks
// for processes sharing one host, and internal/coord/lock/redislock in Redis.
//
// A lock is a hint that spreads work, never the only guard against a double
// run: a node that paused past its lease may still believe it holds a lock.
// The store's claim is the guard.
package lock

import (
	"context"
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

// Elector elects one leader per service. Select is called periodically by
// every candidate: the first caller when no leader holds the service becomes
// leader for hold; the leader's own calls extend its term; every caller
// learns the current leader's id. A hold that is not positive, or an empty
// nodeID, is an error. How precisely a term ends after hold depends on the
// implementation (internal/coord/lock/flocklock documents its caveats).
type Elector interface {
	Select(ctx context.Context, service, nodeID string, hold time.Duration) (leaderID string, err error)
}
