package scheduler

import "time"

// DefaultLockTTL is Config.LockTTL's default (and, through chime.Config,
// that of `chime serve --lock-ttl`): the lease of a slice lock, which bounds
// failover after a crash.
const DefaultLockTTL = 1500 * time.Millisecond
