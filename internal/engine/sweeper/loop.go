package sweeper

import (
	"context"
	"log/slog"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop"
)

// LoopConfig configures a Loop.
type LoopConfig struct {
	// Overdue is the interval of overdue passes (default 2s).
	Overdue time.Duration
	// Leases is the interval of lease passes (default 250ms): often, since
	// it bounds how long a dead node's claims wait (claim lease + two
	// passes).
	Leases time.Duration
	// Placed is the interval of placed-run passes (default 500ms): how
	// long, besides the node list's quiet time, the runs placed on a node
	// that stopped heartbeating or stands by wait to be freed
	// (Sweeper.SweepPlaced). A pass reads the store only while such a
	// node is listed.
	Placed time.Duration
	// Standby, when set and true, skips the passes (the node's clock is
	// too far off the store's to judge leases and instants).
	Standby func() bool
	// Clock runs the loops' tickers (default clock.System(0)).
	Clock  clock.Clock
	Logger *slog.Logger
}

// Loop runs a Sweeper's passes as a service: one overdue pass when it
// starts, so that runs missed while the node was down are recovered at
// once, then overdue, lease and placed-run passes every interval. Every node sweeps:
// its updates are all conditional, so nodes racing on one run are
// harmless, and recovery does not wait for a leader that may be the very
// node that paused.
type Loop struct {
	sw      *Sweeper
	cfg     LoopConfig
	overdue startstop.Loop
	leases  startstop.Loop
	placed  startstop.Loop
}

// NewLoop returns the loop of sw; call Start.
func NewLoop(sw *Sweeper, cfg LoopConfig) *Loop {
	if cfg.Overdue <= 0 {
		cfg.Overdue = 2 * time.Second
	}
	if cfg.Leases <= 0 {
		cfg.Leases = 250 * time.Millisecond
	}
	if cfg.Placed <= 0 {
		cfg.Placed = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Loop{sw: sw, cfg: cfg}
	l.overdue = startstop.Loop{Name: "sweeper overdue loop", Interval: cfg.Overdue, Clock: cfg.Clock,
		First: func(ctx context.Context) error { l.overduePass(ctx); return nil }, Pass: l.overduePass}
	l.leases = startstop.Loop{Name: "sweeper lease loop", Interval: cfg.Leases, Clock: cfg.Clock, Pass: l.leasePass}
	l.placed = startstop.Loop{Name: "sweeper placed-run loop", Interval: cfg.Placed, Clock: cfg.Clock, Pass: l.placedPass}
	return l
}

func (l *Loop) placedPass(ctx context.Context) {
	if l.standby() {
		return
	}
	l.sw.SweepPlaced(ctx)
}

func (l *Loop) standby() bool { return l.cfg.Standby != nil && l.cfg.Standby() }

func (l *Loop) overduePass(ctx context.Context) {
	if l.standby() {
		return
	}
	if _, err := l.sw.SweepOverdue(ctx); err != nil {
		l.cfg.Logger.Warn("sweeper pass", "err", err)
	}
}

func (l *Loop) leasePass(ctx context.Context) {
	if l.standby() {
		return
	}
	if _, err := l.sw.SweepLeases(ctx); err != nil {
		l.cfg.Logger.Warn("sweeper pass", "err", err)
	}
}

// Start runs the first overdue pass and starts the three loops. It is safe to
// call twice.
func (l *Loop) Start(ctx context.Context) error {
	return startstop.StartAll(ctx, context.WithoutCancel(ctx), &l.overdue, &l.leases, &l.placed)
}

// Stop stops the loops and waits for their passes in progress. It is
// safe to call twice, and without Start.
func (l *Loop) Stop(ctx context.Context) error {
	return startstop.StopAll(ctx, &l.placed, &l.leases, &l.overdue)
}
