// Package sweeper finds runs that the normal path will not dispatch and
// brings them back:
//
//   - runs whose lease expired (their node died or paused while running
//     them) go back to pending, due now, and are attempted again with the
//     same run id. An attempt lost this way does not count against the
//     timer's max_attempts, up to LeaseRecoveries extra attempts (so that an
//     action that kills its node every time cannot loop forever); past
//     that the run ends failed;
//   - pending runs due before the previous minute, which no trigger will
//     read any more (the whole cluster was down, or a slice was lost), are
//     made due now, in the current minute's slice, and fire once, late. Their
//     ScheduledAt is kept, so the lateness shows in the run.
//
// Every change is a conditional update in the store, so the sweeper runs on
// every node at once without harm: recovery never waits for a leader (which
// may be the node that paused).
package sweeper

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/metrics"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// LeaseRecoveries is how many attempts lost with their node a run may make
// beyond its timer's max_attempts.
const LeaseRecoveries = 2

// Config configures a Sweeper.
type Config struct {
	Store store.Store
	Index index.Index
	// Notify is told about runs made due again (the local trigger).
	Notify  func(entries []index.Entry)
	Batch   int // default 1000
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// Sweeper recovers lost runs; call Sweep periodically.
type Sweeper struct{ cfg Config }

// New returns a Sweeper.
func New(cfg Config) *Sweeper {
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Sweeper{cfg: cfg}
}

// Sweep runs one pass and returns how many runs it recovered.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	now := s.cfg.Now()
	var entries []index.Entry
	n := 0

	expired, err := s.cfg.Store.ExpiredLeases(ctx, now, s.cfg.Batch)
	if err != nil {
		return 0, fmt.Errorf("sweep: expired leases: %w", err)
	}
	for _, r := range expired {
		t, err := s.cfg.Store.GetTimer(ctx, r.TimerID)
		maxAttempts := 1
		if err == nil {
			maxAttempts = t.Retry.MaxAttempts
		}
		if r.Attempt < maxAttempts+LeaseRecoveries {
			// A run claimed ahead of its instant keeps its instant.
			due := now
			if r.ScheduledAt.After(now) {
				due = r.ScheduledAt
			}
			if err := s.cfg.Store.Requeue(ctx, r, due, now); err != nil {
				continue // someone else recovered it, or the node came back
			}
			entries = append(entries, index.Entry{RunID: r.ID, TimerID: r.TimerID, DueAt: due})
		} else {
			res := model.Result{RunID: r.ID, Node: r.Node, Attempt: r.Attempt, Status: model.RunFailed,
				FinishedAt: now, Error: fmt.Sprintf("lease expired on node %s (node died or paused)", r.Node)}
			if r.StartedAt != nil {
				res.StartedAt = *r.StartedAt
			}
			if err := s.cfg.Store.FinishRun(ctx, res); err != nil {
				continue
			}
		}
		n++
		s.count("lease_expired")
	}

	// Anything due before the previous minute is beyond the triggers.
	cutoff := time.Unix((now.Unix()/60-1)*60, 0)
	overdue, err := s.cfg.Store.PendingRuns(ctx, time.Unix(0, 0), cutoff, s.cfg.Batch)
	if err != nil {
		return n, fmt.Errorf("sweep: overdue runs: %w", err)
	}
	for _, r := range overdue {
		if err := s.cfg.Store.RescheduleRun(ctx, r.ID, now); err != nil {
			continue
		}
		entries = append(entries, index.Entry{RunID: r.ID, TimerID: r.TimerID, DueAt: now})
		n++
		s.count("misfire")
	}
	if len(entries) > 0 {
		if err := s.cfg.Index.Add(ctx, entries...); err != nil {
			s.cfg.Logger.Warn("sweep: index add", "runs", len(entries), "err", err)
		}
		if s.cfg.Notify != nil {
			s.cfg.Notify(entries)
		}
		s.cfg.Logger.Info("sweep recovered runs", "runs", n)
	}
	return n, nil
}

func (s *Sweeper) count(kind string) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Recovered.WithLabelValues(kind).Inc()
	}
}
