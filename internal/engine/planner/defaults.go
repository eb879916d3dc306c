package planner

import "time"

// DefaultLookahead is Config.Lookahead's default (and, through
// chime.Config, that of `chime serve --lookahead`): how far ahead runs are
// materialised.
const DefaultLookahead = 10 * time.Minute

// DefaultFiresAhead and DefaultMinAhead are Config.FiresAhead's and
// Config.MinAhead's defaults: a timer is planned for at least its next 10
// fires or its next 30 seconds, whichever is later, up to the look-ahead.
const (
	DefaultFiresAhead = 10
	DefaultMinAhead   = 30 * time.Second
)
