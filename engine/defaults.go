package engine

import "time"

// DefaultMaxClockSkew is Config.MaxClockSkew's default (and, through
// chime.Config, that of `chime serve --max-clock-skew`): how far this node's
// clock may be off the store's before the node stops claiming.
const DefaultMaxClockSkew = time.Second

// DefaultPlanInterval is Config.PlanInterval's default: the time between
// the planner leader's passes. The leadership is held for three passes, so
// a dead leader's successor plans within four (20 s), and a plan by count
// (Config.PlanAhead, six passes) outlasts that.
const DefaultPlanInterval = 5 * time.Second

// planAheadPasses is Config.PlanAhead's default in pass intervals.
const planAheadPasses = 6

// DefaultPlanAhead is Config.PlanAhead's default with the default pass
// interval.
const DefaultPlanAhead = planAheadPasses * DefaultPlanInterval
