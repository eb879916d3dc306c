package trigger

import "time"

// DefaultClaimAhead is Config.ClaimAhead's default (and that of
// `chime bench --claim-ahead`): how long before its instant a run is
// claimed.
const DefaultClaimAhead = 500 * time.Millisecond

// RetryClaim is how long the entries of a claim that failed wait before
// they are queued again.
const RetryClaim = 100 * time.Millisecond
