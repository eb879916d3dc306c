// Package planner materialises timers' runs ahead of time. It keeps every
// enabled timer's runs in the store for a look-ahead window, bounded by count
// as well (a timer's next Config.FiresAhead fires or Config.MinAhead,
// whichever is later, so that a timer costs the same whatever its schedule),
// and adds them to the slice index, so that the trigger that holds a slice
// finds them there.
//
// Planning is idempotent: run ids are derived from (timer, instant) and the
// store ignores a run it already has, so any node may plan any timer, twice,
// and nothing doubles. In a cluster one elected node runs the periodic pass;
// every node plans a timer at once when the API changes it.
//
// Fires missed while nobody planned (the whole cluster was down for longer
// than the look-ahead) are materialised by the timer's misfire policy:
// "all" (the default) plans the MaxMissed most recent missed fires within
// the catchup window, "latest" only the latest, "skip" none. Planned runs
// then meet the policy again when they are dispatched (see package
// executor). A timer's start and end bounds and its maximum number of fires
// are applied here.
//
// A fire that planning decides not to run is not left out silently: it is
// recorded as a skipped run with its reason (model.Run.Reason), in the same
// batched insert as the pending runs: the missed fires the misfire policy
// drops (model.SkipMisfire) or that are older than the catchup window
// (model.SkipCatchupWindow), at most MaxSkipRecorded of them per timer and
// pass, the most recent; the fires past a timer's max_fires
// (model.SkipMaxFires). A paused timer is planned like any other: each
// of its fires is skipped (model.SkipPaused) by the executor when its
// instant comes, so that no skip is recorded for a fire still to come.
package planner

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/chimehq/chime/internal/base/clock"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/schedule"
)

// Store is what a Planner needs of the store: the timers to plan, the
// guarded insert of their runs and the record of their plans, and what
// max_fires needs (store.Store implements it).
type Store interface {
	FireLimits
	TimersToPlan(ctx context.Context, horizon time.Time, after store.PlanCursor, limit int) ([]*model.Timer, error)
	InsertPlanned(ctx context.Context, runs []*model.Run, versions map[string]int64) (inserted []*model.Run, err error)
	SetPlannedUntil(ctx context.Context, plans map[string]store.Plan) error
}

// Config configures a Planner.
type Config struct {
	Store Store
	Index index.Index
	// Lookahead is how far ahead runs are materialised. Default
	// DefaultLookahead.
	Lookahead time.Duration
	// Batch is how many timers one store query plans. Default 500.
	Batch int
	// MaxRunsPerTimer caps the runs one timer gets per pass. Default 2000.
	MaxRunsPerTimer int
	// FiresAhead and MinAhead bound a timer's plan by count as well as by
	// time: a timer is planned up to the later of its FiresAhead-th next
	// fire and now + MinAhead, and never past the look-ahead. A timer that
	// fires every second then holds MinAhead's worth of pending runs (30),
	// not the look-ahead's (600), and costs about what an hourly one costs
	// to create, update or enable. Defaults DefaultFiresAhead and
	// DefaultMinAhead.
	//
	// MinAhead must cover the time the periodic pass may not run: about
	// two pass intervals plus the planner leadership's failover (the
	// engine derives it from its pass interval). Fires past a plan that ran
	// out are not lost, but late: the next pass plans them as missed fires,
	// by the timer's misfire policy.
	FiresAhead int
	MinAhead   time.Duration
	// MisfireGrace is how late a fire may be found and still count as on
	// time: missed fires no later than this run whatever the misfire
	// policy (the executor's grace). Default model.MisfireGrace.
	MisfireGrace time.Duration
	// PassBudget, if positive, bounds the time one PlanDue spends reading
	// timers: past it, the pass writes what it has and ends, and the next
	// pass goes on. Timers are read in PlannedUntil order, so every pass
	// serves the plans that end first: a pass that would take a minute (a
	// cold start with a million timers) does not leave the timers planned
	// by count (MinAhead ahead) without runs while it plans hourly ones.
	// Zero: no bound.
	PassBudget time.Duration
	// OnPlanned, if set, is told about every run that became pending, after
	// it was added to the index (the node's trigger uses it to see new runs
	// at once).
	OnPlanned func(entries []index.Entry)
	// Clock is the cluster's clock (default clock.System(0)).
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// Planner materialises runs. It is safe for concurrent use.
type Planner struct {
	cfg Config
}

// New returns a Planner with cfg's defaults filled in.
func New(cfg Config) *Planner {
	if cfg.Lookahead <= 0 {
		cfg.Lookahead = DefaultLookahead
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.MaxRunsPerTimer <= 0 {
		cfg.MaxRunsPerTimer = 2000
	}
	if cfg.FiresAhead <= 0 {
		cfg.FiresAhead = DefaultFiresAhead
	}
	if cfg.MinAhead <= 0 {
		cfg.MinAhead = DefaultMinAhead
	}
	if cfg.MisfireGrace <= 0 {
		cfg.MisfireGrace = model.MisfireGrace
	}
	cfg.Clock = clock.Default(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Planner{cfg: cfg}
}

// Lookahead is the planning window.
func (p *Planner) Lookahead() time.Duration { return p.cfg.Lookahead }

// Never is the PlannedUntil of a timer that will not fire again.
var Never = time.Unix(0, math.MaxInt64).UTC()

// MaxMissed caps the missed fires of one timer that a planning pass
// materialises after an outage (like Kubernetes CronJob's limit of 100).
const MaxMissed = 100

// ScheduleOf compiles a timer's schedule in its zone, anchoring an @every
// at the timer's start bound, or else its creation. It is timers.Schedule,
// the one home of that rule, kept here for the planner's callers.
func ScheduleOf(t *model.Timer) (schedule.Schedule, error) { return timers.Schedule(t) }

// Fires returns t's runs for the window that starts after t.PlannedUntil
// (or now, for a timer never planned; model.MisfireGrace before now for a
// one-shot never planned, so one saved just after its instant still fires)
// and ends before horizon, or at the timer's count bound
// (Config.FiresAhead, Config.MinAhead) if that comes first, and the new
// PlannedUntil. A timer without a schedule (one that runs only after its
// upstreams) has no fires: it is planned until Never. When t.PlannedUntil
// is in the past, the fires missed since are included as the misfire
// policy says (see the package doc).
func (p *Planner) Fires(t *model.Timer, now, horizon time.Time) (runs []*model.Run, plannedUntil time.Time, err error) {
	runs, plan, err := p.fires(t, now, horizon)
	return runs, plan.Until, err
}

// fires is Fires, which also returns t's next fire after now (within its
// start and end bounds; zero when none), the model.Timer.NextFireAt that
// planning records.
func (p *Planner) fires(t *model.Timer, now, horizon time.Time) (runs []*model.Run, plan store.Plan, err error) {
	if t.Schedule == "" {
		// Runs only after its upstreams (model.Timer.After): no fires.
		return nil, store.Plan{Until: Never}, nil
	}
	s, err := timers.Schedule(t)
	if err != nil {
		return nil, plan, err
	}
	from := now
	if t.PlannedUntil.IsZero() {
		from = firstFrom(s, now) // as window plans it
	}
	plan.NextFire = nextFire(s, t.Policy, from)
	runs, plan.Until = p.window(t, s, now, horizon)
	return runs, plan, nil
}

// nextFire returns the first fire of s after now within pol's bounds, or
// zero.
func nextFire(s schedule.Schedule, pol model.Policy, now time.Time) time.Time {
	from := now
	if !pol.StartAt.IsZero() && from.Before(pol.StartAt) {
		from = pol.StartAt.Add(-time.Nanosecond)
	}
	f := s.Next(from)
	if !pol.EndAt.IsZero() && f.After(pol.EndAt) {
		return time.Time{}
	}
	return f
}

// window is the body of Fires, with t's compiled schedule s.
func (p *Planner) window(t *model.Timer, s schedule.Schedule, now, horizon time.Time) (runs []*model.Run, plannedUntil time.Time) {
	horizon = p.countBound(s, now, horizon)
	pol := t.Policy
	inBounds := func(f time.Time) bool {
		return (pol.StartAt.IsZero() || !f.Before(pol.StartAt)) && (pol.EndAt.IsZero() || !f.After(pol.EndAt))
	}
	from := t.PlannedUntil
	if from.IsZero() {
		from = firstFrom(s, now)
	} else if from.Before(now) {
		for _, m := range missed(s, t.ID, pol, from, now, p.cfg.MisfireGrace) {
			if !inBounds(m.at) {
				continue
			}
			if m.reason != "" {
				runs = append(runs, model.Skipped(t.ID, m.at, now, m.reason, m.why))
			} else {
				runs = append(runs, newRun(t, m.at, now))
			}
		}
		from = now
	}
	if !pol.StartAt.IsZero() && from.Before(pol.StartAt) {
		from = pol.StartAt.Add(-time.Nanosecond)
	}
	end := horizon
	if !pol.EndAt.IsZero() && pol.EndAt.Before(horizon) {
		end = pol.EndAt.Add(time.Nanosecond)
	}
	plannedUntil = horizon.Add(-time.Nanosecond)
	limit := len(runs) + p.cfg.MaxRunsPerTimer
	f := s.Next(from)
	for ; !f.IsZero() && f.Before(end); f = s.Next(f) {
		if len(runs) >= limit {
			plannedUntil = runs[len(runs)-1].ScheduledAt
			break
		}
		runs = append(runs, newRun(t, f, now))
	}
	if f.IsZero() || (!pol.EndAt.IsZero() && f.After(pol.EndAt)) {
		// No fire after this window (a one-shot that fired, an end bound
		// passed): the timer needs no planning until it is changed, and a
		// change resets PlannedUntil.
		plannedUntil = Never
	}
	return runs, plannedUntil
}

// firstFrom returns where the plan of a timer never planned starts: now,
// or model.MisfireGrace before now for a one-shot. A one-shot saved just
// after its instant (the save took longer than the caller's margin) then
// fires late, as a fire found within the grace does, instead of never; a
// run it already has keeps the fire once, since the store's unique (timer,
// instant) refuses a second.
func firstFrom(s schedule.Schedule, now time.Time) time.Time {
	if schedule.IsOneShot(s) {
		return now.Add(-model.MisfireGrace)
	}
	return now
}

// countBound returns horizon, or an earlier end for a timer whose next
// Config.FiresAhead fires all come before now + Config.MinAhead and before
// horizon: just after the later of its FiresAhead-th fire and now +
// MinAhead. The bound counts from now, not from the timer's PlannedUntil,
// so replanning a timer tops its plan up to the same size instead of
// growing it.
func (p *Planner) countBound(s schedule.Schedule, now, horizon time.Time) time.Time {
	bound := now.Add(p.cfg.MinAhead)
	if !bound.Before(horizon) {
		return horizon
	}
	f := now
	for range p.cfg.FiresAhead {
		if f = s.Next(f); f.IsZero() || !f.Before(horizon) {
			return horizon
		}
	}
	if f.After(bound) {
		bound = f
	}
	return bound.Add(time.Nanosecond)
}

// MaxSkipRecorded caps the missed fires of one timer that a planning pass
// records skipped (the most recent ones): an outage of a day would
// otherwise write 86,400 rows for an every-second timer. Older missed
// fires are neither run nor recorded.
const MaxSkipRecorded = 1000

// missedFire is a fire found missed: run it late when reason is empty,
// else record it skipped for reason, explained by why.
type missedFire struct {
	at          time.Time
	reason, why string
}

// missed returns the fires in (from, now], in time order, that the misfire
// policy runs (no reason) and the most recent of those it drops (with
// their reason), at most MaxMissed of the first and MaxSkipRecorded of the
// second. A fire's lateness counts from its jittered instant (timer
// timerID's offset): a fire at most grace late is not missed and runs,
// whatever the policy, as the executor would run it; the catchup window
// and the policy judge the later ones.
func missed(s schedule.Schedule, timerID string, pol model.Policy, from, now time.Time, grace time.Duration) []missedFire {
	window := pol.CatchupWindow
	// Walk forward, remembering the most recent fires.
	keep := MaxMissed + MaxSkipRecorded
	var fires []time.Time
	walked := 0
	for f := s.Next(from); !f.IsZero() && !f.After(now) && walked < 10_000_000; f = s.Next(f) {
		walked++
		fires = append(fires, f)
		if len(fires) > 2*keep {
			fires = append(fires[:0], fires[len(fires)-keep:]...)
		}
	}
	if len(fires) > keep {
		fires = fires[len(fires)-keep:]
	}
	// The fires that may run, newest first: within the catchup window,
	// as many as the policy runs.
	runs := 0
	switch pol.Misfire {
	case model.MisfireSkip:
	case model.MisfireLatest:
		runs = 1
	default:
		runs = MaxMissed
	}
	out := make([]missedFire, len(fires))
	for i := len(fires) - 1; i >= 0; i-- {
		f := fires[i]
		late := now.Sub(pol.DueAt(timerID, f))
		switch {
		case late <= grace:
			out[i] = missedFire{at: f}
			runs = max(runs-1, 0)
		case window > 0 && late > window:
			out[i] = missedFire{f, model.SkipCatchupWindow,
				fmt.Sprintf("missed: %s late, beyond the catchup window of %s", late.Round(time.Millisecond), pol.CatchupWindow)}
		case runs > 0:
			out[i] = missedFire{at: f}
			runs--
		case pol.Misfire == model.MisfireSkip:
			out[i] = missedFire{f, model.SkipMisfire, fmt.Sprintf("missed: %s late (misfire policy skip)", late.Round(time.Millisecond))}
		case pol.Misfire == model.MisfireLatest:
			out[i] = missedFire{f, model.SkipMisfire, "missed: superseded by a later fire (misfire policy latest)"}
		default:
			out[i] = missedFire{f, model.SkipMisfire, fmt.Sprintf("missed: older than the %d most recent missed fires (misfire policy all)", MaxMissed)}
		}
	}
	// Drop the oldest skips beyond MaxSkipRecorded (runs are the newest).
	skips := 0
	for i := len(out) - 1; i >= 0; i-- {
		if out[i].reason == "" {
			continue
		}
		if skips++; skips > MaxSkipRecorded {
			out = out[i+1:]
			break
		}
	}
	return out
}

// limitFires keeps the pending runs that fit in the timer's maximum
// number of fires and records the others skipped (model.SkipMaxFires), and
// disables the timer once every allowed fire has ended (then it records
// nothing: a disabled timer has no fires). The fires counted are the
// schedule's (store.Store.CountFires): manual runs, shards and runs made
// by upstream ends are not, and those retention deleted still are.
func (p *Planner) limitFires(ctx context.Context, t *model.Timer, runs []*model.Run) ([]*model.Run, error) {
	c, err := p.cfg.Store.CountFires(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	left := t.Policy.MaxFires - c.Ended - c.Open
	if left <= 0 {
		disabled, err := DisableIfExhausted(ctx, p.cfg.Store, t.ID, p.cfg.Clock.Now(), p.cfg.Logger)
		if err != nil || disabled {
			return nil, err
		}
	}
	why := fmt.Sprintf("the timer made its maximum number of fires (policy max_fires %d)", t.Policy.MaxFires)
	for i, r := range runs {
		if r.Status == model.RunSkipped {
			continue
		}
		if left > 0 {
			left--
			continue
		}
		runs[i] = model.Skipped(t.ID, r.ScheduledAt, r.CreatedAt, model.SkipMaxFires, why)
	}
	return runs, nil
}

// FireLimits is what DisableIfExhausted needs of the store: a timer, the
// counts of its fires and runs, and the write that disables it
// (store.Store implements it).
type FireLimits interface {
	GetTimer(ctx context.Context, id string) (*model.Timer, error)
	CountFires(ctx context.Context, timerID string) (store.FireCount, error)
	CountRuns(ctx context.Context, timerID string, statuses ...model.RunStatus) (int, error)
	UpdateTimer(ctx context.Context, t *model.Timer) error
}

// DisableIfExhausted disables a timer with a maximum number of fires once
// they have all been made (store.Store.CountFires) and none of its runs is
// pending or running, and reports whether it did.
func DisableIfExhausted(ctx context.Context, st FireLimits, timerID string, now time.Time, log *slog.Logger) (bool, error) {
	cur, err := st.GetTimer(ctx, timerID)
	if err != nil || !cur.Enabled || cur.Policy.MaxFires <= 0 {
		return false, err
	}
	fired, err := st.CountFires(ctx, timerID)
	if err != nil || fired.Ended < cur.Policy.MaxFires {
		return false, err
	}
	open, err := st.CountRuns(ctx, timerID, model.RunPending, model.RunRunning)
	if err != nil || open > 0 {
		return false, err
	}
	cur.Enabled = false
	cur.UpdatedAt = now
	if err := st.UpdateTimer(ctx, cur); err != nil {
		return false, err
	}
	log.Info("timer made its maximum number of fires: disabled", "timer_id", timerID, "max_fires", cur.Policy.MaxFires)
	return true, nil
}

// newRun returns the run of t's fire at the nominal instant at: its id and
// ScheduledAt are the nominal instant's, its DueAt the jittered one
// (model.Policy.Jitter).
func newRun(t *model.Timer, at, now time.Time) *model.Run {
	return &model.Run{
		ID:          model.RunID(t.ID, at),
		TimerID:     t.ID,
		ScheduledAt: at,
		DueAt:       t.Policy.DueAt(t.ID, at),
		Status:      model.RunPending,
		CreatedAt:   now,
	}
}

// TimerRuns returns the runs of t, an enabled timer about to be saved, and
// how far they plan it and its next fire, without writing them: the save path writes them
// with the timer in one transaction (store.Store.SaveTimer), then calls
// Planned with the runs it inserted. A timer whose fires cannot be
// computed gets no runs and a zero PlannedUntil (the periodic pass logs
// it).
func (p *Planner) TimerRuns(ctx context.Context, t *model.Timer) ([]*model.Run, store.Plan) {
	now := p.cfg.Clock.Now()
	var runs []*model.Run
	var plan store.Plan
	p.collect(ctx, []*model.Timer{t}, now, now.Add(p.cfg.Lookahead), false, func(_ *model.Timer, rs []*model.Run, pl store.Plan) {
		runs, plan = rs, pl
	})
	return runs, plan
}

// Planned adds runs the store inserted to the index, tells OnPlanned and
// counts them.
func (p *Planner) Planned(ctx context.Context, inserted []*model.Run) {
	entries := make([]index.Entry, 0, len(inserted))
	skipped := map[string]int{}
	for _, r := range inserted {
		if r.Status != model.RunPending {
			skipped[r.Reason]++
			continue
		}
		entries = append(entries, index.EntryOf(r))
	}
	for reason, n := range skipped {
		p.cfg.Metrics.Skipped(reason, n)
	}
	if len(entries) == 0 {
		return
	}
	if err := p.cfg.Index.Add(ctx, entries...); err != nil {
		// The index is a cache: the trigger reconciles its slices with
		// the store, so a failed add delays nothing beyond a poll.
		p.cfg.Logger.Warn("plan: index add", "runs", len(entries), "err", err)
	}
	if p.cfg.OnPlanned != nil {
		p.cfg.OnPlanned(entries)
	}
	if p.cfg.Metrics != nil {
		p.cfg.Metrics.RunsPlanned.Add(float64(len(entries)))
	}
}

// PlanDue runs one planning pass over every timer whose plan ends within
// half the look-ahead, and returns how many timers it looked at (a timer
// that both passes below look at counts twice).
//
// Timers whose plan ends within the next few seconds (new timers, and every
// timer after an outage or at a cold start with many timers) are first
// planned for those seconds only, and then for the whole look-ahead with the
// others: a pass that inserts hundreds of thousands of runs puts the runs due
// first in the store first, instead of the whole look-ahead of the first
// timers while the next seconds of the last ones wait.
func (p *Planner) PlanDue(ctx context.Context) (int, error) {
	now := p.cfg.Clock.Now()
	var stop time.Time // zero: no budget
	if p.cfg.PassBudget > 0 {
		stop = now.Add(p.cfg.PassBudget)
	}
	urgent := min(urgentWindow, p.cfg.Lookahead/4)
	n, err := p.pass(ctx, now, now.Add(urgent), now.Add(2*urgent), true, stop)
	if err != nil {
		return n, err
	}
	m, err := p.pass(ctx, now, now.Add(p.cfg.Lookahead/2), now.Add(p.cfg.Lookahead), false, stop)
	return n + m, err
}

// urgentWindow: timers planned less than this far ahead are planned for
// twice this first (see PlanDue).
const urgentWindow = 5 * time.Second

// flushRuns is how many runs a pass collects, over pages of timers, before
// it writes them. The runs are written in time order, by windows of a few
// seconds (compareFires), so that many runs share each page of the
// store's runs table (clustered on the id, which starts with the second):
// a million timers' runs spread over a ten-minute look-ahead, written page
// of timers by page of timers, would touch a page of the table per run.
const flushRuns = 50_000

// writeRuns is how many of a batch's runs flush hands the store at once:
// the batch waits in its compact form (fire), and only these are made
// model.Runs, written and read back (InsertPlanned returns the rows it
// inserted) at a time.
const writeRuns = 5_000

// pass plans every timer whose plan ends before threshold up to horizon.
// An urgent pass records the PlannedUntil only of timers it made runs for:
// the others are left to the full pass that follows, as if it had not run.
//
// Reading and computing the next batch overlaps with writing the previous
// one: the reads go to the store's readers (and the second core) while the
// writes hold its writer. Pages of timers are disjoint, so a page read
// before the previous batch is written is the same page read after.
//
// A non-zero stop ends the reading at that time (Config.PassBudget).
func (p *Planner) pass(ctx context.Context, now, threshold, horizon time.Time, urgent bool, stop time.Time) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Unbuffered: the reader collects the next batch while one is written,
	// and no third waits in memory (a batch is 50,000 runs, about 3 MiB as fires;
	// the writer is the slower side, so a buffered batch only waited).
	batches := make(chan *planBatch)
	var total int
	var readErr error
	go func() {
		defer close(batches)
		var after store.PlanCursor
		b := &planBatch{now: now}
		for {
			timers, err := p.cfg.Store.TimersToPlan(ctx, threshold, after, p.cfg.Batch)
			if err != nil {
				readErr = fmt.Errorf("plan: list timers: %w", err)
				return
			}
			if len(timers) > 0 {
				// The next page starts after this one: the cursor does
				// not depend on the PlannedUntil that flush will write.
				after = store.CursorOf(timers[len(timers)-1])
				p.collect(ctx, timers, now, horizon, urgent, b.add)
				total += len(timers)
			}
			last := len(timers) < p.cfg.Batch || (!stop.IsZero() && !p.cfg.Clock.Now().Before(stop))
			if last || len(b.fires) >= flushRuns {
				select {
				case batches <- b:
				case <-ctx.Done():
					return
				}
				b = &planBatch{now: now}
			}
			if last {
				return
			}
		}
	}()
	var err error
	for b := range batches {
		if err == nil {
			if err = p.flush(ctx, b); err != nil {
				cancel()
			}
		}
	}
	// The producer has returned (batches is closed): total and readErr are
	// its last writes.
	if err == nil {
		err = readErr
	}
	return total, err
}

// writeWindow is the span of instants whose runs flush writes in timer
// order (see compareFires): 2^34 ns, about 17 s.
const writeWindow = 34

// compareFires orders the fires of a batch as flush writes them: by
// window of instants (writeWindow), then by run id after its second
// (model.RunID: the timer's key, then a hash). A part of writeRuns runs
// then holds a few seconds of a range of timers, which are neighbours
// both in the runs table (clustered on the id: second, then timer) and
// in its (timer_id, scheduled_at) index. In pure id order each part of a
// pass that tops every-second timers up by a few seconds held a fraction
// of a second of every timer, and each commit rewrote nearly every leaf of
// the index (docs/performance.md, "Knobs").
func compareFires(x, y fire) int {
	if c := cmp.Compare(x.at>>writeWindow, y.at>>writeWindow); c != 0 {
		return c
	}
	if c := bytes.Compare(x.key[4:], y.key[4:]); c != 0 {
		return c
	}
	return bytes.Compare(x.key[:4], y.key[:4])
}

// planBatch is what a pass has collected and not yet written: the runs
// in their compact form (a pass holds two batches of flushRuns: the one
// written and the one read meanwhile), and the timers' new PlannedUntil
// and next fire, with the version of each timer that they were computed
// from (store.Plan.Version).
type planBatch struct {
	now   time.Time // the pass's: every run's CreatedAt
	fires []fire
	plans []timerPlan
}

type timerPlan struct {
	timerID string
	plan    store.Plan
}

// fire is a run that planning made (newRun or model.Skipped, at the pass's
// now) as a batch keeps it until it is written: 56 bytes, where a
// *model.Run with its id string is about 370 (the heap profile of a
// pass held 30 MiB of them for two batches).
type fire struct {
	key     [model.RunIDLen]byte // the run id's bytes (model.ParseRunID), in its order
	timerID string               // shared by the timer's fires
	at, due int64                // ScheduledAt and DueAt, Unix ns
	skip    *skipNote
}

// skipNote is what a fire recorded skipped adds: model.Run's Reason and
// Error.
type skipNote struct{ reason, why string }

// add is collect's sink for a pass: it keeps t's runs as fires, and its
// plan with the version of t that the runs were computed from (flush
// writes both only while the timer still has it).
func (b *planBatch) add(t *model.Timer, runs []*model.Run, plan store.Plan) {
	for _, r := range runs {
		b.fires = append(b.fires, fireOf(r))
	}
	plan.Version = t.Version
	b.plans = append(b.plans, timerPlan{t.ID, plan})
}

// fireOf returns r, a run of newRun or model.Skipped, as a fire.
func fireOf(r *model.Run) fire {
	key, ok := model.ParseRunID(r.ID)
	if !ok {
		// Planning's runs have ids of model.RunID's form; r.ID is that.
		key, _ = model.ParseRunID(model.RunID(r.TimerID, r.ScheduledAt))
	}
	f := fire{key: key, timerID: r.TimerID, at: r.ScheduledAt.UnixNano(), due: r.DueAt.UnixNano()}
	if r.Status == model.RunSkipped {
		f.skip = &skipNote{r.Reason, r.Error}
	}
	return f
}

// run returns the model.Run of f, made at now: what newRun or
// model.Skipped returned for it.
func (f *fire) run(now time.Time) *model.Run {
	at := time.Unix(0, f.at).UTC()
	if f.skip != nil {
		return model.Skipped(f.timerID, at, now, f.skip.reason, f.skip.why)
	}
	return &model.Run{ID: hex.EncodeToString(f.key[:]), TimerID: f.timerID, ScheduledAt: at, DueAt: time.Unix(0, f.due).UTC(),
		Status: model.RunPending, CreatedAt: now}
}

// collect computes the runs of timers up to horizon, and their new
// PlannedUntil and next fire, and hands each timer's to emit (the timers
// skipped are logged, or, on an urgent pass, have no runs yet).
func (p *Planner) collect(ctx context.Context, timers []*model.Timer, now, horizon time.Time, urgent bool, emit func(t *model.Timer, runs []*model.Run, plan store.Plan)) {
	for _, t := range timers {
		runs, plan, err := p.fires(t, now, horizon)
		if err != nil {
			// A timer whose schedule no longer compiles (zone data changed)
			// must not stop the others.
			p.cfg.Logger.Error("plan timer", "timer_id", t.ID, "err", err)
			continue
		}
		if t.Policy.MaxFires > 0 {
			if runs, err = p.limitFires(ctx, t, runs); err != nil {
				p.cfg.Logger.Error("plan timer", "timer_id", t.ID, "err", err)
				continue
			}
		}
		if urgent && len(runs) == 0 && !plan.Until.Equal(Never) {
			continue
		}
		emit(t, runs, plan)
	}
}

// flush writes b's runs in compareFires order (time order by windows of
// a few seconds, then timer order: see flushRuns), writeRuns at a time,
// adding each part to the index as it is written, then records the
// timers' PlannedUntil (after the runs: a crash in between plans them
// again, which is idempotent).
//
// Both writes are guarded by the version of each timer that the pass
// read (store.Store.InsertPlanned, store.Plan.Version): a timer saved,
// disabled, paused or deleted since then gets neither the runs of its
// old definition nor a PlannedUntil past the plan its save wrote; the
// next pass plans it from what the save left (see docs/guarantees.md,
// "A save beside a planning pass").
func (p *Planner) flush(ctx context.Context, b *planBatch) error {
	slices.SortFunc(b.fires, compareFires)
	// A run once, as InsertRuns would (one timer's fires are distinct, and
	// a pass reads each timer once: this is a guard).
	b.fires = slices.CompactFunc(b.fires, func(x, y fire) bool { return x.key == y.key && x.timerID == y.timerID })
	plans := make(map[string]store.Plan, len(b.plans))
	versions := make(map[string]int64, len(b.plans))
	for _, tp := range b.plans {
		plans[tp.timerID] = tp.plan
		versions[tp.timerID] = tp.plan.Version
	}
	for part := range slices.Chunk(b.fires, writeRuns) {
		runs := make([]*model.Run, len(part))
		for i := range part {
			runs[i] = part[i].run(b.now)
		}
		inserted, err := p.cfg.Store.InsertPlanned(ctx, runs, versions)
		if err != nil {
			return fmt.Errorf("plan: insert runs: %w", err)
		}
		p.Planned(ctx, inserted)
	}
	if err := p.cfg.Store.SetPlannedUntil(ctx, plans); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return nil
}
