// Package retention bounds the history a store keeps: it deletes each
// timer's finished runs (succeeded, failed, skipped, cancelled) beyond its
// history limits (model.History: at most Keep of them, none scheduled more
// than MaxAge ago; a timer that sets none takes the node's defaults,
// `chime serve --history-keep` and `--history-max-age`) and the audit
// entries older than the default max age. Pending and running runs are
// never deleted.
//
// A Retainer makes passes; a Loop runs them on one node of the cluster,
// the leader of the "retention" service. Each delete is one statement of at
// most store.MaxPruneBatch rows (Config.Batch), followed by a pause
// (Config.Pause), so that claims and results never wait long behind
// retention: on SQLite, whose one writer they share, the store also lets
// those waiting go first before each statement. A pass visits every timer
// in id order and, cut short by its deadline, resumes where it stopped at
// the next pass.
//
// Caveats: retention deletes nothing scheduled within the last Recent,
// whatever the limits say (so a run that fired in the last minute is not
// planned again on a node whose clock lags); limits hold after a pass, not
// at every instant; and the age of a run is that of its scheduled instant,
// not of its end.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
)

// Defaults of Config, and of the flags of `chime serve` that set them.
const (
	// DefaultKeep is the most finished runs kept per timer that sets no
	// history.keep.
	DefaultKeep = 1000
	// DefaultMaxAge is how long a finished run of a timer that sets no
	// history.max_age, and an audit entry, are kept.
	DefaultMaxAge = 720 * time.Hour
	// DefaultInterval is the time between passes.
	DefaultInterval = time.Minute
	// DefaultPause is the pause after each delete statement.
	DefaultPause = 10 * time.Millisecond
)

// Recent is how far back from now retention never deletes a run.
const Recent = time.Minute

// Store is what a Retainer needs of the store: the history settings of
// the timers and the deletes (store.Store implements it).
type Store interface {
	TimerHistories(ctx context.Context, after string, limit int) ([]store.TimerHistory, error)
	PruneRuns(ctx context.Context, p store.RunPrune) (int, error)
	PruneAudit(ctx context.Context, before time.Time, limit int) (int, error)
}

// Config configures a Retainer.
type Config struct {
	Store Store
	// Keep is the default of history.keep: 0 means DefaultKeep, a negative
	// value no count limit.
	Keep int
	// MaxAge is the default of history.max_age and the age of the audit
	// entries deleted: 0 means DefaultMaxAge, a negative value no age
	// limit.
	MaxAge time.Duration
	// Batch is the most rows one statement deletes (default and at most
	// store.MaxPruneBatch).
	Batch int
	// Pause is the least wait between two full batches of one timer (or
	// of the audit log): default DefaultPause, negative none. Besides, after
	// each statement that deleted rows, a pass waits as long as the
	// statement took. Waits run on Local.
	Pause time.Duration
	// Clock tells the cluster's time, which ages are judged by (default
	// clock.System(0)).
	Clock clock.Clock
	// Local runs the pauses (default clock.System(0)): a test that drives
	// Clock by hand need not drive the pauses.
	Local   clock.Clock
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Retainer deletes old history in passes. Its methods are not safe for
// concurrent use: one Loop calls them.
type Retainer struct {
	cfg Config
	// after is where the next pass resumes: the last timer a pass cut
	// short handled ("" from the start).
	after string
}

// New returns a Retainer for cfg.
func New(cfg Config) *Retainer {
	if cfg.Keep == 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.Batch <= 0 || cfg.Batch > store.MaxPruneBatch {
		cfg.Batch = store.MaxPruneBatch
	}
	if cfg.Pause == 0 {
		cfg.Pause = DefaultPause
	}
	cfg.Clock = clock.Default(cfg.Clock)
	cfg.Local = clock.Default(cfg.Local)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Retainer{cfg: cfg}
}

// Result counts what a pass deleted.
type Result struct {
	Runs  int
	Audit int
	// Timers is how many timers the pass visited.
	Timers int
}

// Pass makes one pass: the old audit entries, then every timer's finished
// runs beyond its limits, from where the previous pass stopped. It returns
// what it deleted and the first error, which ends the pass (the next one
// resumes after the last timer done).
func (r *Retainer) Pass(ctx context.Context) (Result, error) {
	var res Result
	now := r.cfg.Clock.Now()
	if r.cfg.MaxAge > 0 {
		n, err := r.drain(ctx, func() (int, error) { return r.cfg.Store.PruneAudit(ctx, now.Add(-r.cfg.MaxAge), r.cfg.Batch) })
		res.Audit = n
		if err != nil {
			return res, fmt.Errorf("retention: audit: %w", err)
		}
	}
	for {
		page, err := r.cfg.Store.TimerHistories(ctx, r.after, 1000)
		if err != nil {
			return res, fmt.Errorf("retention: %w", err)
		}
		for _, th := range page {
			n, err := r.timer(ctx, th, now)
			res.Runs += n
			if err != nil {
				return res, err
			}
			res.Timers++
			r.after = th.ID
		}
		if len(page) < 1000 {
			r.after = ""
			return res, nil
		}
	}
}

// timer deletes the finished runs of one timer beyond its limits.
func (r *Retainer) timer(ctx context.Context, th store.TimerHistory, now time.Time) (int, error) {
	keep, maxAge := th.History.Limits(r.cfg.Keep, r.cfg.MaxAge)
	if keep == 0 && maxAge == 0 {
		return 0, nil
	}
	p := store.RunPrune{TimerID: th.ID, Keep: keep, Recent: now.Add(-Recent), Limit: r.cfg.Batch}
	if maxAge > 0 {
		p.Before = now.Add(-maxAge)
	}
	n, err := r.drain(ctx, func() (int, error) { return r.cfg.Store.PruneRuns(ctx, p) })
	if r.cfg.Metrics != nil && n > 0 {
		r.cfg.Metrics.RunsDeleted.Add(float64(n))
	}
	if err != nil {
		return n, fmt.Errorf("retention: timer %s: %w", th.ID, err)
	}
	return n, nil
}

// drain calls del until it deletes less than a batch and returns the rows
// deleted. After each call that deleted rows it waits as long as the call
// took, so that retention holds the writer at most half the time, and at
// least Pause between full batches.
func (r *Retainer) drain(ctx context.Context, del func() (int, error)) (int, error) {
	total := 0
	for {
		start := r.cfg.Local.Now()
		n, err := del()
		total += n
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, nil
		}
		wait := r.cfg.Local.Now().Sub(start)
		if n >= r.cfg.Batch {
			wait = max(wait, r.cfg.Pause)
		}
		if err := clock.Sleep(ctx, r.cfg.Local, wait); err != nil {
			return total, err
		}
		if n < r.cfg.Batch {
			return total, nil
		}
	}
}
