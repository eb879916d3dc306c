// Package sweeper finds runs that the normal path will not dispatch and
// brings them back:
//
//   - runs whose lease expired (their node died or paused while holding
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
// A lease is taken from its holder only once the sweeper has seen it
// expired, unchanged, in two passes at least MinGap apart: the store
// answered in between, so a live holder had the time to extend it. A store
// that stalls or restarts makes every lease look expired by its clock when
// it comes back; the second look is what keeps the sweeper from taking runs
// from holders that are alive and were only waiting for the store too. The
// requeue itself is fenced on the lease it saw (Store.Requeue).
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

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// DefaultMinGap is the default of Config.MinGap.
const DefaultMinGap = 500 * time.Millisecond

// ResumeGrace is how long after a lease pass found the store away (its
// read failed, or took longer than MinGap) no lease is recovered: every
// lease ran out while the store was away, holders included, and a holder
// whose attempt completed meanwhile writes its result once the store
// answers again, after its own retry's wait (up to a second). Recovered
// first, the run would be delivered again, and the completed delivery not
// recorded (seen in a chaos run on PostgreSQL: a 10 s stall, the result
// written 0.2 s after the sweeper's recovery).
const ResumeGrace = 2 * time.Second

// LeaseRecoveries is how many attempts lost with their node a run may make
// besides those that failed (which its timer's max_attempts bounds): enough for a long action to outlive a
// few faults in a row (a pause, then a kill of the node that took it
// over), few enough that an action that kills its node every time stops.
const LeaseRecoveries = 4

// Store is what a Sweeper needs of the store: the expired leases and the
// runs left behind, and the writes that make them due again or end them
// (store.Store implements it).
type Store interface {
	ExpiredLeases(ctx context.Context, since time.Time, now time.Time, limit int) ([]*model.Run, error)
	Requeue(ctx context.Context, r *model.Run, dueAt time.Time, now time.Time) error
	RunningOn(ctx context.Context, node string, limit int) ([]*model.Run, error)
	SetRunStatus(ctx context.Context, runID string, from model.RunStatus, to model.RunStatus, reason string) (made []*model.Run, err error)
	RescheduleRun(ctx context.Context, runID string, dueAt time.Time) error
	PendingRuns(ctx context.Context, from time.Time, to time.Time, limit int) ([]*model.Run, error)
	UntargetRuns(ctx context.Context, live []string, limit int) ([]*model.Run, error)
	FinishFires(ctx context.Context, now time.Time, limit int) (done []string, made []*model.Run, err error)
}

// Config configures a Sweeper.
type Config struct {
	Store Store
	Index index.Index
	// Notify is told about runs made due again (the local trigger).
	Notify func(entries []index.Entry)
	Batch  int // default 1000
	// LiveNodes returns the ids of the live nodes that claim, and whether
	// a node of the node list was left out (it stands by, or its
	// heartbeat stopped): the runs placed on another node (store.Fleet)
	// are anybody's again once it is not live. Nil, or a nil answer (the
	// node list is not known yet): placed runs are left alone.
	LiveNodes func() (live []string, left bool)
	// MinGap is how long apart the two passes that see a lease expired
	// must be (default DefaultMinGap): more than the holders' lease check
	// interval plus a store round trip. Holders count on it
	// (executor.Config.Grace): it must not be shorter than their Grace.
	MinGap time.Duration
	// Clock is the cluster's clock (the store's, or this node's corrected
	// by its measured offset); Local this process's, for the gap between
	// passes. Both default to clock.System(0).
	Clock   clock.Clock
	Local   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// Sweeper recovers lost runs; call SweepLeases, SweepOverdue and
// SweepPlaced periodically (Loop runs them). The lease passes of one Sweeper must not run concurrently.
type Sweeper struct {
	cfg Config
	// seen holds the expired leases of the last pass, with the lease end
	// seen and when the pass's answer came.
	seen map[store.Lease]sighting
	// floor is where the next lease pass reads from (ExpiredLeases'
	// since): every lease that ended before it was read by an earlier
	// pass and recovered. full is when the last pass without it began
	// (Local).
	floor time.Time
	full  time.Time
	// away is when a lease pass last found the store away: its read
	// failed, or took longer than MinGap (Local).
	away time.Time
}

// FloorMargin is how far before the previous pass's instant a lease pass
// reads the expired leases: enough for leases written by holders whose
// clocks are behind this one's (holders and sweepers read the cluster's
// clock, the store's corrected by each node's measured offset, so they
// agree to well under a second) and for a pass that started late. Every
// lease end the database still indexes from the last FloorMargin is read
// by each pass, the dead ones of finished runs and old extensions
// included, so the margin is short. FullEvery is how often a pass reads
// every expired lease, whatever the floor: a safety net for a clock that
// jumped.
const (
	FloorMargin = 15 * time.Second
	FullEvery   = 5 * time.Minute
)

type sighting struct {
	leaseUntil time.Time
	at         time.Time // Local
}

// New returns a Sweeper.
func New(cfg Config) *Sweeper {
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.MinGap <= 0 {
		cfg.MinGap = DefaultMinGap
	}
	cfg.Clock = clock.Default(cfg.Clock)
	cfg.Local = clock.Default(cfg.Local)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Sweeper{cfg: cfg, seen: map[store.Lease]sighting{}}
}

// SweepLeases requeues the runs whose lease it saw expired, unchanged, in
// the previous pass too, at least MinGap before this one began, and not
// within ResumeGrace after a pass found the store away; and it ends the
// fires whose shards have all ended (store.FinishFires).
func (s *Sweeper) SweepLeases(ctx context.Context) (int, error) {
	// A fire's end makes the runs of the timers after its own: indexed at
	// once.
	_, made, err := s.cfg.Store.FinishFires(ctx, s.cfg.Clock.Now(), s.cfg.Batch)
	if err != nil {
		s.cfg.Logger.Warn("sweep: finish fires", "err", err)
	}
	if len(made) > 0 {
		entries := make([]index.Entry, len(made))
		for i, r := range made {
			entries[i] = index.EntryOf(r)
		}
		s.notify(ctx, entries, 0)
	}
	began := s.cfg.Local.Now()
	now := s.cfg.Clock.Now()
	since := s.floor
	full := s.full.IsZero() || began.Sub(s.full) >= FullEvery
	if full {
		since = time.Time{}
	}
	expired, err := s.cfg.Store.ExpiredLeases(ctx, since, now, s.cfg.Batch)
	answered := s.cfg.Local.Now()
	if err != nil {
		s.away = answered
		return 0, fmt.Errorf("sweep: expired leases: %w", err)
	}
	if answered.Sub(began) > s.cfg.MinGap {
		s.away = answered
	}
	if full {
		s.full = began
	}
	resumed := began.Sub(s.away) >= ResumeGrace
	// The next pass reads from FloorMargin before now, or from the
	// earliest lease this one read and did not recover, whichever comes
	// first; when this pass stopped at its limit, from where it read.
	next, complete := now.Add(-FloorMargin), len(expired) < s.cfg.Batch
	keep := func(r *model.Run) {
		if r.LeaseUntil.Before(next) {
			next = *r.LeaseUntil
		}
	}
	defer func() {
		if complete {
			s.floor = next
		}
	}()
	prev := s.seen
	s.seen = make(map[store.Lease]sighting, len(expired))
	var entries []index.Entry
	// A run failed at its last attempt makes the runs of the timers after
	// its own (model.Timer.After): indexed with the requeued ones (recover
	// returns their entries too).
	n := 0
	for _, r := range expired {
		l := store.Lease{RunID: r.ID, Attempt: r.Attempt}
		p, ok := prev[l]
		if !ok || !p.leaseUntil.Equal(*r.LeaseUntil) || began.Sub(p.at) < s.cfg.MinGap || !resumed {
			if ok && p.leaseUntil.Equal(*r.LeaseUntil) {
				s.seen[l] = p // keep the first sighting until the gap is over
			} else {
				s.seen[l] = sighting{leaseUntil: *r.LeaseUntil, at: answered}
			}
			keep(r)
			continue
		}
		if es, ok := s.recover(ctx, r, now); ok {
			n++
			s.count("lease_expired")
			entries = append(entries, es...)
		} else {
			keep(r) // its holder extended it, or the store failed: read it again
		}
	}
	s.notify(ctx, entries, n)
	return n, nil
}

// recover requeues r, or ends it failed when it has used its attempts; it
// reports whether the fenced write applied and returns the index entries
// of a requeued run, or of the runs that its end made for the timers
// after its own.
func (s *Sweeper) recover(ctx context.Context, r *model.Run, now time.Time) ([]index.Entry, bool) {
	// The attempts that did not fail (r.Attempt - r.Failures, this one
	// among them) were lost with their node, fenced or given back: at most
	// LeaseRecoveries of them, whatever max_attempts, which bounds the
	// failures alone.
	if r.Attempt-r.Failures <= LeaseRecoveries {
		// A run claimed ahead of its instant keeps its instant (its DueAt:
		// the jittered instant of a first attempt, a retry's instant).
		due := now
		if r.DueAt.After(now) {
			due = r.DueAt
		}
		if err := s.cfg.Store.Requeue(ctx, r, due, now); err != nil {
			return nil, false // someone else recovered it, or its holder extended the lease
		}
		return []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: due}}, true
	}
	// Out of attempts: end it failed, through the same fenced requeue (a
	// holder that extended its lease meanwhile keeps the run), then
	// pending → failed. A claim that slips in between wins; the run then
	// has one attempt more.
	if err := s.cfg.Store.Requeue(ctx, r, now, now); err != nil {
		return nil, false
	}
	reason := fmt.Sprintf("lease expired on node %s (node died or paused) at attempt %d, the last one", r.Node, r.Attempt)
	made, err := s.cfg.Store.SetRunStatus(ctx, r.ID, model.RunPending, model.RunFailed, reason)
	if err != nil {
		return []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: now}}, true
	}
	s.cfg.Logger.Warn("run failed: lease expired at its last attempt",
		"timer_id", r.TimerID, "run_id", r.ID, "attempt", r.Attempt, "node", r.Node)
	entries := make([]index.Entry, len(made))
	for i, m := range made {
		entries[i] = index.EntryOf(m)
	}
	return entries, true
}

// SweepOverdue makes due now the pending runs due before the previous
// minute, which no trigger reads any more, and gives the pending runs
// placed on a node that is gone to anybody (store.UntargetRuns).
func (s *Sweeper) SweepOverdue(ctx context.Context) (int, error) {
	now := s.cfg.Clock.Now()
	if live, _ := s.liveNodes(); live != nil {
		s.untarget(ctx, live)
	}
	cutoff := time.Unix((now.Unix()/60-1)*60, 0)
	overdue, err := s.cfg.Store.PendingRuns(ctx, time.Unix(0, 0), cutoff, s.cfg.Batch)
	if err != nil {
		return 0, fmt.Errorf("sweep: overdue runs: %w", err)
	}
	var entries []index.Entry
	for _, r := range overdue {
		if err := s.cfg.Store.RescheduleRun(ctx, r.ID, now); err != nil {
			continue
		}
		entries = append(entries, index.Entry{RunID: r.ID, TimerID: r.TimerID, DueAt: now})
		s.count("misfire")
	}
	s.notify(ctx, entries, len(entries))
	return len(entries), nil
}

// SweepPlaced gives the pending runs placed on a node of the node list
// that stands by or stopped heartbeating to anybody, as SweepOverdue does,
// but only when there is such a node: the placed-run loop calls it often
// (LoopConfig.Placed), so that such runs wait a pass, not an overdue one.
// It returns how many runs it freed.
func (s *Sweeper) SweepPlaced(ctx context.Context) int {
	live, left := s.liveNodes()
	if live == nil || !left {
		return 0
	}
	return s.untarget(ctx, live)
}

// untarget frees the pending runs placed on nodes not in live: due at
// their instant, or now when that has passed, and told to the index.
func (s *Sweeper) untarget(ctx context.Context, live []string) int {
	now := s.cfg.Clock.Now()
	freed, err := s.cfg.Store.UntargetRuns(ctx, live, s.cfg.Batch)
	if err != nil {
		s.cfg.Logger.Warn("sweep: runs placed on nodes gone", "err", err)
	}
	var entries []index.Entry
	for _, r := range freed {
		due := r.DueAt
		if due.Before(now) {
			due = now
			if err := s.cfg.Store.RescheduleRun(ctx, r.ID, due); err != nil {
				continue
			}
		}
		entries = append(entries, index.Entry{RunID: r.ID, TimerID: r.TimerID, DueAt: due})
		s.count("node_gone")
	}
	s.notify(ctx, entries, len(entries))
	return len(entries)
}

// Recover gives back at once the runs that node holds in the store, all of
// them: a node that starts calls it with its own id for the runs its
// previous process left behind (it was killed), which nobody else may hold
// since a node id is one process at a time. It returns how many it gave
// back.
func (s *Sweeper) Recover(ctx context.Context, node string) (int, error) {
	runs, err := s.cfg.Store.RunningOn(ctx, node, s.cfg.Batch)
	if err != nil {
		return 0, fmt.Errorf("recover runs of node %s: %w", node, err)
	}
	now := s.cfg.Clock.Now()
	var entries []index.Entry
	n := 0
	for _, r := range runs {
		held := *r
		held.LeaseUntil = nil // fenced on node and attempt only
		if es, ok := s.recover(ctx, &held, now); ok {
			n++
			s.count("restart")
			entries = append(entries, es...)
		}
	}
	s.notify(ctx, entries, n)
	return n, nil
}

func (s *Sweeper) notify(ctx context.Context, entries []index.Entry, n int) {
	if len(entries) > 0 {
		if err := s.cfg.Index.Add(ctx, entries...); err != nil {
			s.cfg.Logger.Warn("sweep: index add", "runs", len(entries), "err", err)
		}
		if s.cfg.Notify != nil {
			s.cfg.Notify(entries)
		}
	}
	if n > 0 {
		s.cfg.Logger.Info("sweep recovered runs", "runs", n)
	}
}

// liveNodes returns Config.LiveNodes' answer, nil without one.
func (s *Sweeper) liveNodes() ([]string, bool) {
	if s.cfg.LiveNodes == nil {
		return nil, false
	}
	return s.cfg.LiveNodes()
}

func (s *Sweeper) count(kind string) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Recovered.WithLabelValues(kind).Inc()
	}
}
