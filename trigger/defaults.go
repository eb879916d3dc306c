package trigger

import "time"

// DefaultClaimAhead is Config.ClaimAhead's default (and that of
// `chime bench --claim-ahead`): how long before its instant a run is
// claimed.
const DefaultClaimAhead = 500 * time.Millisecond
