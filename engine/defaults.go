package engine

import "time"

// DefaultMaxClockSkew is Config.MaxClockSkew's default (and, through
// chime.Config, that of `chime serve --max-clock-skew`): how far this node's
// clock may be off the store's before the node stops claiming.
const DefaultMaxClockSkew = time.Second
