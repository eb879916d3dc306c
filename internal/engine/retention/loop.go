package retention

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop"
	"github.com/chimehq/chime/internal/coord/lock"
)

// LeaderService is the name of the retention's leadership: one node of a
// cluster makes the passes. It is a service of its own, not the
// planner's, so that its term (three of its intervals) does not lengthen
// the planner's failover.
const LeaderService = "retention"

// LoopConfig configures a Loop.
type LoopConfig struct {
	// Elector chooses the one node that makes the passes; NodeID is this
	// node's.
	Elector lock.Elector
	NodeID  string
	// Interval is the time between passes (default DefaultInterval); the
	// leadership is held for three of them.
	Interval time.Duration
	// Standby, when set and true, skips the passes (this node's clock is
	// too far off the store's to judge ages).
	Standby func() bool
	// Clock runs the loop's ticker (default clock.System(0)).
	Clock  clock.Clock
	Logger *slog.Logger
}

// Loop runs a Retainer's passes as a service, one every Interval on the
// leader of LeaderService. Its first pass comes one Interval after Start:
// a node that starts has more urgent work than old history.
type Loop struct {
	r    *Retainer
	cfg  LoopConfig
	loop startstop.Loop
}

// NewLoop returns the loop of r; call Start.
func NewLoop(r *Retainer, cfg LoopConfig) *Loop {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Loop{r: r, cfg: cfg}
	l.loop = startstop.Loop{Name: "retention loop", Interval: cfg.Interval, Clock: cfg.Clock, Pass: l.pass}
	return l
}

// pass deletes old history if this node leads the retention.
func (l *Loop) pass(ctx context.Context) {
	if l.cfg.Standby != nil && l.cfg.Standby() {
		return
	}
	leader, err := l.cfg.Elector.Select(ctx, LeaderService, l.cfg.NodeID, 3*l.cfg.Interval)
	if err != nil {
		l.cfg.Logger.Warn("leader election", "service", LeaderService, "err", err)
		return
	}
	if leader != l.cfg.NodeID {
		return
	}
	res, err := l.r.Pass(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A backlog (a first pass over a long history): the next pass
		// resumes where this one stopped.
		l.cfg.Logger.Info("retention pass cut short by its deadline; the next resumes", "runs_deleted", res.Runs,
			"audit_deleted", res.Audit, "timers", res.Timers)
		return
	}
	if err != nil {
		l.cfg.Logger.Warn("retention pass", "err", err, "runs_deleted", res.Runs, "audit_deleted", res.Audit)
		return
	}
	if res.Runs > 0 || res.Audit > 0 {
		l.cfg.Logger.Info("retention pass", "runs_deleted", res.Runs, "audit_deleted", res.Audit, "timers", res.Timers)
	}
}

// Start starts the loop. It is safe to call twice; a stopped loop does not
// start again (startstop.ErrStopped).
func (l *Loop) Start(ctx context.Context) error { return l.loop.Start(ctx) }

// Stop stops the loop and waits for the pass in progress. It is safe to
// call twice, and without Start.
func (l *Loop) Stop(ctx context.Context) error { return l.loop.Stop(ctx) }
