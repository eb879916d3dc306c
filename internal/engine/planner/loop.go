package planner

import (
	"context"
	"log/slog"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop"
	"github.com/chimehq/chime/internal/coord/lock"
)

// LoopConfig configures a Loop.
type LoopConfig struct {
	// Elector chooses the one node that plans; NodeID is this node's.
	Elector lock.Elector
	NodeID  string
	// Interval is the time between planning passes (default 15s); the
	// leadership is held for three of them.
	Interval time.Duration
	// Clock runs the loop's ticker (default clock.System(0)).
	Clock  clock.Clock
	Logger *slog.Logger
}

// Loop runs a Planner's passes as a service: one when it starts, so that
// runs missed while the node was down are planned at once, then one every
// Interval, each on the node that the Elector chooses (the "planner"
// service's leader) only.
type Loop struct {
	p    *Planner
	cfg  LoopConfig
	loop startstop.Loop
}

// LeaderService is the name of the planner's leadership.
const LeaderService = "planner"

// NewLoop returns the loop of p; call Start.
func NewLoop(p *Planner, cfg LoopConfig) *Loop {
	if cfg.Interval <= 0 {
		cfg.Interval = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Loop{p: p, cfg: cfg}
	l.loop = startstop.Loop{Name: "planner loop", Interval: cfg.Interval, Clock: cfg.Clock,
		First: func(ctx context.Context) error { l.pass(ctx); return nil }, Pass: l.pass}
	return l
}

// pass plans due timers if this node leads the planner.
func (l *Loop) pass(ctx context.Context) {
	leader, err := l.cfg.Elector.Select(ctx, LeaderService, l.cfg.NodeID, 3*l.cfg.Interval)
	if err != nil {
		l.cfg.Logger.Warn("leader election", "service", LeaderService, "err", err)
		return
	}
	if leader != l.cfg.NodeID {
		return
	}
	if _, err := l.p.PlanDue(ctx); err != nil {
		l.cfg.Logger.Warn(LeaderService+" pass", "err", err)
	}
}

// Start runs the first pass and starts the loop. It is safe to call
// twice; a stopped loop does not start again (startstop.ErrStopped).
func (l *Loop) Start(ctx context.Context) error { return l.loop.Start(ctx) }

// Stop stops the loop and waits for the pass in progress. It is safe to
// call twice, and without Start.
func (l *Loop) Stop(ctx context.Context) error { return l.loop.Stop(ctx) }
