package engine

import "time"

// DefaultMaxClockSkew is Config.MaxClockSkew's default (and, through
// chime.Config, that of `chime serve --max-clock-skew`): how far this node's
// clock may be off the store's before the node stops claiming.
const DefaultMaxClockSkew = time.Second

// DefaultPlanInterval is Config.PlanInterval's default: the time between
// the planner leader's passes. The leadership is held for three passes, so
// a dead leader's successor plans within four (12 s), and a plan by count
// (Config.PlanAhead, six passes: 18 s) outlasts that.
//
// Every timer planned by count is topped up at each pass, so the interval
// sets how many runs each holds ahead, and with them the slice index's
// size: at 10,000 every-second timers, 5 s passes held about 30 s of runs
// (330,000 index entries), 3 s passes 18 s, for 27–30 MiB less memory and
// no more CPU (docs/performance.md, "Knobs").
const DefaultPlanInterval = 3 * time.Second

// planAheadPasses is Config.PlanAhead's default in pass intervals.
const planAheadPasses = 6

// DefaultPlanAhead is Config.PlanAhead's default with the default pass
// interval.
const DefaultPlanAhead = planAheadPasses * DefaultPlanInterval
