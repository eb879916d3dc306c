package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/chimehq/chime/internal/base/startstop"
	"github.com/chimehq/chime/model"
)

// ErrStopped is returned by Start once the engine was stopped: a stopped
// engine has released its pool and its slices and cannot start again;
// build a new one with New.
var ErrStopped = startstop.ErrStopped

// Start starts the parts, in order: membership (the clock is measured
// against the store's, the first heartbeat written, and the runs of this
// node id's previous process given back), executor, trigger, scheduler,
// the planner loop, the sweeper loop, the retention loop and the stats loop
// (the dashboard's minutes). The first planning and sweeping
// passes run before it returns, so that runs missed while the node was
// down are recovered at once.
//
// An error of a part is returned (wrapped) and the parts already started
// are stopped again. If the first part failed (the store did not answer
// the clock measurement) the engine may be started again; otherwise, and
// after Stop, Start returns ErrStopped. Start on a running engine does
// nothing. Cancelling ctx after Start returned stops nothing: call Stop.
func (e *Engine) Start(ctx context.Context) error {
	err := e.life.Start(ctx, "engine", func(context.Context) error {
		// The parts get ctx itself: it bounds their start (the clock
		// measurement), and each keeps running until Stop.
		return startstop.StartAll(ctx, context.Background(), e.parts()...)
	})
	if err != nil {
		return err
	}
	e.cfg.Logger.Info("engine started", "node", e.cfg.NodeID, "buckets", e.cfg.Index.Buckets())
	return nil
}

// parts returns the parts in start order.
func (e *Engine) parts() []startstop.Service {
	return []startstop.Service{e.members, e.exec, e.trig, e.sched, e.planLoop, e.sweepLoop, e.retainLoop, e.statsLoop, e.notifier}
}

// Stop stops the node. The loops stop first (notifier, retention, sweeper, planner,
// heartbeat), then the trigger, so that nothing is dispatched once its
// slice is released; then the scheduler releases this node's slices, so
// that other nodes take them at once; then the executor lets in-flight
// actions finish until ctx is done and records their results; last the
// node leaves the node list. It does not close the store. It is safe to
// call twice, and without Start or after a failed Start (it still releases
// the executor's pool, which New made); the executor's error is returned.
func (e *Engine) Stop(ctx context.Context) error {
	ran := false
	err := e.life.Stop(ctx, func(ctx context.Context) error {
		ran = true
		err := startstop.StopAll(ctx, e.notifier, e.statsLoop, e.retainLoop, e.sweepLoop, e.planLoop, e.members, e.trig, e.sched, e.exec)
		e.stats.flush() // the results the executor just recorded are counted too
		e.members.leave()
		e.cfg.Logger.Info("engine stopped", "node", e.cfg.NodeID)
		return err
	})
	if err == nil && !ran {
		// Never started, or its start failed: the executor's pool, made by
		// New, is released all the same.
		err = e.exec.Stop(ctx)
	}
	return err
}

// Shutdown is Stop, under the name the Go library and the CLI use.
func (e *Engine) Shutdown(ctx context.Context) error { return e.Stop(ctx) }

// Ready reports whether the engine runs and its store answers: an error
// wrapping model.ErrNotStarted or model.ErrClockSkew, or the store's.
func (e *Engine) Ready(ctx context.Context) error {
	if !e.life.Running() {
		return model.ErrNotStarted
	}
	if why := e.members.skew.Load(); why != nil {
		return fmt.Errorf("%w: %s", ErrClockSkew, strings.TrimPrefix(*why, ErrClockSkew.Error()+": "))
	}
	return e.cfg.Store.Ping(ctx)
}
