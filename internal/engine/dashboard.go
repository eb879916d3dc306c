package engine

import (
	"context"
	"time"
)

// StatsInterval is how often a node writes its dashboard minutes (the
// minutes of its metrics.Series that changed since its last write) to the
// store: one upsert a minute, so that GET /api/v1/stats/series on any node
// shows the cluster's counts, the other nodes' up to this much behind.
const StatsInterval = time.Minute

// StatsKeep is how long the store keeps the dashboard's minutes: the
// charts show one hour; the rest is a margin for nodes' clocks. Each node
// deletes the older ones every StatsPruneEvery writes.
const StatsKeep = 2 * time.Hour

// StatsPruneEvery: a node deletes minutes older than StatsKeep at every
// StatsPruneEvery-th write.
const StatsPruneEvery = 10

// statsWriter writes the node's dashboard minutes (see StatsInterval);
// without metrics it writes nothing. The engine's stats loop runs its pass,
// and Stop its flush.
type statsWriter struct {
	e      *Engine
	last   time.Time // of the last write; before the first, when the engine was made
	passes int
}

// newStatsWriter returns the stats writer of e, made now.
func newStatsWriter(e *Engine) *statsWriter { return &statsWriter{e: e, last: e.clock.Now()} }

// pass writes the minutes that changed since the last write, and every
// StatsPruneEvery passes deletes those older than StatsKeep.
func (w *statsWriter) pass(ctx context.Context) {
	m := w.e.cfg.Metrics
	if m == nil || m.Series == nil {
		return
	}
	now := w.e.clock.Now()
	// From the minute of the last write, or of the engine's making: a
	// first write only at Stop (an engine that ran less than a minute)
	// keeps the minutes before the one it stops in.
	rows := m.Series.Minutes(w.e.cfg.NodeID, w.last, now)
	if err := w.e.cfg.Store.PutStatsMinutes(ctx, rows); err != nil {
		w.e.cfg.Logger.Warn("dashboard: write minutes", "minutes", len(rows), "err", err)
		return // the next pass writes them, from the same last write
	}
	w.last = now
	if w.passes++; w.passes%StatsPruneEvery == 1 {
		if _, err := w.e.cfg.Store.PruneStatsMinutes(ctx, now.Add(-StatsKeep)); err != nil {
			w.e.cfg.Logger.Warn("dashboard: delete old minutes", "err", err)
		}
	}
}

// flush writes the minutes of the last pass's write on, once more, at
// Stop, so that the minutes a node counted before it stopped are kept.
func (w *statsWriter) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.pass(ctx)
}
