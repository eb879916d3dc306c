package planner

import "time"

// DefaultLookahead is Config.Lookahead's default (and, through
// chime.Config, that of `chime serve --lookahead`): how far ahead runs are
// materialised.
const DefaultLookahead = 10 * time.Minute
