package executor

import "time"

// Defaults of Config (and, through chime.Config, of the flags of
// `chime serve`): the comments and flag help that name them print these.
const (
	// DefaultPoolSize is Config.PoolSize's default: actions running at once.
	DefaultPoolSize = 10000
	// DefaultLease is Config.Lease's default: the lease of a running
	// attempt, extended while it runs.
	DefaultLease = 10 * time.Second
	// DefaultClaimLease is Config.ClaimLease's default: how long after its
	// instant a claimed run that has not started stays this node's.
	DefaultClaimLease = time.Second
)
